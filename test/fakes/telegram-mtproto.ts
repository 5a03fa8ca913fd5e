import { createHash, pbkdf2Sync, randomBytes } from 'node:crypto';
import { Api } from 'telegram';
import { BinaryReader } from 'telegram/extensions/BinaryReader.js';
import { RPCMessageToError } from 'telegram/errors/index.js';
import type { TelegramAccountClient, TelegramClientFactory, TelegramClientOptions } from '../../src/platforms/telegram/account/client.js';

/**
 * Telegram's MTProto servers as a linked account's client sees them, at the library's edge: requests
 * arrive as GramJS's own TL objects, are serialized with the real schema and read back (so only real
 * constructors with real fields pass), and are answered the way Telegram answers — with the
 * library's own error classes for what Telegram refuses. One `FakeTelegram` is "Telegram" for every
 * app of a test; each app gets its own factory, so the test can tell which process did what.
 *
 * The cloud password is checked by SRP on the server side, written here from Telegram's description
 * (core.telegram.org/api/srp), apart from the client's computation in GramJS.
 */

// Telegram's 2048-bit SRP prime, g = 3.
const PRIME_HEX =
  'c71caeb9c6b1c9048e6c522f70f13f73980d40238e3e21c14934d037563d930f48198a0aa7c14058229493d22530f4dbfa336f6e0ac925139543aed44cce7c3720fd51f69458705ac68cd4fe6b6b13abdc9746512969328454f18faf8c595f642477fe96bb2a941d5bcd1d4ac8cc49880708fa9b378e3c4f3a9060bee67cf9a4a4a695811051907e162753b56b0f6b410dba74d8a84b2a14b3144e0ef1284754fd17ed950d5965b4b9dd46582db1178d169c6bc465b0d6ff9ca3928fef5b9ae4e418fc15e83ebea0f87fa9ff5eed70050ded2849f47bf959d956850ce929851f0d8115f635b105ee2e4e15d04b2454bf6f4fadf034b10403119cd8e3b92fcc5b';
const P = BigInt(`0x${PRIME_HEX}`);
const G = 3n;

const sha256 = (...parts: Buffer[]): Buffer => createHash('sha256').update(Buffer.concat(parts)).digest();
const pad256 = (n: bigint): Buffer => Buffer.from(n.toString(16).padStart(512, '0'), 'hex');
const toBig = (b: Buffer): bigint => BigInt(`0x${b.toString('hex') || '0'}`);
function modPow(base: bigint, exp: bigint, mod: bigint): bigint {
  let result = 1n;
  base %= mod;
  while (exp > 0n) {
    if (exp & 1n) result = (result * base) % mod;
    base = (base * base) % mod;
    exp >>= 1n;
  }
  return result;
}
const salted = (data: Buffer, salt: Buffer): Buffer => sha256(salt, data, salt);
/** x of Telegram's SRP: PH2(password, salt1, salt2). */
function passwordHash(password: string, salt1: Buffer, salt2: Buffer): bigint {
  const ph1 = salted(salted(Buffer.from(password, 'utf8'), salt1), salt2);
  return toBig(salted(pbkdf2Sync(ph1, salt1, 100_000, 64, 'sha512'), salt2));
}

export interface FakeAccount {
  userId: bigint;
  username?: string;
  phone?: string;
  /** The data centre the account lives in (a login from another DC is told LoginTokenMigrateTo). */
  dc?: number;
  /** A cloud password: the login stops at SESSION_PASSWORD_NEEDED until auth.checkPassword. */
  password?: string;
}

interface AuthKey {
  key: string;
  dc: number;
  userId?: bigint;
  /** Scanned by an account with a password: waits for auth.checkPassword. */
  awaitingPassword?: FakeAccount;
  srp?: { b: bigint; B: bigint; v: bigint; salt1: Buffer; salt2: Buffer; srpId: bigint };
  loggedOut: boolean;
}

interface LoginToken {
  token: Buffer;
  key: AuthKey;
  expiresAt: number;
  scannedBy?: FakeAccount;
  connection: FakeConnection;
}

export interface RecordedRequest {
  instance: string;
  className: string;
  request: Api.AnyRequest;
}

