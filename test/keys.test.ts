import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { bootstrapOwner } from '../src/admin/accounts.js';
import { newMessageId, newWhatsappSessionId } from '../src/core/ids.js';
import { CALLER_CACHE_MS } from '../src/api/caller.js';
import { updatePlan } from '../src/store/accounts.js';
import { findKey, issueKey, revokeKey, rollKey } from '../src/store/keys.js';
import {
  closeSharedAudio,
  defaultSendBody,
  startTestApp,
  STORAGE_LABEL,
  type InjectResult,
  type TestAccount,
  type TestApp,
} from './fixtures/app-harness.js';

const API = '/api/v1';
const KEY_PATTERN = { test: /^sk_test_[0-9A-Za-z]{32}$/, live: /^sk_live_[0-9A-Za-z]{32}$/ };

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const randomKeyLike = (env: 'test' | 'live'): string =>
  `sk_${env}_${Array.from(randomBytes(32), (b) => BASE62[b % 62]).join('')}`;

function assertUnauthorized(res: InjectResult, what: string): void {
  assert.equal(res.statusCode, 401, `${what}: ${res.body}`);
  assert.equal(res.headers['www-authenticate'], 'Bearer', what);
  assert.match(String(res.headers['content-type']), /^application\/json/, what);
  const body = res.json();
  assert.deepEqual(Object.keys(body), ['error'], what);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'details', 'message'], what);
  assert.equal(body.error.code, 'unauthorized', what);
  assert.equal(typeof body.error.message, 'string', what);
  assert.ok(body.error.message.length > 0, what);
  // Unauthenticated requests draw from the per-IP bucket and carry only the rate-limit headers.
  for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) assert.ok(res.headers[name] !== undefined, `${what}: ${name}`);
  for (const name of ['x-usage-limit', 'x-usage-remaining']) assert.equal(res.headers[name], undefined, `${what}: no ${name}`);
}

function assertNotFound(res: InjectResult, what: string): void {
  assert.equal(res.statusCode, 404, `${what}: ${res.body}`);
  assert.equal(res.json().error.code, 'not_found', what);
}

const usage = (t: TestApp, key: string) => t.request({ method: 'GET', url: `${API}/usage`, key });
const statusOf = (t: TestApp, key: string, id: string) => t.request({ method: 'GET', url: `${API}/status/${id}`, key });
const sessionOf = (t: TestApp, key: string, id: string) => t.request({ method: 'GET', url: `${API}/whatsapp/sessions/${id}`, key });
const sessionIds = async (t: TestApp, key: string): Promise<string[]> => {
  const res = await t.request({ method: 'GET', url: `${API}/whatsapp/sessions`, key });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().sessions.map((s: { id: string }) => s.id);
};

async function sendTelegram(t: TestApp, key: string): Promise<string> {
  const res = await t.send(key, defaultSendBody('telegram', t.voiceUrl));
  assert.equal(res.statusCode, 202, res.body);
  return res.json().id;
}

async function createSession(t: TestApp, key: string): Promise<string> {
  const res = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key });
  assert.equal(res.statusCode, 201, res.body);
  return res.json().session_id;
}

after(async () => {
  await closeSharedAudio();
});

