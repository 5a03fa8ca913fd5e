import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { Redis } from 'ioredis';
import { SecretBox } from '../src/core/secret-box.js';
import { createLogger } from '../src/logger.js';
import type { AuthState, KeyData, WhatsappSocketFactory } from '../src/platforms/whatsapp/socket.js';
import {
  closeSharedAudio,
  FAST_WHATSAPP,
  STORAGE_LABEL,
  startTestApp,
  TEST_REDIS_URL,
  type TestAccount,
  type TestApp,
} from './fixtures/app-harness.js';
import { startLinkedinVoyagerFake, type LinkedinVoyagerFake, type VoyagerAccount } from './fakes/linkedin-voyager.js';
import { startTelegramApi, type TelegramFake } from './fakes/telegram-api.js';
import { eventually } from './fixtures/eventually.js';
import { FakeWhatsapp } from './fakes/whatsapp-network.js';

/**
 * Secrets never appear in logs, and platform credentials are encrypted at rest.
 *
 * One app logs at `trace` (the most verbose level, Fastify's request logs included) into memory while it
 * goes through everything that handles a secret: API keys (right, wrong, in odd places), live deliveries
 * through every platform fake (delivered, refused, expired, retried), sandbox deliveries, an idempotent
 * replay, malformed bodies that carry a token, and a live WhatsApp session from QR to deletion. Then no
 * secret may show in the captured log, verbatim or encoded, nor in plain text in any stored row.
 */

const API = '/api/v1';
const JANE = { publicId: 'jane-smith-a1b2c3', urn: 'urn:li:fsd_profile:ACoAABjaneSmith01' };
const LINKED_PHONE = '14155550123';
const WA_RECIPIENT = '14155550100';
const WA_ABSENT = '14155550999';

/** A well-formed bot token nobody else uses: `<digits>:<36 chars of [A-Za-z0-9_-]>`. */
function newBotToken(): string {
  return `${1_000_000_000 + (randomBytes(3).readUIntBE(0, 3) % 900_000_000)}:${randomBytes(27).toString('base64url')}`;
}

function newLinkedinSession(): VoyagerAccount {
  return {
    liAt: `AQEDAQ${randomBytes(24).toString('base64url')}`,
    csrfToken: `ajax:${BigInt(`0x${randomBytes(8).toString('hex')}`).toString()}`,
    profileUrn: `urn:li:fsd_profile:ACoAAB${randomBytes(6).toString('hex')}`,
  };
}

/**
 * The base64 text that `secret` becomes inside any larger base64 string, for each of the three byte
 * alignments it may sit at (only the characters that depend on nothing but the secret).
 */