class FakeConnection implements TelegramAccountClient {
  connected = false;
  handlers: Array<(update: unknown) => void> = [];
  constructor(
    readonly fake: FakeTelegram,
    readonly instance: string,
    public key: AuthKey,
    readonly options: TelegramClientOptions,
  ) {}
  async connect(): Promise<void> {
    if (this.fake.unreachable) throw new Error('connect ECONNREFUSED (fake Telegram is unreachable)');
    this.connected = true;
    this.fake.connections.add(this);
  }
  async invoke<R extends Api.AnyRequest>(request: R): Promise<R['__response']> {
    if (!this.connected) throw new Error('not connected');
    return this.fake.answer(this, request) as Promise<R['__response']>;
  }
  async switchDc(dcId: number): Promise<void> {
    // A new data centre means a new auth key there.
    this.key = this.fake.newKey(dcId);
  }
  exportSession(): string {
    return `fake-session:${this.key.dc}:${this.key.key}`;
  }
  onUpdate(handler: (update: unknown) => void): void {
    this.handlers.push(handler);
  }
  async disconnect(): Promise<void> {
    this.connected = false;
    this.fake.connections.delete(this);
  }
  push(update: unknown): void {
    for (const handle of this.handlers) handle(update);
  }
}

export class FakeTelegram {
  readonly apiId = 611335;
  readonly apiHash = 'd524b414d21f4d37f08684c1df41ac9c';
  readonly requests: RecordedRequest[] = [];
  readonly connections = new Set<FakeConnection>();
  readonly keys = new Map<string, AuthKey>();
  readonly tokens: LoginToken[] = [];
  /** Seconds a login token lives (Telegram: about 30). */
  tokenTtlSeconds = 30;
  unreachable = false;

  factory(instance: string): TelegramClientFactory {
    return (options) => {
      let key: AuthKey;
      if (options.session !== undefined) {
        const [, dc, id] = options.session.split(':');
        key = this.keys.get(id ?? '') ?? { key: id ?? 'unknown', dc: Number(dc), loggedOut: true };
      } else key = this.newKey(2);
      return new FakeConnection(this, instance, key, options);
    };
  }

  newKey(dc: number): AuthKey {
    const key: AuthKey = { key: randomBytes(16).toString('hex'), dc, loggedOut: false };
    this.keys.set(key.key, key);
    return key;
  }

  /** The phone scans the QR code showing `url` (tg://login?token=…) while logged in as `account`. */
  scan(url: string, account: FakeAccount): void {
    const token = Buffer.from(new URL(url).searchParams.get('token') ?? '', 'base64url');
    const found = this.tokens.find((t) => t.token.equals(token));
    if (!found) throw new Error('the phone does not know this login token');
    if (Date.now() > found.expiresAt) throw new Error('the login token expired before the scan');
    found.scannedBy = account;
    found.connection.push(new Api.UpdateLoginToken());
  }

  /** The account logs this authorization out from its phone (Settings → Devices → Terminate). */
  terminate(sessionString: string): void {
    const key = this.keys.get(sessionString.split(':')[2] ?? '');
    if (key) key.loggedOut = true;
  }

  authorizedKeys(): AuthKey[] {
    return [...this.keys.values()].filter((k) => k.userId !== undefined && !k.loggedOut);
  }

  private refuse(request: Api.AnyRequest, code: number, message: string): never {
    throw RPCMessageToError(new Api.RpcError({ errorCode: code, errorMessage: message }), request);
  }

  private user(account: FakeAccount): Api.User {
    return new Api.User({ id: account.userId as never, self: true, username: account.username, phone: account.phone, accessHash: 1n as never });
  }

  private authorize(conn: FakeConnection, account: FakeAccount, request: Api.AnyRequest): Api.auth.LoginTokenSuccess {
    if (account.password !== undefined) {
      conn.key.awaitingPassword = account;
      this.refuse(request, 401, 'SESSION_PASSWORD_NEEDED');
    }
    conn.key.userId = account.userId;
    return new Api.auth.LoginTokenSuccess({ authorization: new Api.auth.Authorization({ user: this.user(account) }) });
  }

