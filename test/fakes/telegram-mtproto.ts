import { createHash, pbkdf2Sync, randomBytes } from 'node:crypto';
import { Api } from 'telegram';
import { BinaryReader } from 'telegram/extensions/BinaryReader.js';
import { RPCMessageToError } from 'telegram/errors/index.js';
import { FloodWaitError } from 'telegram/errors/RPCErrorList.js';
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

/**
 * The code Telegram sends with an error (core.telegram.org/api/errors): 406 for AUTH_KEY_DUPLICATED,
 * 420 for floods and a frozen account (FROZEN_METHOD_INVALID), 401 for a dead authorization, 400 else.
 */
function errorCodeOf(name: string): number {
  if (name === 'AUTH_KEY_DUPLICATED') return 406;
  if (/^(FLOOD_|FROZEN_|SLOWMODE_WAIT_)/.test(name)) return 420;
  if (name.startsWith('AUTH') || name.startsWith('SESSION')) return 401;
  return 400;
}

/** What a frozen account may still call (its state, its updates, logging out). */
const FROZEN_ALLOWED = new Set(['updates.GetState', 'updates.GetDifference', 'auth.LogOut']);

export interface FakeAccount {
  userId: bigint;
  /** Takes voice notes only from contacts (USER_PRIVACY_RESTRICTED) or from Premium users (PRIVACY_PREMIUM_REQUIRED). */
  refusesVoiceFromStrangers?: 'USER_PRIVACY_RESTRICTED' | 'PRIVACY_PREMIUM_REQUIRED';
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

/** A voice note as Telegram received it. */
export interface SentNote {
  instance: string;
  from: bigint;
  to: bigint;
  messageId: number;
  randomId: string;
  bytes: Buffer;
  mimeType: string;
  voice: boolean;
  duration: number;
  waveform: Buffer;
  caption: string;
}

export interface RecordedRequest {
  instance: string;
  className: string;
  request: Api.AnyRequest;
}

class FakeConnection implements TelegramAccountClient {
  connected = false;
  /** The network dropped it: Telegram pushes it nothing, and its calls wait for the reconnection (as GramJS queues them). */
  down = false;
  /** Telegram stopped pushing to it without a word (calls still answered): what core.telegram.org/api/updates warns of. */
  deaf = false;
  private up: Promise<void> = Promise.resolve();
  private wakeUp: () => void = () => undefined;
  handlers: Array<(update: unknown) => void> = [];
  reconnectHandlers: Array<() => void> = [];
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
    for (;;) {
      await this.up;
      try {
        const answered = (await this.fake.answer(this, request)) as R['__response'];
        const lost = this.fake.loseAnswerOf.indexOf(request.className);
        if (lost >= 0) {
          this.fake.loseAnswerOf.splice(lost, 1);
          throw new Error('TIMEOUT (fake: the answer was lost on the way back)');
        }
        return answered;
      } catch (error) {
        // GramJS sleeps through a FLOOD_WAIT up to floodSleepThreshold seconds inside invoke, then sends
        // the request again (GramJS 2.26.22 client/users.js:68, `if (e.seconds <= client.floodSleepThreshold)`;
        // default 60, client/telegramBaseClient.js:39); only longer waits reach the caller.
        const seconds = (error as { seconds?: unknown }).seconds;
        if (error instanceof FloodWaitError && typeof seconds === 'number' && seconds <= (this.options.floodSleepThreshold ?? 60)) {
          await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
          continue;
        }
        throw error;
      }
    }
  }
  /** The network drops the connection (GramJS reconnects by itself; nothing is pushed meanwhile). */
  drop(): void {
    if (this.down) return;
    this.down = true;
    this.up = new Promise((resolve) => (this.wakeUp = resolve));
  }
  /** GramJS's reconnection: MTProtoSender reports UpdateConnectionState.connected (network/MTProtoSender.js:153). */
  reconnect(): void {
    if (!this.down) return;
    this.down = false;
    this.wakeUp();
    for (const handle of this.reconnectHandlers) handle();
  }
  onReconnected(handler: () => void): void {
    this.reconnectHandlers.push(handler);
  }
  serverNow(): number {
    return this.fake.serverNow();
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
  /**
   * Telegram pushes an update to this connection: lost while the network is down (Telegram does not
   * queue pushes for a connection; the client asks updates.getDifference, since GramJS asks nothing:
   * its `catchUp()` is an empty TODO, client/updates.js:65-67), and split as GramJS splits containers
   * before its handlers (client/updates.js:69-92, _handleUpdate: each of `updates`/`updatesCombined`,
   * the inner update of `updateShort`, anything else as it came).
   */
  push(update: unknown): void {
    if (this.down || this.deaf || !this.connected) return;
    const singles =
      update instanceof Api.Updates || update instanceof Api.UpdatesCombined ? update.updates : update instanceof Api.UpdateShort ? [update.update] : [update];
    for (const single of singles) for (const handle of this.handlers) handle(single);
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
  /** Everyone on this Telegram, beside the linked accounts. */
  readonly people: FakeAccount[] = [];
  /** Who each account has talked to (its dialogs). */
  readonly dialogs = new Map<bigint, Set<bigint>>();
  /** Each account's contacts. */
  readonly contacts = new Map<bigint, Set<bigint>>();
  readonly sent: SentNote[] = [];
  /** What the fake refused and why, in its words. */
  readonly refusals: string[] = [];
  /** Errors to answer the next request of a kind with (FLOOD_WAIT_3, PEER_FLOOD…), first in first out. */
  readonly failNext: Array<{ className: string; errorMessage: string }> = [];
  /** Telegram's clock ahead of the local one by this much (GramJS learns the offset: network/MTProtoState.js:238, updateTimeOffset). */
  serverClockOffsetMs = 0;
  /** Updates one updates.getDifference answers at most; more come as a differenceSlice (Telegram: about 1,000). */
  differenceSliceSize = 1_000;
  /** More missed updates than this: updates.differenceTooLong with the pts to go on from. */
  differenceTooLongAfter = Number.POSITIVE_INFINITY;
  private readonly uploads = new Map<string, Map<number, Buffer>>();
  private readonly accessHashes = new Map<bigint, bigint>();
  private nextMessageId = 100;
  /** Each account's common message box: its pts and what each pts step was (core.telegram.org/api/updates). */
  private readonly boxes = new Map<bigint, { pts: number; log: Array<{ pts: number; update: Api.TypeUpdate }> }>();

  serverNow(): number {
    return Date.now() + this.serverClockOffsetMs;
  }

  private box(userId: bigint): { pts: number; log: Array<{ pts: number; update: Api.TypeUpdate }> } {
    let box = this.boxes.get(userId);
    if (!box) {
      box = { pts: 1, log: [] };
      this.boxes.set(userId, box);
    }
    return box;
  }

  /** An event of an account's message box: it takes the next pts (pts_count 1), is logged for getDifference and pushed to its connections. */
  private happen(userId: bigint, make: (pts: number) => { update: Api.TypeUpdate; push: unknown }): void {
    const box = this.box(userId);
    box.pts += 1;
    const { update, push } = make(box.pts);
    box.log.push({ pts: box.pts, update });
    for (const conn of this.connections) if (conn.key.userId === userId) conn.push(push);
  }

  /** The network drops the connections of an account (they get nothing pushed until they reconnect). */
  dropConnections(userId: bigint): void {
    for (const conn of this.connections) if (conn.key.userId === userId) conn.drop();
  }

  /** The random_id of every message sent, per account. */
  private readonly randomIds = new Set<string>();
  /** Requests of these kinds are carried out but their answer is lost on the way back, once each (a network drop). */
  readonly loseAnswerOf: string[] = [];

  /** Accounts Telegram froze. */
  readonly frozen = new Set<bigint>();

  /** Telegram stops pushing updates to an account's connections, the connections staying up. */
  silence(userId: bigint): void {
    for (const conn of this.connections) if (conn.key.userId === userId) conn.deaf = true;
  }

  /** The dropped connections of an account come back, as GramJS reconnects them by itself. */
  reconnect(userId: bigint): void {
    for (const conn of this.connections) if (conn.key.userId === userId) conn.reconnect();
  }

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
    if (this.serverNow() > found.expiresAt) throw new Error('the login token expired before the scan');
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

  private accessHashOf(userId: bigint): bigint {
    let hash = this.accessHashes.get(userId);
    if (hash === undefined) {
      hash = BigInt.asIntN(64, BigInt(`0x${randomBytes(8).toString('hex')}`));
      this.accessHashes.set(userId, hash);
    }
    return hash;
  }

  private person(userId: bigint): FakeAccount | undefined {
    return this.people.find((p) => p.userId === userId);
  }

  private other(account: FakeAccount): Api.User {
    return new Api.User({ id: account.userId as never, username: account.username, accessHash: this.accessHashOf(account.userId) as never, firstName: account.username ?? 'someone' });
  }

  private seconds(): number {
    return Math.floor(this.serverNow() / 1000);
  }

  /** The recipient reads the chat up to `maxId` (the sender's apps get updateReadHistoryOutbox). */
  read(by: bigint, from: bigint, maxId: number): void {
    this.happen(from, (pts) => {
      const update = new Api.UpdateReadHistoryOutbox({ peer: new Api.PeerUser({ userId: by as never }), maxId, pts, ptsCount: 1 });
      return { update, push: new Api.UpdateShort({ update, date: this.seconds() }) };
    });
  }

  /** The recipient writes back to the account (an incoming private message: updateShortMessage pushed, the Message in a difference). */
  reply(by: bigint, to: bigint, text: string): number {
    const id = this.nextMessageId++;
    const date = this.seconds();
    this.happen(to, (pts) => {
      const message = new Api.Message({ out: false, id, fromId: new Api.PeerUser({ userId: by as never }), peerId: new Api.PeerUser({ userId: by as never }), date, message: text });
      const push = new Api.UpdateShortMessage({ out: false, id, userId: by as never, message: text, pts, ptsCount: 1, date });
      return { update: new Api.UpdateNewMessage({ message, pts, ptsCount: 1 }), push };
    });
    return id;
  }

  /**
   * The account itself writes to `to` from another of its apps (its phone): its other sessions hear it
   * with `out` set and the chat's other party as the peer. Telegram sends it short (updateShortMessage,
   * `out:flags.1?true`, `user_id` "the ID of the sender (if outgoing will be the ID of the destination)":
   * core.telegram.org/constructor/updateShortMessage; GramJS `tl/apiTl.js` line 384) or in full
   * (updateNewMessage of a Message with `out` and `peer_id` the destination, `tl/apiTl.js` line 237).
   */
  wrote(from: bigint, to: bigint, text: string, form: 'short' | 'full' = 'short'): number {
    const id = this.nextMessageId++;
    const date = this.seconds();
    this.happen(from, (pts) => {
      const update = new Api.UpdateNewMessage({ message: new Api.Message({ out: true, id, peerId: new Api.PeerUser({ userId: to as never }), message: text, date }), pts, ptsCount: 1 });
      const push =
        form === 'short'
          ? new Api.UpdateShortMessage({ out: true, id, userId: to as never, message: text, pts, ptsCount: 1, date })
          : new Api.Updates({ updates: [update], users: [], chats: [], date, seq: 0 });
      return { update, push };
    });
    return id;
  }

  /**
   * The recipient sends the account a message with media or as a Reply to one of its messages. Telegram
   * sends such a message as updateNewMessage of a full Message (updateShortMessage carries text only and
   * no media: api.d.ts UpdateShortMessage), its media as MessageMediaPhoto or MessageMediaDocument with
   * the document's attributes and the voice/video/round flags, its Reply as MessageReplyHeader.replyToMsgId
   * (node_modules/telegram/tl/api.d.ts, MessageMediaDocument and MessageReplyHeader).
   */
  write(by: bigint, to: bigint, message: { text?: string; media?: 'photo' | 'voice' | 'audio' | 'video' | 'round' | 'sticker' | 'document'; replyToMsgId?: number }): number {
    const id = this.nextMessageId++;
    const date = this.seconds();
    this.happen(to, (pts) => {
      const update = new Api.UpdateNewMessage({
        message: new Api.Message({
          id,
          out: false,
          peerId: new Api.PeerUser({ userId: by as never }),
          fromId: new Api.PeerUser({ userId: by as never }),
          date,
          message: message.text ?? '',
          ...(message.media !== undefined ? { media: mediaOf(message.media) } : {}),
          ...(message.replyToMsgId !== undefined ? { replyTo: new Api.MessageReplyHeader({ replyToMsgId: message.replyToMsgId }) } : {}),
        }),
        pts,
        ptsCount: 1,
      });
      return { update, push: new Api.Updates({ updates: [update], users: [], chats: [], date, seq: 0 }) };
    });
    return id;
  }

  /**
   * The recipient plays the voice note `messageId`: updateReadMessagesContents, with the time it was
   * played in its `date` (layer 177 and later carry it; Telegram sends it for voice notes played).
   */
  played(from: bigint, messageId: number): void {
    const date = this.seconds();
    this.happen(from, (pts) => {
      const update = new Api.UpdateReadMessagesContents({ messages: [messageId], pts, ptsCount: 1, date });
      return { update, push: new Api.Updates({ updates: [update], users: [], chats: [], date, seq: 0 }) };
    });
  }

  /** updates.getDifference of an account from its pts: what its message box logged since, paged as Telegram pages it. */
  private difference(me: bigint, request: Api.updates.GetDifference): Api.updates.TypeDifference {
    const box = this.box(me);
    const missed = box.log.filter((e) => e.pts > request.pts);
    const date = this.seconds();
    if (missed.length === 0) return new Api.updates.DifferenceEmpty({ date, seq: 0 });
    if (missed.length > this.differenceTooLongAfter) return new Api.updates.DifferenceTooLong({ pts: box.pts });
    const page = missed.slice(0, this.differenceSliceSize);
    const last = page.at(-1)!.pts;
    const newMessages: Api.TypeMessage[] = [];
    const otherUpdates: Api.TypeUpdate[] = [];
    for (const { update } of page) {
      if (update instanceof Api.UpdateNewMessage) newMessages.push(update.message);
      else otherUpdates.push(update);
    }
    // The users the page names (the message's chat, the chat read), as Telegram sends them beside it.
    const named = new Set(page.map(({ update }) => String(update instanceof Api.UpdateNewMessage ? ((update.message as Api.Message).peerId as Api.PeerUser).userId : update instanceof Api.UpdateReadHistoryOutbox ? (update.peer as Api.PeerUser).userId : '')));
    const users = this.people.filter((p) => named.has(String(p.userId))).map((p) => this.other(p));
    const state = new Api.updates.State({ pts: last, qts: 0, date, seq: 0, unreadCount: 0 });
    if (page.length < missed.length) return new Api.updates.DifferenceSlice({ newMessages, newEncryptedMessages: [], otherUpdates, chats: [], users, intermediateState: state });
    return new Api.updates.Difference({ newMessages, newEncryptedMessages: [], otherUpdates, chats: [], users, state });
  }

  private peerUser(request: Api.AnyRequest, peer: unknown): FakeAccount {
    if (!(peer instanceof Api.InputPeerUser)) this.refuse(request, 400, 'PEER_ID_INVALID');
    const userId = BigInt(String(peer.userId));
    const who = this.person(userId);
    if (!who || String(peer.accessHash) !== String(this.accessHashOf(userId))) this.refuse(request, 400, 'PEER_ID_INVALID');
    return who;
  }

  private mediaInvalid(request: Api.AnyRequest, why: string): never {
    this.refusals.push(why);
    this.refuse(request, 400, 'MEDIA_INVALID');
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
    const injected = this.failNext.findIndex((f) => f.className === request.className);
    if (injected >= 0) {
      const [failure] = this.failNext.splice(injected, 1);
      this.refuse(request, errorCodeOf(failure!.errorMessage), failure!.errorMessage);
    }
    const me = key.userId;
    // A frozen account may call only a few methods (core.telegram.org/api/auth, "Frozen accounts"): the rest answer 420 FROZEN_METHOD_INVALID.
    if (me !== undefined && this.frozen.has(me) && !FROZEN_ALLOWED.has(request.className)) this.refuse(request, 420, 'FROZEN_METHOD_INVALID');
    if (me !== undefined) {
      const answered = this.answerAccount(conn, me, request);
      if (answered !== undefined) return answered;
    }

    if (request instanceof Api.auth.ExportLoginToken) {
      if (request.apiId !== this.apiId || request.apiHash !== this.apiHash) this.refuse(request, 400, 'API_ID_INVALID');
      const scanned = this.tokens.find((t) => t.key === key && t.scannedBy);
      if (scanned?.scannedBy) {
        const account = scanned.scannedBy;
        if ((account.dc ?? 2) !== key.dc) return new Api.auth.LoginTokenMigrateTo({ dcId: account.dc ?? 2, token: scanned.token });
        return this.authorize(conn, account, request);
      }
      // Telegram's `expires` is on its own clock (a client whose clock differs must correct it).
      const token: LoginToken = { token: randomBytes(32), key, expiresAt: this.serverNow() + this.tokenTtlSeconds * 1000, connection: conn };
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
      return new Api.updates.State({ pts: this.box(key.userId).pts, qts: 0, date: this.seconds(), seq: 0, unreadCount: 0 });
    }
    if (request instanceof Api.updates.GetDifference) {
      if (key.userId === undefined) this.refuse(request, 401, 'AUTH_KEY_UNREGISTERED');
      return this.difference(key.userId, request);
    }
    return this.refuse(request, 400, 'METHOD_NOT_SUPPORTED_BY_FAKE');
  }

  /** The calls of an authorized account: contacts, dialogs, uploads, typing and sending. */
  private answerAccount(conn: FakeConnection, me: bigint, request: Api.AnyRequest): unknown {
    if (request instanceof Api.contacts.ResolveUsername) {
      const who = this.people.find((p) => p.username?.toLowerCase() === request.username.toLowerCase());
      if (!who) this.refuse(request, 400, 'USERNAME_NOT_OCCUPIED');
      return new Api.contacts.ResolvedPeer({ peer: new Api.PeerUser({ userId: who.userId as never }), users: [this.other(who)], chats: [] });
    }
    if (request instanceof Api.contacts.ResolvePhone) {
      // A number finds its account (unless nobody has it); Telegram answers PHONE_NOT_OCCUPIED otherwise.
      const who = this.people.find((p) => p.phone !== undefined && p.phone === request.phone.replace(/^\+/, ''));
      if (!who) this.refuse(request, 400, 'PHONE_NOT_OCCUPIED');
      return new Api.contacts.ResolvedPeer({ peer: new Api.PeerUser({ userId: who.userId as never }), users: [this.other(who)], chats: [] });
    }
    if (request instanceof Api.messages.GetDialogs) {
      const ids = [...(this.dialogs.get(me) ?? [])];
      const users = ids.map((id) => this.person(id)).filter((p): p is FakeAccount => p !== undefined).map((p) => this.other(p));
      return new Api.messages.Dialogs({ dialogs: [], messages: [], chats: [], users });
    }
    if (request instanceof Api.contacts.ImportContacts) {
      const users: Api.User[] = [];
      const imported: Api.ImportedContact[] = [];
      for (const contact of request.contacts) {
        const who = this.people.find((p) => p.phone !== undefined && `+${p.phone}` === contact.phone);
        if (!who) continue;
        const mine = this.contacts.get(me) ?? new Set<bigint>();
        mine.add(who.userId);
        this.contacts.set(me, mine);
        users.push(this.other(who));
        imported.push(new Api.ImportedContact({ userId: who.userId as never, clientId: contact.clientId }));
      }
      return new Api.contacts.ImportedContacts({ imported, popularInvites: [], retryContacts: [], users });
    }
    if (request instanceof Api.contacts.DeleteContacts) {
      for (const input of request.id) {
        if (input instanceof Api.InputUser) this.contacts.get(me)?.delete(BigInt(String(input.userId)));
      }
      return new Api.Updates({ updates: [], users: [], chats: [], date: Math.floor(Date.now() / 1000), seq: 0 });
    }
    if (request instanceof Api.messages.SetTyping) {
      this.peerUser(request, request.peer);
      return true;
    }
    if (request instanceof Api.upload.SaveFilePart || request instanceof Api.upload.SaveBigFilePart) {
      const bytes = Buffer.from(request.bytes);
      // Telegram's rule: parts of a multiple of 1 KB that divides 512 KB (the last part may be shorter).
      if (bytes.length === 0 || bytes.length > 512 * 1024) this.refuse(request, 400, 'FILE_PART_SIZE_INVALID');
      const parts = this.uploads.get(String(request.fileId)) ?? new Map<number, Buffer>();
      parts.set(request.filePart, bytes);
      this.uploads.set(String(request.fileId), parts);
      return true;
    }
    if (request instanceof Api.messages.SendMedia) {
      const to = this.peerUser(request, request.peer);
      const media = request.media;
      if (!(media instanceof Api.InputMediaUploadedDocument)) return this.mediaInvalid(request, 'not an uploaded document');
      const file = media.file;
      if (!(file instanceof Api.InputFile)) return this.mediaInvalid(request, 'not an uploaded small file');
      const parts = this.uploads.get(String(file.id));
      if (!parts || parts.size !== file.parts) return this.mediaInvalid(request, `the file has ${parts?.size ?? 0} parts uploaded, ${file.parts} announced`);
      const bytes = Buffer.concat([...Array(file.parts).keys()].map((i) => parts.get(i) ?? Buffer.alloc(0)));
      if (media.mimeType !== 'audio/ogg') return this.mediaInvalid(request, `mime_type ${media.mimeType} is not audio/ogg`);
      if (bytes.subarray(0, 4).toString('latin1') !== 'OggS' || !bytes.includes(Buffer.from('OpusHead'))) return this.mediaInvalid(request, 'the file is not Ogg Opus');
      const audio = media.attributes.find((a): a is Api.DocumentAttributeAudio => a instanceof Api.DocumentAttributeAudio);
      if (!audio) return this.mediaInvalid(request, 'no DocumentAttributeAudio');
      if (audio.voice !== true) return this.mediaInvalid(request, 'the voice flag is not set: it would show as a music file');
      if (!Number.isInteger(audio.duration) || audio.duration < 1) return this.mediaInvalid(request, `duration ${audio.duration} is not whole seconds`);
      const waveform = Buffer.from(audio.waveform ?? []);
      if (waveform.length !== 63) return this.mediaInvalid(request, `waveform is ${waveform.length} bytes; 100 values of 5 bits are 63`);
      const known = (this.dialogs.get(me)?.has(to.userId) ?? false) || (this.contacts.get(me)?.has(to.userId) ?? false);
      if (to.refusesVoiceFromStrangers && !(this.contacts.get(me)?.has(to.userId) ?? false)) this.refuse(request, 403, to.refusesVoiceFromStrangers);
      void known;
      // Telegram keeps one message per random_id and account (messages.sendMedia: 400 RANDOM_ID_DUPLICATE).
      const randomKey = `${me}:${String(request.randomId)}`;
      if (this.randomIds.has(randomKey)) this.refuse(request, 400, 'RANDOM_ID_DUPLICATE');
      this.randomIds.add(randomKey);
      const messageId = this.nextMessageId++;
      const dialogs = this.dialogs.get(me) ?? new Set<bigint>();
      dialogs.add(to.userId);
      this.dialogs.set(me, dialogs);
      this.sent.push({
        instance: conn.instance,
        from: me,
        to: to.userId,
        messageId,
        randomId: String(request.randomId),
        bytes,
        mimeType: media.mimeType,
        voice: audio.voice === true,
        duration: audio.duration,
        waveform,
        caption: request.message,
      });
      // The answer is `updates` with updateMessageID and the sent message's updateNewMessage, which takes the
      // next pts of the account's box (it is not pushed to the connection that sent it: the answer carries it).
      const date = this.seconds();
      const box = this.box(me);
      box.pts += 1;
      const message = new Api.Message({ out: true, id: messageId, peerId: new Api.PeerUser({ userId: to.userId as never }), date, message: request.message, media: new Api.MessageMediaDocument({ voice: true }) });
      const sentUpdate = new Api.UpdateNewMessage({ message, pts: box.pts, ptsCount: 1 });
      box.log.push({ pts: box.pts, update: sentUpdate });
      return new Api.Updates({ updates: [new Api.UpdateMessageID({ id: messageId, randomId: request.randomId }), sentUpdate], users: [this.other(to)], chats: [], date, seq: 0 });
    }
    return undefined;
  }
}

/** A message's media as Telegram describes it: a photo, or a document whose attributes and flags say what it is. */
function mediaOf(kind: 'photo' | 'voice' | 'audio' | 'video' | 'round' | 'sticker' | 'document'): Api.TypeMessageMedia {
  if (kind === 'photo') return new Api.MessageMediaPhoto({ photo: new Api.PhotoEmpty({ id: 1n as never }) });
  const attributes: Api.TypeDocumentAttribute[] = {
    voice: [new Api.DocumentAttributeAudio({ voice: true, duration: 3 })],
    audio: [new Api.DocumentAttributeAudio({ duration: 180, title: 'A song' }), new Api.DocumentAttributeFilename({ fileName: 'song.mp3' })],
    video: [new Api.DocumentAttributeVideo({ duration: 5, w: 640, h: 360 }), new Api.DocumentAttributeFilename({ fileName: 'clip.mp4' })],
    round: [new Api.DocumentAttributeVideo({ roundMessage: true, duration: 5, w: 240, h: 240 })],
    sticker: [new Api.DocumentAttributeSticker({ alt: '👍', stickerset: new Api.InputStickerSetEmpty() }), new Api.DocumentAttributeImageSize({ w: 512, h: 512 })],
    document: [new Api.DocumentAttributeFilename({ fileName: 'offer.pdf' })],
  }[kind];
  const document = new Api.Document({ id: 2n as never, accessHash: 3n as never, fileReference: Buffer.alloc(0), date: 0, mimeType: 'application/octet-stream', size: 1000n as never, dcId: 2, attributes });
  return new Api.MessageMediaDocument({ document, ...(kind === 'voice' ? { voice: true } : kind === 'video' ? { video: true } : kind === 'round' ? { round: true, video: true } : {}) });
}