describe(`API keys: who gets 401 unauthorized (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let a: TestAccount;
  const db = () => t.app.services.db.kysely;

  before(async () => {
    t = await startTestApp({ worker: false, env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    a = await t.createAccount();
  });
  after(async () => {
    await t.close();
  });

  it('a missing Authorization header → 401 on every endpoint, with WWW-Authenticate: Bearer and the error envelope', async () => {
    const session = newWhatsappSessionId();
    const requests = [
      { method: 'GET', url: `${API}/usage` },
      { method: 'GET', url: `${API}/status/${newMessageId()}` },
      { method: 'POST', url: `${API}/send`, body: defaultSendBody('telegram', t.voiceUrl) },
      { method: 'POST', url: `${API}/whatsapp/sessions` },
      { method: 'GET', url: `${API}/whatsapp/sessions` },
      { method: 'GET', url: `${API}/whatsapp/sessions/${session}` },
      { method: 'DELETE', url: `${API}/whatsapp/sessions/${session}` },
      { method: 'POST', url: `${API}/whatsapp/sessions/${session}/simulate`, body: { event: 'scan' } },
    ] as const;
    for (const req of requests) assertUnauthorized(await t.request(req), `${req.method} ${req.url}`);
  });

  it('a malformed Authorization header → 401, even when it holds a valid key', async () => {
    const headers = ['', 'Bearer', 'Bearer ', `Basic ${Buffer.from(`${a.testKey}:`).toString('base64')}`, a.testKey, `Token ${a.testKey}`, `Bearer ${a.testKey} extra`, `Bearer${a.testKey}`];
    for (const authorization of headers) {
      assertUnauthorized(await t.request({ method: 'GET', url: `${API}/usage`, headers: { authorization } }), JSON.stringify(authorization));
    }
    // The same key, sent properly, works: the 401s above are about the header, not the key.
    assert.equal((await usage(t, a.testKey)).statusCode, 200);
  });

  it('an unknown key → 401, whether it looks like a key or is garbage, sk_test_ or sk_live_', async () => {
    const keys = [
      randomKeyLike('test'),
      randomKeyLike('live'),
      'sk_live_garbage',
      'sk_live_',
      `sk_live_${'x'.repeat(32)}`,
      `${a.liveKey}x`,
      a.liveKey.slice(0, -1),
      a.liveKey.toUpperCase(),
      'not-a-key',
    ];
    for (const key of keys) {
      assertUnauthorized(await usage(t, key), key);
      assertUnauthorized(await t.send(key, defaultSendBody('telegram', t.voiceUrl)), `send with ${key}`);
    }
  });

  it('a revoked key → 401 at once; the account’s other keys keep working', async () => {
    const issued = await issueKey(db(), a.accountId, 'test');
    assert.match(issued.secret, KEY_PATTERN.test);
    assert.equal((await usage(t, issued.secret)).statusCode, 200, 'works before revocation');
    assert.equal(await revokeKey(db(), issued.row.id), true);
    assertUnauthorized(await usage(t, issued.secret), 'revoked key');
    assertUnauthorized(await t.request({ method: 'GET', url: `${API}/whatsapp/sessions`, key: issued.secret }), 'revoked key, sessions');
    assert.equal((await usage(t, a.testKey)).statusCode, 200);
    assert.equal((await usage(t, a.liveKey)).statusCode, 200);
  });

  it('an expired key → 401, from the moment it expires', async () => {
    const issued = await issueKey(db(), a.accountId, 'live');
    assert.match(issued.secret, KEY_PATTERN.live);
    const expiresAt = Date.now() + 1_500;
    await db().updateTable('api_keys').set({ expires_at: expiresAt }).where('id', '=', issued.row.id).execute();
    assert.equal((await usage(t, issued.secret)).statusCode, 200, 'works before expiry');
    await sleep(Math.max(0, expiresAt - Date.now()) + 50);
    assertUnauthorized(await usage(t, issued.secret), 'expired key');
    assertUnauthorized(await t.send(issued.secret, defaultSendBody('telegram', t.voiceUrl)), 'expired key, send');
  });

  it(`a key revoked by another process (written straight to the database) → 401 within ${CALLER_CACHE_MS / 1000} s`, async () => {
    const issued = await issueKey(db(), a.accountId, 'test');
    assert.equal((await usage(t, issued.secret)).statusCode, 200, 'works before revocation');
    await db().updateTable('api_keys').set({ revoked_at: Date.now() }).where('id', '=', issued.row.id).execute();
    await sleep(CALLER_CACHE_MS + 100);
    assertUnauthorized(await usage(t, issued.secret), 'revoked elsewhere');
  });

  it('a plan change made in this process shows on the very next request: limits and usage headers', async () => {
    const b = await t.createAccount({ plan: 'starter' });
    const before = await usage(t, b.testKey);
    assert.equal(before.statusCode, 200);
    await updatePlan(db(), b.accountId, { plan: 'growth', rateLimit: 7, quota: 9 });
    const res = await usage(t, b.testKey);
    assert.equal(res.json().plan, 'growth');
    assert.equal(res.json().limits.monthly_quota, 9);
    assert.equal(res.headers['x-usage-limit'], '9');
    assert.equal(res.headers['x-usage-remaining'], '9');
    const sent = await t.send(b.testKey, defaultSendBody('telegram', t.voiceUrl));
    assert.equal(sent.statusCode, 202, sent.body);
    assert.equal(sent.headers['x-ratelimit-limit'], '7');
    assert.equal(sent.headers['x-usage-remaining'], '8');
    const after = await statusOf(t, b.testKey, sent.json().id);
    assert.equal(after.headers['x-usage-remaining'], '8', 'a read right after a send counts it');
  });

  it('an authenticated request carries the usage headers the 401 does not', async () => {
    const res = await usage(t, a.testKey);
    assert.equal(res.statusCode, 200);
    assert.ok(res.headers['x-usage-limit'] !== undefined);
    assert.ok(res.headers['x-usage-remaining'] !== undefined);
    assert.equal(res.headers['www-authenticate'], undefined);
  });
});

describe(`API keys: environments and accounts never see each other’s resources (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let a: TestAccount;
  let b: TestAccount;

  before(async () => {
    t = await startTestApp({ worker: false, env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    a = await t.createAccount();
    b = await t.createAccount();
  });
  after(async () => {
    await t.close();
  });

  it('messages: a test key never sees live messages, nor the reverse, nor another account’s', async () => {
    const testMsg = await sendTelegram(t, a.testKey);
    const liveMsg = await sendTelegram(t, a.liveKey);

    const ownTest = await statusOf(t, a.testKey, testMsg);
    assert.equal(ownTest.statusCode, 200, ownTest.body);
    assert.equal(ownTest.json().id, testMsg);
    const ownLive = await statusOf(t, a.liveKey, liveMsg);
    assert.equal(ownLive.statusCode, 200, ownLive.body);
    assert.equal(ownLive.json().id, liveMsg);

    assertNotFound(await statusOf(t, a.testKey, liveMsg), 'test key → live message');
    assertNotFound(await statusOf(t, a.liveKey, testMsg), 'live key → test message');
    for (const key of [b.testKey, b.liveKey]) {
      assertNotFound(await statusOf(t, key, testMsg), 'other account → test message');
      assertNotFound(await statusOf(t, key, liveMsg), 'other account → live message');
    }
  });

  it('usage is counted per environment: a live send does not count in the sandbox, nor the reverse', async () => {
    const c = await t.createAccount();
    await sendTelegram(t, c.testKey);
    await sendTelegram(t, c.testKey);
    await sendTelegram(t, c.liveKey);
    const testUsage = (await usage(t, c.testKey)).json();
    const liveUsage = (await usage(t, c.liveKey)).json();
    assert.equal(testUsage.usage.total_sent, 2);
    assert.equal(liveUsage.usage.total_sent, 1);
    assert.equal((await usage(t, b.testKey)).json().usage.total_sent, 0, 'another account counts nothing of these');
  });

  it('WhatsApp sessions: a live key never sees sandbox sessions, nor another account’s key', async () => {
    const session = await createSession(t, a.testKey);
    assert.equal((await sessionOf(t, a.testKey, session)).statusCode, 200);
    assert.ok((await sessionIds(t, a.testKey)).includes(session));

    assertNotFound(await sessionOf(t, a.liveKey, session), 'live key → sandbox session');
    assert.ok(!(await sessionIds(t, a.liveKey)).includes(session));
    for (const key of [b.testKey, b.liveKey]) {
      assertNotFound(await sessionOf(t, key, session), 'other account → session');
      assert.ok(!(await sessionIds(t, key)).includes(session));
    }
    // Nor may another account or environment use it to send.
    const scan = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions/${session}/simulate`, key: a.testKey, body: { event: 'scan' } });
    assert.equal(scan.statusCode, 200, scan.body);
    for (const key of [b.testKey, a.liveKey]) {
      const res = await t.send(key, defaultSendBody('whatsapp', t.voiceUrl, session));
      assert.equal(res.statusCode, 422, res.body);
      assert.equal(res.json().error.code, 'invalid_parameter');
      assert.equal(res.json().error.details.field, 'session.session_id');
    }
    assert.equal((await t.send(a.testKey, defaultSendBody('whatsapp', t.voiceUrl, session))).statusCode, 202);
  });
});

describe(`API keys: rolling without downtime (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  const db = () => t.app.services.db.kysely;

  before(async () => {
    t = await startTestApp({ worker: false, env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
  });
  after(async () => {
    await t.close();
  });

  it('the new key works at once, the old one until its expiry, then 401', async () => {
    const a = await t.createAccount();
    const old = (await findKey(db(), a.testKeyId))!;
    // Long enough that the two checks below fit inside it on a loaded machine (test files run
    // several at a time); the wait for the expiry below is that long too.
    const graceMs = 6_000;
    const rolled = await rollKey(db(), old, graceMs);
    assert.match(rolled.secret, KEY_PATTERN.test);
    assert.notEqual(rolled.secret, a.testKey);

    assert.equal((await usage(t, rolled.secret)).statusCode, 200, 'the new key works at once');
    assert.equal((await usage(t, a.testKey)).statusCode, 200, 'the old key still works during its grace period');

    await sleep(Math.max(0, rolled.oldExpiresAt - Date.now()) + 100);
    assertUnauthorized(await usage(t, a.testKey), 'old key after its expiry');
    assert.equal((await usage(t, rolled.secret)).statusCode, 200, 'the new key keeps working');
    // Rolling one key touches no other key of the account.
    assert.equal((await usage(t, a.liveKey)).statusCode, 200);
  });

  it('a rolled test key sees the messages and sessions created with the old key, and can use them', async () => {
    const a = await t.createAccount();
    const message = await sendTelegram(t, a.testKey);
    const session = await createSession(t, a.testKey);
    const before = (await statusOf(t, a.testKey, message)).json();

    const rolled = await rollKey(db(), (await findKey(db(), a.testKeyId))!, 24 * 3600_000);
    const status = await statusOf(t, rolled.secret, message);
    assert.equal(status.statusCode, 200, status.body);
    assert.deepEqual(status.json(), before);
    const lookedUp = await sessionOf(t, rolled.secret, session);
    assert.equal(lookedUp.statusCode, 200, lookedUp.body);
    assert.equal(lookedUp.json().session_id, session);
    assert.deepEqual(await sessionIds(t, rolled.secret), [session]);

    const scan = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions/${session}/simulate`, key: rolled.secret, body: { event: 'scan' } });
    assert.equal(scan.statusCode, 200, scan.body);
    const sent = await t.send(rolled.secret, defaultSendBody('whatsapp', t.voiceUrl, session));
    assert.equal(sent.statusCode, 202, sent.body);
    // ...and the old key, still in its grace period, sees what the new key created.
    assert.equal((await statusOf(t, a.testKey, sent.json().id)).statusCode, 200);
    // Usage belongs to the account and environment, not to the key.
    assert.equal((await usage(t, rolled.secret)).json().usage.total_sent, 2);
  });

  it('a rolled live key stays live: it sees the live messages and none of the sandbox ones', async () => {
    const a = await t.createAccount();
    const liveMsg = await sendTelegram(t, a.liveKey);
    const testMsg = await sendTelegram(t, a.testKey);
    const rolled = await rollKey(db(), (await findKey(db(), a.liveKeyId))!, 60_000);
    assert.match(rolled.secret, KEY_PATTERN.live);
    assert.equal((await statusOf(t, rolled.secret, liveMsg)).statusCode, 200);
    assertNotFound(await statusOf(t, rolled.secret, testMsg), 'rolled live key → test message');
  });

  it('revoking a rolled key during its grace period refuses it at once; its successor keeps working', async () => {
    const a = await t.createAccount();
    const rolled = await rollKey(db(), (await findKey(db(), a.testKeyId))!, 60_000);
    assert.equal(await revokeKey(db(), a.testKeyId), true);
    assertUnauthorized(await usage(t, a.testKey), 'revoked during its grace period');
    assert.equal((await usage(t, rolled.secret)).statusCode, 200);
  });
});

describe(`API keys: stored hashed (${STORAGE_LABEL})`, () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp({ worker: false });
  });
  after(async () => {
    await t.close();
  });

  it('the api_keys table holds no secret in plain text, only its SHA-256 and a short display prefix', async () => {
    const db = t.app.services.db.kysely;
    const a = await t.createAccount();
    const extra = await issueKey(db, a.accountId, 'live');
    const rolled = await rollKey(db, (await findKey(db, a.testKeyId))!, 60_000);
    const secrets = [a.testKey, a.liveKey, extra.secret, rolled.secret];
    for (const secret of secrets) assert.equal((await usage(t, secret)).statusCode, 200, 'every key works');

    const rows = await db.selectFrom('api_keys').selectAll().where('account_id', '=', a.accountId).execute();
    assert.equal(rows.length, secrets.length);
    const stored = JSON.stringify(rows);
    for (const secret of secrets) {
      // The display prefix is the env marker plus 4 characters: no part beyond it may be kept.
      const hidden = secret.slice('sk_test_'.length + 4);
      assert.ok(!stored.includes(secret), 'the whole secret is not stored');
      assert.ok(!stored.includes(hidden), 'no tail of the secret is stored');
      for (let i = 0; i + 8 <= hidden.length; i += 4) assert.ok(!stored.includes(hidden.slice(i, i + 8)), 'no 8-character piece of the secret is stored');
      const hash = createHash('sha256').update(secret).digest('hex');
      const row = rows.find((r) => r.secret_hash === hash);
      assert.ok(row, 'the key is found by its SHA-256');
      assert.ok(secret.startsWith(row.prefix), `prefix ${row.prefix} is the start of the key`);
      assert.ok(row.prefix.length <= 12, `prefix ${row.prefix} is short`);
    }
  });
});

describe(`the owner account (${STORAGE_LABEL})`, () => {
  it('is created once even when several processes start at the same moment on an empty database', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const db = t.app.services.db.kysely;
      const results = await Promise.all([bootstrapOwner(db), bootstrapOwner(db), bootstrapOwner(db)]);
      assert.equal(results.filter((r) => r !== undefined).length, 1, 'exactly one start prints owner keys');
      const owners = await db.selectFrom('accounts').select('id').where('is_owner', '=', 1).execute();
      assert.equal(owners.length, 1);
      assert.equal(await bootstrapOwner(db), undefined, 'a later start creates nothing');
    } finally {
      await t.close();
    }
  });
});