  async answer(conn: FakeConnection, request: Api.AnyRequest): Promise<unknown> {
    // Only the real TL schema passes: serialize with it and read it back.
    const bytes = (request as unknown as { getBytes(): Buffer }).getBytes();
    const reread = new BinaryReader(bytes).tgReadObject() as { className?: string };
    if (reread.className !== request.className) throw new Error(`not a TL request: ${request.className}`);
    this.requests.push({ instance: conn.instance, className: request.className, request });
    const key = conn.key;
    if (key.loggedOut && request.className !== 'auth.ExportLoginToken') this.refuse(request, 401, 'AUTH_KEY_UNREGISTERED');

    if (request instanceof Api.auth.ExportLoginToken) {
      if (request.apiId !== this.apiId || request.apiHash !== this.apiHash) this.refuse(request, 400, 'API_ID_INVALID');
      const scanned = this.tokens.find((t) => t.key === key && t.scannedBy);
      if (scanned?.scannedBy) {
        const account = scanned.scannedBy;
        if ((account.dc ?? 2) !== key.dc) return new Api.auth.LoginTokenMigrateTo({ dcId: account.dc ?? 2, token: scanned.token });
        return this.authorize(conn, account, request);
      }
      const token: LoginToken = { token: randomBytes(32), key, expiresAt: Date.now() + this.tokenTtlSeconds * 1000, connection: conn };
      this.tokens.push(token);
      return new Api.auth.LoginToken({ expires: Math.floor(token.expiresAt / 1000), token: token.token });
    }
    if (request instanceof Api.auth.ImportLoginToken) {
      const found = this.tokens.find((t) => Buffer.from(request.token).equals(t.token));
      if (!found?.scannedBy) this.refuse(request, 400, 'AUTH_TOKEN_INVALID');
      if ((found.scannedBy.dc ?? 2) !== key.dc) this.refuse(request, 400, 'AUTH_TOKEN_INVALID');
      return this.authorize(conn, found.scannedBy, request);
    }
    if (request instanceof Api.account.GetPassword) {
      const account = key.awaitingPassword;
      if (!account?.password) return new Api.account.Password({ hasPassword: false, newAlgo: new Api.PasswordKdfAlgoUnknown(), newSecureAlgo: new Api.SecurePasswordKdfAlgoUnknown(), secureRandom: randomBytes(32) });
      const salt1 = randomBytes(40);
      const salt2 = randomBytes(16);
      const v = modPow(G, passwordHash(account.password, salt1, salt2), P);
      const k = toBig(sha256(pad256(P), pad256(G)));
      const b = toBig(randomBytes(256)) % P;
      const B = (k * v + modPow(G, b, P)) % P;
      const srpId = BigInt(`0x${randomBytes(7).toString('hex')}`);
      key.srp = { b, B, v, salt1, salt2, srpId };
      const algo = new Api.PasswordKdfAlgoSHA256SHA256PBKDF2HMACSHA512iter100000SHA256ModPow({ salt1, salt2, g: 3, p: pad256(P) });
      return new Api.account.Password({
        hasPassword: true,
        currentAlgo: algo,
        srp_B: pad256(B),
        srpId: srpId as never,
        newAlgo: algo,
        newSecureAlgo: new Api.SecurePasswordKdfAlgoUnknown(),
        secureRandom: randomBytes(32),
      });
    }
    if (request instanceof Api.auth.CheckPassword) {
      const account = key.awaitingPassword;
      const srp = key.srp;
      const check = request.password;
      if (!account || !srp || !(check instanceof Api.InputCheckPasswordSRP)) this.refuse(request, 400, 'SRP_ID_INVALID');
      if (BigInt(String(check.srpId)) !== srp.srpId) this.refuse(request, 400, 'SRP_ID_INVALID');
      const A = toBig(Buffer.from(check.A));
      const u = toBig(sha256(pad256(A), pad256(srp.B)));
      const S = modPow((A * modPow(srp.v, u, P)) % P, srp.b, P);
      const K = sha256(pad256(S));
      const hp = sha256(pad256(P));
      const hg = sha256(pad256(G));
      const xored = Buffer.from(hp.map((byte, i) => byte ^ (hg[i] as number)));
      const M1 = sha256(xored, sha256(srp.salt1), sha256(srp.salt2), pad256(A), pad256(srp.B), K);
      key.srp = undefined; // one try per GetPassword, as Telegram's srp_id
      if (!M1.equals(Buffer.from(check.M1))) this.refuse(request, 400, 'PASSWORD_HASH_INVALID');
      key.userId = account.userId;
      key.awaitingPassword = undefined;
      return new Api.auth.Authorization({ user: this.user(account) });
    }
    if (request instanceof Api.auth.LogOut) {
      key.loggedOut = true;
      return new Api.auth.LoggedOut({});
    }
    if (request instanceof Api.updates.GetState) {
      if (key.userId === undefined) this.refuse(request, 401, 'AUTH_KEY_UNREGISTERED');
      return new Api.updates.State({ pts: 1, qts: 0, date: Math.floor(Date.now() / 1000), seq: 1, unreadCount: 0 });
    }
    return this.refuse(request, 400, 'METHOD_NOT_SUPPORTED_BY_FAKE');
  }
}