function base64Cores(secret: Buffer): string[] {
  const cores: string[] = [];
  for (let k = 0; k < 3; k++) {
    const encoded = Buffer.concat([Buffer.alloc(k), secret]).toString('base64');
    const from = Math.ceil((8 * k) / 6);
    const to = Math.floor((8 * (k + secret.length)) / 6);
    const core = encoded.slice(from, to);
    cores.push(core, core.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return cores;
}

interface Secret {
  name: string;
  /** Every form it could take in text: verbatim, URL-encoded, base64 (any alignment), hex. */
  needles: string[];
}

function textSecret(name: string, value: string): Secret {
  const bytes = Buffer.from(value, 'utf8');
  const needles = new Set([value, encodeURIComponent(value), encodeURIComponent(encodeURIComponent(value)), JSON.stringify(value).slice(1, -1), ...base64Cores(bytes)]);
  return { name, needles: [...needles].filter((n) => n.length >= 8) };
}

function bytesSecret(name: string, value: Buffer): Secret {
  const needles = new Set([value.toString('hex'), value.toString('hex').toUpperCase(), ...base64Cores(value)]);
  return { name, needles: [...needles].filter((n) => n.length >= 8) };
}

/** The first secret found in `text`, as "name (needle)". */
function leakIn(text: string, secrets: Secret[]): string | undefined {
  for (const secret of secrets) {
    const needle = secret.needles.find((n) => text.includes(n));
    if (needle !== undefined) return `${secret.name} (${needle})`;
  }
  return undefined;
}

function showAround(text: string, needle: string): string {
  const at = text.indexOf(needle);
  return text.slice(Math.max(0, at - 300), at + needle.length + 300);
}

function assertNoLeak(what: string, text: string, secrets: Secret[]): void {
  for (const secret of secrets) {
    const needle = secret.needles.find((n) => text.includes(n));
    assert.equal(needle, undefined, `${secret.name} appears in ${what}: …${needle ? showAround(text, needle) : ''}…`);
  }
}

function asBuffer(value: unknown): Buffer | undefined {
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value);
  return undefined;
}

after(async () => {
  await closeSharedAudio();
});

describe(`no secret in logs or in plain text at rest (${STORAGE_LABEL})`, () => {
  const logLines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      logLines.push(chunk.toString());
      callback();
    },
  });
  const secretKey = randomBytes(32);
  const redisKeyPrefix = `voicenote-test:${randomBytes(6).toString('hex')}`;
  const world = new FakeWhatsapp();
  const baseFactory = world.factory('A');
  /** WhatsApp key material the service handed its sockets, and what the sockets stored. */
  const whatsappMaterial: Secret[] = [];
  const qrCodes = new Set<string>();

  function keepKeyMaterial(name: string, value: unknown): void {
    const bytes = asBuffer(value);
    if (bytes && bytes.length >= 16) whatsappMaterial.push(bytesSecret(name, bytes));
  }

  /** Records the private parts of every auth state the service opens a socket with. */
  const factory: WhatsappSocketFactory = (input) => {
    const creds = input.auth.creds as Record<string, any>;
    keepKeyMaterial('whatsapp noiseKey.private', creds.noiseKey?.private);
    keepKeyMaterial('whatsapp signedIdentityKey.private', creds.signedIdentityKey?.private);
    keepKeyMaterial('whatsapp signedPreKey.private', creds.signedPreKey?.keyPair?.private);
    if (typeof creds.advSecretKey === 'string') {
      whatsappMaterial.push(textSecret('whatsapp advSecretKey', creds.advSecretKey));
      keepKeyMaterial('whatsapp advSecretKey bytes', Buffer.from(creds.advSecretKey, 'base64'));
    }
    const keys = input.auth.keys;
    const auth: AuthState = {
      creds: input.auth.creds,
      keys: {
        get: (type, ids) => keys.get(type, ids),
        set: async (data: KeyData) => {
          for (const [type, byId] of Object.entries(data)) {
            for (const [id, value] of Object.entries(byId)) {
              const v = value as { private?: unknown } | null;
              keepKeyMaterial(`whatsapp ${type} ${id}`, asBuffer(v) ?? v?.private);
            }
          }
          return keys.set(data);
        },
      },
    };
    return baseFactory({ ...input, auth });
  };

  let t: TestApp;
  let telegram: TelegramFake;
  let linkedin: LinkedinVoyagerFake;
  let account: TestAccount;
  let closed = false;
  const secrets: Secret[] = [];
  /** Every sealed value seen in the database while the run went on. */
  const sealedSeen = { credentials: new Map<string, string>(), authState: new Set<string>(), keys: new Set<string>() };
  /** Every row of every table just before the WhatsApp sessions were deleted and the app closed. */
  let tableDump = '';
  /** The live WhatsApp session's stored auth, after DELETE. */
  let authAfterDelete: { sessions: number; keys: number } | undefined;
  const fileDumps: Array<{ path: string; text: string }> = [];
  let redisKeys: string[] = [];
  const outcomes: Array<{ what: string; status: any }> = [];

  // Secrets known before the app starts, so the fakes can be told which ones are valid.
  const goodToken = newBotToken();
  const unknownToken = newBotToken();
  const sandboxToken = newBotToken();
  const malformedToken = `botname:${randomBytes(27).toString('base64url')}`;
  const truncatedBodyToken = newBotToken();
  const liGood = newLinkedinSession();
  const liExpired = newLinkedinSession();
  const liRetry = newLinkedinSession();
  const liSandbox = newLinkedinSession();
  // A session handed over as the browser holds it: its User-Agent and its whole cookie jar (rotated by LinkedIn on the way).
  const liBrowserCookie = `"v=2&${randomBytes(16).toString('hex')}"`;
  const liBrowser: VoyagerAccount = {
    ...newLinkedinSession(),
    userAgent: `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/151.0.0.0 Safari/537.36 Secret${randomBytes(6).toString('hex')}`,
    cookies: { bcookie: liBrowserCookie },
  };
  const liBrowserHeader = `bcookie=${liBrowserCookie}; li_at=${liBrowser.liAt}; JSESSIONID="${liBrowser.csrfToken}"; lang=v=2&lang=en-us`;
  const wrongKeys = [
    `sk_live_${randomBytes(24).toString('base64url').replace(/[-_]/g, 'x').slice(0, 32)}`,
    `sk_test_${randomBytes(24).toString('base64url').replace(/[-_]/g, 'x').slice(0, 32)}`,
  ];
  const keyInQuery = `sk_live_${randomBytes(24).toString('base64url').replace(/[-_]/g, 'y').slice(0, 32)}`;

  before(async () => {
    telegram = await startTelegramApi({ knownTokens: [goodToken] });
    linkedin = await startLinkedinVoyagerFake({ profiles: [JANE], accounts: [liGood, liExpired, liRetry, liBrowser] });
    linkedin.rotateCookieOn(liBrowser.liAt, 'me', 'JSESSIONID');
    linkedin.expire(liExpired.liAt, 'unauthorized');
    t = await startTestApp({
      env: {
        TELEGRAM_API_ROOT: telegram.apiRoot,
        LINKEDIN_API_ROOT: linkedin.apiRoot,
        SECRET_KEY: secretKey.toString('base64'),
        SANDBOX_LATENCY_MS: '100',
        SANDBOX_AUTO_SCAN_SECONDS: '0',
      },
      logger: createLogger('trace', stream),
      redisKeyPrefix,
      linkedinPace: { minMs: 30, maxMs: 60 },
      whatsappSocketFactory: factory,
      whatsappLive: FAST_WHATSAPP,
    });
    const db = t.app.services.db.kysely;

    // Watch the stored values while messages are in flight (their credentials are erased once they settle).
    let watching = true;
    const watch = async (): Promise<void> => {
      const rows = await db.selectFrom('messages').select(['id', 'credentials']).where('credentials', 'is not', null).execute();
      for (const row of rows) sealedSeen.credentials.set(row.id, row.credentials!);
      for (const row of await db.selectFrom('whatsapp_sessions').select('auth_state').where('auth_state', 'is not', null).execute()) {
        sealedSeen.authState.add(row.auth_state!);
      }
      for (const row of await db.selectFrom('whatsapp_keys').select('value').execute()) sealedSeen.keys.add(row.value);
    };
    const watcher = (async () => {
      while (watching) {
        await watch();
        await new Promise((r) => setTimeout(r, 15));
      }
    })();

    account = await t.createAccount({ plan: 'growth' });
    const live = account.liveKey;
    const test = account.testKey;
    secrets.push(textSecret('the live API key', live), textSecret('the test API key', test));
    secrets.push(textSecret('the live Authorization header', `Bearer ${live}`), textSecret('the test Authorization header', `Bearer ${test}`));
    secrets.push(textSecret('SECRET_KEY (base64)', secretKey.toString('base64')), bytesSecret('SECRET_KEY (bytes)', secretKey));
    for (const [name, token] of [
      ['the bot token', goodToken],
      ['an unknown bot token', unknownToken],
      ['a sandbox bot token', sandboxToken],
      ['a malformed bot token', malformedToken],
      ['a bot token in a truncated body', truncatedBodyToken],
    ] as const) {
      secrets.push(textSecret(name, token), textSecret(`${name} (its secret part)`, token.slice(token.indexOf(':') + 1)));
    }
    for (const [name, session] of [
      ['li_at', liGood],
      ['li_at of an expired session', liExpired],
      ['li_at of a retried delivery', liRetry],
      ['li_at of a sandbox send', liSandbox],
      ['li_at of a session with its browser', liBrowser],
    ] as const) {
      secrets.push(textSecret(name, session.liAt), textSecret(`csrf_token with that ${name}`, session.csrfToken));
    }
    secrets.push(textSecret('a browser cookie of a LinkedIn session', liBrowserCookie), textSecret('the user_agent of a LinkedIn session', liBrowser.userAgent!));
    wrongKeys.forEach((k, i) => secrets.push(textSecret(`wrong API key ${i + 1}`, k)));
    secrets.push(textSecret('an API key in the query string', keyInQuery));

    /** Messages to wait on, with the outcome each must reach. */
    const pending: Array<{ what: string; key: string; id: string; status: string; code?: string }> = [];
    const accepted = async (what: string, key: string, body: Record<string, unknown>, expect: { status: string; code?: string }, headers?: Record<string, string>): Promise<string> => {
      const res = await t.send(key, body, headers);
      assert.equal(res.statusCode, 202, `${what}: ${res.body}`);
      const id = res.json().id as string;
      pending.push({ what, key, id, ...expect });
      return id;
    };
    const telegramBody = (recipient: string, token: string) => ({ platform: 'telegram', recipient, audio_url: t.mp3Url, session: { bot_token: token } });
    const linkedinBody = (session: VoyagerAccount) => ({
      platform: 'linkedin',
      recipient: JANE.publicId,
      audio_url: t.mp3Url,
      session: { li_at: session.liAt, csrf_token: session.csrfToken },
    });

    // --- Telegram, live: delivered; 401 → invalid_session; a 500, retried, then delivered.
    telegram.failForChat('300000002', { kind: 'server_error' }, 1);
    await accepted('telegram live', live, { ...telegramBody('123456789', goodToken), caption: 'hello' }, { status: 'delivered' });
    await accepted('telegram 401', live, telegramBody('123456780', unknownToken), { status: 'failed', code: 'invalid_session' });
    await accepted('telegram 500 then delivered', live, telegramBody('300000002', goodToken), { status: 'delivered' });

    // --- An Idempotency-Key: the first answer, then the same one replayed, then a conflict.
    const idemBody = telegramBody('123456781', goodToken);
    const idemId = await accepted('telegram idempotent', live, idemBody, { status: 'delivered' }, { 'idempotency-key': 'idem-secrets-1' });
    const replay = await t.send(live, idemBody, { 'idempotency-key': 'idem-secrets-1' });
    assert.equal(replay.statusCode, 202, replay.body);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(replay.json().id, idemId);
    const conflict = await t.send(live, { ...idemBody, recipient: '123456782' }, { 'idempotency-key': 'idem-secrets-1' });
    assert.equal(conflict.statusCode, 409, conflict.body);

    // --- LinkedIn, live: delivered; an expired session; a 500 on the upload slot, retried, then delivered.
    linkedin.failNext('uploadMetadata', { status: 500, times: 1 });
    await accepted('linkedin 500 then delivered', live, linkedinBody(liRetry), { status: 'delivered' });
    await eventually(() => linkedin.calls.some((c) => c.status === 500), 'the injected LinkedIn 500');
    await accepted('linkedin live', live, linkedinBody(liGood), { status: 'delivered' });
    await accepted('linkedin expired', live, linkedinBody(liExpired), { status: 'failed', code: 'session_expired' });
    await accepted(
      'linkedin with its browser',
      live,
      { ...linkedinBody(liBrowser), session: { li_at: liBrowser.liAt, csrf_token: liBrowser.csrfToken, user_agent: liBrowser.userAgent, cookies: liBrowserHeader } },
      { status: 'delivered' },
    );

    // --- Sandbox sends with the test key (the whole pipeline but the platform call).
    await accepted('sandbox telegram', test, telegramBody('555000111', sandboxToken), { status: 'delivered' });
    await accepted('sandbox telegram two transient errors', test, telegramBody('10000000004', sandboxToken), { status: 'delivered' });
    await accepted('sandbox telegram session_expired', test, telegramBody('10000000001', sandboxToken), { status: 'failed', code: 'session_expired' });
    await accepted('sandbox linkedin', test, linkedinBody(liSandbox), { status: 'delivered' });
    const sandboxSession = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: test });
    assert.equal(sandboxSession.statusCode, 201, sandboxSession.body);
    const sandboxSessionId = sandboxSession.json().session_id as string;
    const scanned = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions/${sandboxSessionId}/simulate`, key: test, body: { event: 'scan' } });
    assert.equal(scanned.statusCode, 200, scanned.body);
    const waSandbox = (recipient: string) => ({ platform: 'whatsapp', recipient, audio_url: t.voiceUrl, session: { session_id: sandboxSessionId } });
    await accepted('sandbox whatsapp', test, waSandbox(WA_RECIPIENT), { status: 'delivered' });
    await accepted('sandbox whatsapp platform_error after retries', test, waSandbox('10000000003'), { status: 'failed', code: 'platform_error' });

    // --- WhatsApp, live: create (with an Idempotency-Key, replayed), scan, get, deliver, refuse, retry.
    const created = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: live, headers: { 'idempotency-key': 'idem-wa-1' } });
    assert.equal(created.statusCode, 201, created.body);
    const sessionId = created.json().session_id as string;
    const replayedSession = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: live, headers: { 'idempotency-key': 'idem-wa-1' } });
    assert.equal(replayedSession.json().session_id, sessionId);
    assert.equal(replayedSession.headers['idempotent-replayed'], 'true');
    const qr = world.current(sessionId)?.qr;
    assert.ok(qr, 'the fake showed a pairing code');
    qrCodes.add(qr);
    world.scan(sessionId, LINKED_PHONE);
    await eventually(async () => (await t.request({ method: 'GET', url: `${API}/whatsapp/sessions/${sessionId}`, key: live })).json().status === 'connected', 'the live session to connect');
    const listed = await t.request({ method: 'GET', url: `${API}/whatsapp/sessions`, key: live });
    assert.equal(listed.statusCode, 200, listed.body);
    const waLive = (recipient: string) => ({ platform: 'whatsapp', recipient, audio_url: t.mp3Url, session: { session_id: sessionId } });
    const waDelivered = await accepted('whatsapp live', live, waLive(WA_RECIPIENT), { status: 'delivered' });
    await t.waitForStatus(live, waDelivered, ['delivered', 'failed'], 30_000);
    world.absent.add(WA_ABSENT);
    const waAbsent = await accepted('whatsapp recipient_not_found', live, waLive(WA_ABSENT), { status: 'failed', code: 'recipient_not_found' });
    await t.waitForStatus(live, waAbsent, ['delivered', 'failed'], 30_000);
    world.failSends = 1;
    await accepted('whatsapp send timeout then delivered', live, waLive('14155550101'), { status: 'delivered' });

    // --- Wrong keys, and keys where they do not belong: all 401.
    const unauthorized: Array<Parameters<TestApp['request']>[0]> = [
      { method: 'GET', url: `${API}/usage`, key: wrongKeys[0]! },
      { method: 'POST', url: `${API}/send`, key: wrongKeys[1]!, body: telegramBody('123456789', goodToken) },
      // The real key with its last character changed: most of a real secret.
      { method: 'GET', url: `${API}/usage`, key: `${live.slice(0, -1)}${live.endsWith('a') ? 'b' : 'a'}` },
      // The right key in the wrong scheme, or without one.
      { method: 'GET', url: `${API}/usage`, headers: { authorization: `Basic ${Buffer.from(`${live}:`).toString('base64')}` } },
      { method: 'GET', url: `${API}/usage`, headers: { authorization: live } },
      { method: 'GET', url: `${API}/usage`, headers: { 'x-api-key': live } },
      { method: 'GET', url: `${API}/usage?api_key=${keyInQuery}` },
    ];
    for (const req of unauthorized) {
      const res = await t.request(req);
      assert.equal(res.statusCode, 401, `${req.url}: ${res.body}`);
    }
    secrets.push(textSecret('the live key with its last character changed', `${live.slice(0, -1)}${live.endsWith('a') ? 'b' : 'a'}`));

    // --- Bodies the API refuses, that still carry a token.
    const badFormat = await t.send(live, telegramBody('123456789', malformedToken));
    assert.ok([400, 422].includes(badFormat.statusCode), badFormat.body);
    const truncated = await t.request({
      method: 'POST',
      url: `${API}/send`,
      key: live,
      payload: JSON.stringify(telegramBody('123456789', truncatedBodyToken)).slice(0, -3),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(truncated.statusCode, 400, truncated.body);

    // --- Every message settles as expected.
    for (const p of pending) {
      const status = await t.waitForStatus(p.key, p.id, ['delivered', 'failed'], 40_000);
      outcomes.push({ what: p.what, status });
      assert.equal(status.status, p.status, `${p.what}: ${JSON.stringify(status)}`);
      if (p.code) assert.equal(status.error?.code, p.code, `${p.what}: ${JSON.stringify(status)}`);
    }
    assert.ok(telegram.calls.some((c) => c.reply.status === 500), 'the Bot API answered a 500 once');
    assert.ok(telegram.calls.some((c) => c.reply.status === 401), 'the Bot API answered a 401');
    assert.equal(world.failSends, 0, 'the WhatsApp send failed once before it went out');
    // The cookie LinkedIn rotated during a delivery is as secret as the one it replaced.
    const rotated = linkedin.rotatedValues.filter((r) => r.liAt === liBrowser.liAt);
    assert.equal(rotated.length, 1, 'LinkedIn set a new JSESSIONID during the delivery');
    for (const r of rotated) secrets.push(textSecret(`the ${r.name} LinkedIn set during a delivery`, r.value.replace(/^"|"$/g, '')));

    watching = false;
    await watcher;
    await watch();

    // A recipient's device asks for the live voice note again: answered from what the session keeps (sealed).
    const liveNote = world.sent.find((n) => n.sessionId === sessionId)!;
    const resent = await world.current(sessionId)!.askForResend({ remoteJid: liveNote.jid, id: liveNote.messageId });
    assert.ok(resent.relayed, 'the resend request was answered');
    for (const note of world.sent.filter((n) => n.sessionId === sessionId)) {
      whatsappMaterial.push(bytesSecret('whatsapp media key of a sent voice note', note.message.audioMessage.mediaKey));
      whatsappMaterial.push(textSecret('whatsapp media URL of a sent voice note', note.message.audioMessage.directPath));
    }

    // Everything at rest, before the sessions are deleted.
    const dump: Record<string, unknown[]> = {};
    for (const table of ['accounts', 'api_keys', 'messages', 'usage_periods', 'usage_by_platform', 'affinity_leases', 'whatsapp_sessions', 'whatsapp_keys', 'whatsapp_sent_messages', 'idempotency_keys'] as const) {
      dump[table] = await db.selectFrom(table).selectAll().execute();
    }
    tableDump = JSON.stringify(dump, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));

    // DELETE both sessions; the live one's stored auth goes with it.
    for (const [key, id] of [
      [live, sessionId],
      [test, sandboxSessionId],
    ] as const) {
      const res = await t.request({ method: 'DELETE', url: `${API}/whatsapp/sessions/${id}`, key });
      assert.equal(res.statusCode, 200, res.body);
      const gone = await t.request({ method: 'GET', url: `${API}/whatsapp/sessions/${id}`, key });
      assert.equal(gone.statusCode, 404, gone.body);
    }
    authAfterDelete = {
      sessions: (await db.selectFrom('whatsapp_sessions').select('id').where('id', '=', sessionId).execute()).length,
      keys: (await db.selectFrom('whatsapp_keys').select('key_id').where('session_id', '=', sessionId).execute()).length,
    };

    // The raw files of the data dir (the SQLite database and its WAL, the audio cache).
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) await walk(path);
        else if (entry.isFile()) fileDumps.push({ path, text: (await readFile(path)).toString('latin1') });
      }
    };
    await walk(t.dataDir);

    if (TEST_REDIS_URL) {
      const redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
      try {
        await redis.connect();
        redisKeys = await redis.keys(`${redisKeyPrefix}*`);
      } finally {
        redis.disconnect();
      }
    }

    // Close inside the run: what is logged while shutting down is captured too.
    closed = true;
    await t.close();
  });

  after(async () => {
    if (!closed) await t?.close();
    await telegram?.close();
    await linkedin?.close();
  });

  const logText = (): string => logLines.join('');
  const parsedLog = (): Array<Record<string, any>> => logLines.join('').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
  const allSecrets = (): Secret[] => [...secrets, ...whatsappMaterial];

  it('captured the whole run at trace level: request logs, 401s, deliveries, retries, failures, WhatsApp', () => {
    const entries = parsedLog();
    assert.ok(entries.length > 100, `only ${entries.length} log lines`);
    const incoming = entries.filter((e) => e.msg === 'incoming request');
    const completed = entries.filter((e) => e.msg === 'request completed');
    assert.ok(incoming.some((e) => e.req?.url === `${API}/send` && e.req?.method === 'POST'), 'POST /send was logged');
    assert.ok(completed.some((e) => e.res?.statusCode === 202), 'a 202 was logged');
    assert.ok(completed.some((e) => e.res?.statusCode === 401), 'a 401 was logged');
    assert.ok(completed.some((e) => e.res?.statusCode === 409), 'the idempotency conflict was logged');
    assert.ok(completed.some((e) => e.res?.statusCode === 400), 'the malformed body was logged');
    assert.ok(incoming.some((e) => String(e.req?.url).startsWith(`${API}/whatsapp/sessions`) && e.req?.method === 'DELETE'), 'DELETE session was logged');
    // The request with a key in its query string is logged, with the value left out.
    assert.ok(incoming.some((e) => e.req?.url === `${API}/usage?api_key=[redacted]` && e.req?.remoteAddress === '127.0.0.1'), 'the query-string request was logged');
    const messages = new Set(entries.map((e) => e.msg));
    for (const msg of ['delivered', 'delivery failed', 'delivery attempt failed; will retry', 'WhatsApp session connected']) {
      assert.ok(messages.has(msg), `"${msg}" was logged; saw ${[...messages].join(' | ')}`);
    }
    assert.equal(outcomes.length, 17, 'every message settled');
  });

  it('logs no secret anywhere, neither verbatim nor URL- nor base64-encoded', () => {
    assert.ok(secrets.length > 20 && whatsappMaterial.length >= 4, `${secrets.length} secrets, ${whatsappMaterial.length} WhatsApp keys`);
    assertNoLeak('the log', logText(), allSecrets());
  });

  it('logs no WhatsApp pairing code', () => {
    assert.ok(qrCodes.size > 0);
    for (const qr of qrCodes) assert.ok(!logText().includes(qr), 'a pairing code was logged');
  });

  it('keeps platform credentials sealed while a message is in flight, and erases them once it settles', () => {
    assert.ok(sealedSeen.credentials.size >= 5, `saw ${sealedSeen.credentials.size} messages in flight with credentials`);
    const platforms = new Set<string>();
    for (const sealed of sealedSeen.credentials.values()) {
      assert.match(sealed, /^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/, 'a sealed value');
      assert.equal(leakIn(sealed, allSecrets()), undefined, 'a secret in plain text in messages.credentials');
      const opened = JSON.parse(new SecretBox(secretKey).open(sealed)) as { platform: string };
      platforms.add(opened.platform);
    }
    assert.deepEqual([...platforms].sort(), ['linkedin', 'telegram', 'whatsapp'], 'caught credentials of every platform in flight');
    const messages = (JSON.parse(tableDump) as { messages: Array<{ credentials: string | null; status: string }> }).messages;
    assert.ok(messages.length >= 16);
    for (const m of messages) {
      assert.ok(['delivered', 'failed'].includes(m.status));
      assert.equal(m.credentials, null, 'credentials are erased once the message is settled');
    }
  });

  it('keeps WhatsApp auth sealed at rest, and erases it on DELETE', () => {
    assert.ok(sealedSeen.authState.size > 0 && sealedSeen.keys.size > 0, 'saw stored WhatsApp auth');
    for (const sealed of [...sealedSeen.authState, ...sealedSeen.keys]) {
      assert.match(sealed, /^v1\./, 'a sealed value');
      assert.equal(leakIn(sealed, allSecrets()), undefined, 'a secret in plain text in the WhatsApp auth');
      assert.ok(!/noiseKey|signedIdentityKey|advSecretKey|"private"/.test(sealed));
    }
    assert.deepEqual(authAfterDelete, { sessions: 0, keys: 0 });
  });

  it('stores no secret in plain text in any table (messages, WhatsApp auth, idempotency, keys)', () => {
    assert.ok(tableDump.length > 1000);
    assertNoLeak('the database rows', tableDump, allSecrets());
  });

  it(`stores no secret in plain text in the data dir's files${TEST_REDIS_URL ? ' or in Redis key names' : ''}`, () => {
    if (STORAGE_LABEL === 'sqlite') assert.ok(fileDumps.some((f) => /\.(db|sqlite3?)$/.test(f.path)), `no SQLite file among ${fileDumps.map((f) => f.path).join(', ')}`);
    for (const file of fileDumps) assertNoLeak(file.path, file.text, allSecrets());
    assertNoLeak('the Redis key names', redisKeys.join('\n'), allSecrets());
  });
});
