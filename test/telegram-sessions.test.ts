import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import jsQRModule from 'jsqr';
import { PNG } from 'pngjs';
import { captureLogs } from './fixtures/log-capture.js';
import {
  assertErrorEnvelope,
  closeSharedAudio,
  startTestApp,
  STORAGE_LABEL,
  withRestartableStorage,
  type TestApp,
  type TestAppOptions,
} from './fixtures/app-harness.js';
import { FakeTelegram, type FakeAccount } from './fakes/telegram-mtproto.js';

const API = '/api/v1';
const SESSION_ID = /^ts_[0-9A-Za-z]{24}$/;
const LOGIN_URL = /^tg:\/\/login\?token=([A-Za-z0-9_-]+)$/;
const jsQR = ((jsQRModule as unknown as { default?: typeof jsQRModule }).default ?? jsQRModule) as unknown as (
  data: Uint8ClampedArray,
  width: number,
  height: number,
) => { data: string } | null;

/** The text inside a PNG data URI QR code, as a phone camera reads it. */
function decodeQr(qrCode: string): string {
  const match = /^data:image\/png;base64,([A-Za-z0-9+/]+={0,2})$/.exec(qrCode);
  assert.ok(match, `qr_code is not a base64 PNG data URI: ${qrCode.slice(0, 40)}…`);
  const image = PNG.sync.read(Buffer.from(match[1]!, 'base64'));
  const decoded = jsQR(new Uint8ClampedArray(image.data.buffer, image.data.byteOffset, image.data.byteLength), image.width, image.height);
  assert.ok(decoded, 'the PNG holds a readable QR code');
  return decoded.data;
}

function fakeClock(): { now: () => number; advance(ms: number): void } {
  let at = Date.UTC(2025, 0, 15, 12, 0, 0);
  return { now: () => at, advance: (ms) => void (at += ms) };
}

async function eventually<T>(probe: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 8_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const create = (t: TestApp, key: string) => t.request({ method: 'POST', url: `${API}/telegram/sessions`, key });
const get = (t: TestApp, key: string, id: string) => t.request({ method: 'GET', url: `${API}/telegram/sessions/${id}`, key });
const list = (t: TestApp, key: string) => t.request({ method: 'GET', url: `${API}/telegram/sessions`, key });
const remove = (t: TestApp, key: string, id: string) => t.request({ method: 'DELETE', url: `${API}/telegram/sessions/${id}`, key });
const password = (t: TestApp, key: string, id: string, body: unknown) => t.request({ method: 'POST', url: `${API}/telegram/sessions/${id}/password`, key, body });
const simulate = (t: TestApp, key: string, id: string, event: string) => t.request({ method: 'POST', url: `${API}/telegram/sessions/${id}/simulate`, key, body: { event } });

async function subscribe(t: TestApp, key: string): Promise<void> {
  const res = await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key, body: { url: 'https://hooks.example.com/telegram', events: ['telegram_session.updated'] } });
  assert.equal(res.statusCode, 201, res.body);
}

async function sessionEvents(t: TestApp, accountId: string): Promise<Array<{ type: string; data: Record<string, unknown> }>> {
  const rows = await t.app.services.db.kysely.selectFrom('webhook_events').select(['payload', 'created_at']).where('account_id', '=', accountId).orderBy('created_at').orderBy('id').execute();
  return rows.map((r) => JSON.parse(r.payload)).filter((e) => e.type === 'telegram_session.updated');
}

async function storedRow(t: TestApp, id: string) {
  return t.app.services.db.kysely.selectFrom('telegram_sessions').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * Ten wrong passwords for a password_needed session: nine say how many tries are left, the tenth that
 * the linking has ended; the session is qr_expired, and the right password is refused after that.
 */
async function tenWrongPasswords(t: TestApp, key: string, id: string, right: string): Promise<void> {
  for (let i = 1; i <= 9; i++) {
    const wrong = assertErrorEnvelope(await password(t, key, id, { password: `guess-${i}` }), 422, 'invalid_parameter');
    assert.deepEqual(wrong.details, { field: 'password', tries_left: 10 - i });
    assert.match(wrong.message, new RegExp(`is not the cloud password .*; ${10 - i} tr(y|ies) left$`));
  }
  assert.equal((await get(t, key, id)).json().status, 'password_needed', 'still waiting after nine');
  const last = assertErrorEnvelope(await password(t, key, id, { password: 'guess-10' }), 422, 'invalid_parameter');
  assert.deepEqual(last.details, { field: 'password', tries_left: 0, status: 'qr_expired' });
  assert.match(last.message, /that was the 10th wrong one: the linking has ended \(qr_expired\); start a new session/);
  assert.equal((await get(t, key, id)).json().status, 'qr_expired');
  const after = assertErrorEnvelope(await password(t, key, id, { password: right }), 422, 'invalid_parameter');
  assert.equal(after.details.status, 'qr_expired');
}

after(closeSharedAudio);

describe(`Telegram account sessions in the sandbox (${STORAGE_LABEL})`, () => {
  it('POST answers 201 with a ts_ id, qr_pending and a scannable tg://login QR code; it links by itself after SANDBOX_AUTO_SCAN_SECONDS', async () => {
    const clock = fakeClock();
    const t = await startTestApp({ now: clock.now, worker: false });
    try {
      const account = await t.createAccount();
      await subscribe(t, account.testKey);
      const res = await create(t, account.testKey);
      assert.equal(res.statusCode, 201, res.body);
      const body = res.json();
      assert.deepEqual(Object.keys(body).sort(), ['created_at', 'qr_code', 'session_id', 'status']);
      assert.match(body.session_id, SESSION_ID);
      assert.equal(body.status, 'qr_pending');
      assert.equal(body.created_at, new Date(clock.now()).toISOString());
      assert.match(decodeQr(body.qr_code), LOGIN_URL);

      const pending = (await get(t, account.testKey, body.session_id)).json();
      assert.equal(pending.status, 'qr_pending');
      assert.equal(decodeQr(pending.qr_code), decodeQr(body.qr_code), 'GET shows the code on screen');

      clock.advance(3_000);
      const linked = (await get(t, account.testKey, body.session_id)).json();
      assert.deepEqual(linked, {
        session_id: body.session_id,
        status: 'connected',
        user_id: '1000000001',
        username: 'voicenote_sandbox',
        phone_number: '15550000000',
        created_at: body.created_at,
        last_connected_at: new Date(clock.now()).toISOString(),
      });
      const listed = (await list(t, account.testKey)).json();
      assert.deepEqual(listed, { sessions: [{ id: body.session_id, status: 'connected', user_id: '1000000001', username: 'voicenote_sandbox', phone_number: '15550000000', created_at: body.created_at, last_connected_at: linked.last_connected_at }] });
      const events = await sessionEvents(t, account.accountId);
      assert.deepEqual(events.map((e) => e.data.status), ['connected'], 'telegram_session.updated on the move');
      assert.equal(events[0]!.data.session_id, body.session_id);

      assert.deepEqual((await remove(t, account.testKey, body.session_id)).json(), { deleted: true });
      assertErrorEnvelope(await get(t, account.testKey, body.session_id), 404, 'not_found');
      assertErrorEnvelope(await remove(t, account.testKey, body.session_id), 404, 'not_found');
    } finally {
      await t.close();
    }
  });

  it('ten wrong passwords end the linking (qr_expired) and say so; the right one is refused after that', async () => {
    const t = await startTestApp({ worker: false, env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    try {
      const account = await t.createAccount();
      await subscribe(t, account.testKey);
      const id = (await create(t, account.testKey)).json().session_id;
      assert.equal((await simulate(t, account.testKey, id, 'scan_with_password')).json().status, 'password_needed');
      // Before, every wrong password was one more 422 and the session waited for the next (520 in the attack).
      await tenWrongPasswords(t, account.testKey, id, 'sandbox-password');
      assert.deepEqual((await sessionEvents(t, account.accountId)).map((e) => e.data.status), ['password_needed', 'qr_expired']);
    } finally {
      await t.close();
    }
  });

  it('a two-step account waits in password_needed; a wrong password is 422 on the password field, the right one connects', async () => {
    const t = await startTestApp({ worker: false, env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    try {
      const account = await t.createAccount();
      const id = (await create(t, account.testKey)).json().session_id;
      assertErrorEnvelope(await password(t, account.testKey, id, { password: 'sandbox-password' }), 422, 'invalid_parameter');
      const waiting = await simulate(t, account.testKey, id, 'scan_with_password');
      assert.equal(waiting.json().status, 'password_needed', waiting.body);
      assert.equal(waiting.json().qr_code, undefined, 'no QR code once scanned');
      const wrong = assertErrorEnvelope(await password(t, account.testKey, id, { password: 'not-it' }), 422, 'invalid_parameter');
      assert.equal(wrong.details.field, 'password');
      assertErrorEnvelope(await password(t, account.testKey, id, {}), 400, 'invalid_request');
      const ok = await password(t, account.testKey, id, { password: 'sandbox-password' });
      assert.equal(ok.statusCode, 200, ok.body);
      assert.equal(ok.json().status, 'connected');
      assertErrorEnvelope(await simulate(t, account.testKey, id, 'scan'), 422, 'invalid_parameter');
      assert.equal((await simulate(t, account.testKey, id, 'disconnect')).json().status, 'disconnected');
      assertErrorEnvelope(await simulate(t, account.testKey, id, 'explode'), 422, 'invalid_parameter');
    } finally {
      await t.close();
    }
  });

  it("another account's session is not found; live keys have no simulate route", async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount();
      const b = await t.createAccount();
      const id = (await create(t, a.testKey)).json().session_id;
      assertErrorEnvelope(await get(t, b.testKey, id), 404, 'not_found');
      assertErrorEnvelope(await get(t, a.liveKey, id), 404, 'not_found');
      assertErrorEnvelope(await simulate(t, a.liveKey, id, 'scan'), 404, 'not_found');
      assert.deepEqual((await list(t, b.testKey)).json(), { sessions: [] });
    } finally {
      await t.close();
    }
  });

  it('POST takes no body, {} or null (or only a proxy); any other body is refused as POST /whatsapp/sessions refuses it, and nothing is created', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount();
      const post = (payload: string) => t.request({ method: 'POST', url: `${API}/telegram/sessions`, key: a.testKey, payload, headers: { 'content-type': 'application/json' } });
      for (const payload of ['[]', '"x"', '1', 'true', '[{"a":1}]']) {
        const error = assertErrorEnvelope(await post(payload), 400, 'invalid_request');
        assert.equal(error.message, 'request body must be a JSON object', payload);
        // The same answer as the WhatsApp route gives the same body.
        const whatsapp = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: a.testKey, payload, headers: { 'content-type': 'application/json' } });
        assert.equal(assertErrorEnvelope(whatsapp, 400, 'invalid_request').message, error.message, payload);
      }
      const unknown = assertErrorEnvelope(await post('{"a":1}'), 400, 'invalid_request');
      assert.equal(unknown.message, 'unknown field a; known fields are proxy');
      assert.equal(unknown.details.field, 'a');
      assert.deepEqual((await list(t, a.testKey)).json(), { sessions: [] }, 'no session was created by a refused body');
      for (const payload of ['{}', 'null']) assert.equal((await post(payload)).statusCode, 201, payload);
      assert.equal((await create(t, a.testKey)).statusCode, 201, 'no body at all');
    } finally {
      await t.close();
    }
  });
});

const FAST: TestAppOptions['telegramAccounts'] = { qrWaitMs: 3_000, minRenewMs: 50, leaseMs: 1_500, renewMs: 300, takeoverScanMs: 200, logoutTimeoutMs: 2_000 };

function liveApp(world: FakeTelegram, instance: string, extra: TestAppOptions = {}): Promise<TestApp> {
  return startTestApp({
    worker: false,
    ...extra,
    env: { TELEGRAM_API_ID: String(world.apiId), TELEGRAM_API_HASH: world.apiHash, ...extra.env },
    telegramClientFactory: world.factory(instance),
    telegramAccounts: { ...FAST, ...extra.telegramAccounts },
  });
}

const JANE: FakeAccount = { userId: 5_100_200_300n, username: 'jane_doe', phone: '14155550123' };

async function linked(t: TestApp, world: FakeTelegram, key: string, who: FakeAccount = JANE): Promise<string> {
  const created = (await create(t, key)).json();
  world.scan(decodeQr(created.qr_code), who);
  await eventually(async () => (await get(t, key, created.session_id)).json().status === 'connected', 'the session to connect');
  return created.session_id;
}

describe(`Telegram account sessions, live, against a fake MTProto server (${STORAGE_LABEL})`, () => {
  it('without TELEGRAM_API_ID / TELEGRAM_API_HASH live linking answers 503 not_configured (the operator\'s, not a platform error to retry) and keeps nothing', async () => {
    const world = new FakeTelegram();
    const t = await startTestApp({ worker: false, telegramClientFactory: world.factory('x') });
    try {
      const account = await t.createAccount();
      const answer = await create(t, account.liveKey);
      const res = assertErrorEnvelope(answer, 503, 'not_configured');
      assert.match(res.message, /the operator to set TELEGRAM_API_ID and TELEGRAM_API_HASH/);
      assert.deepEqual(res.details, { missing: ['TELEGRAM_API_ID', 'TELEGRAM_API_HASH'] });
      assert.equal(answer.headers['retry-after'], undefined, 'no retry mends it');
      assert.deepEqual((await list(t, account.liveKey)).json(), { sessions: [] });
    } finally {
      await t.close();
    }
  });

  it('the QR code carries the token of auth.exportLoginToken, renewed as it expires; the scan links the account and seals its key', async () => {
    const world = new FakeTelegram();
    world.tokenTtlSeconds = 1;
    const t = await liveApp(world, 'one');
    try {
      const account = await t.createAccount();
      await subscribe(t, account.liveKey);
      const created = (await create(t, account.liveKey)).json();
      assert.equal(created.status, 'qr_pending');
      const first = decodeQr(created.qr_code);
      const token = LOGIN_URL.exec(first)![1]!;
      assert.ok(world.tokens.some((k) => k.token.equals(Buffer.from(token, 'base64url'))), 'the token Telegram exported, in base64url');
      const exportReq = world.requests.find((r) => r.className === 'auth.ExportLoginToken')!.request as unknown as { apiId: number; apiHash: string };
      assert.equal(exportReq.apiId, world.apiId);

      // Telegram's token lasts a second here: the code on screen changes without a new POST.
      const renewed = await eventually(async () => {
        const now = (await get(t, account.liveKey, created.session_id)).json();
        return now.qr_code && decodeQr(now.qr_code) !== first ? decodeQr(now.qr_code) : undefined;
      }, 'a renewed login token');
      assert.match(renewed, LOGIN_URL);

      // The code on screen, scanned: a busy machine may read one in its last moment, and the next is on screen then.
      await eventually(async () => {
        const shown = (await get(t, account.liveKey, created.session_id)).json().qr_code;
        try {
          world.scan(decodeQr(shown), JANE);
          return true;
        } catch {
          return undefined;
        }
      }, 'a scannable code on screen');
      const session = await eventually(async () => {
        const now = (await get(t, account.liveKey, created.session_id)).json();
        return now.status === 'connected' ? now : undefined;
      }, 'the scan to link the account');
      assert.equal(session.user_id, '5100200300');
      assert.equal(session.username, 'jane_doe');
      assert.equal(session.phone_number, '14155550123');
      assert.equal(session.qr_code, undefined);

      const row = (await storedRow(t, created.session_id))!;
      const authorized = world.authorizedKeys();
      assert.equal(authorized.length, 1);
      assert.ok(row.auth_key && !row.auth_key.includes(authorized[0]!.key), 'the auth key is sealed at rest');
      assert.equal(t.app.services.secretBox.open(row.auth_key), `fake-session:2:${authorized[0]!.key}`, 'what is sealed is the authorization the library exported');
      assert.deepEqual((await sessionEvents(t, account.accountId)).map((e) => e.data.status), ['connected']);
    } finally {
      await t.close();
    }
  });

  it('an account in another data centre: LoginTokenMigrateTo, then auth.importLoginToken there', async () => {
    const world = new FakeTelegram();
    const t = await liveApp(world, 'one');
    try {
      const account = await t.createAccount();
      const id = await linked(t, world, account.liveKey, { ...JANE, dc: 4 });
      assert.ok(world.requests.some((r) => r.className === 'auth.ImportLoginToken'));
      assert.equal(t.app.services.secretBox.open((await storedRow(t, id))!.auth_key!).split(':')[1], '4', 'the key of the account’s own DC is kept');
    } finally {
      await t.close();
    }
  });

  it('ten wrong cloud passwords end the linking (qr_expired): no eleventh reaches Telegram, the right one included', async () => {
    const world = new FakeTelegram();
    const t = await liveApp(world, 'one');
    try {
      const account = await t.createAccount();
      await subscribe(t, account.liveKey);
      const created = (await create(t, account.liveKey)).json();
      world.scan(decodeQr(created.qr_code), { ...JANE, password: 'correct horse battery staple' });
      await eventually(async () => (await get(t, account.liveKey, created.session_id)).json().status === 'password_needed', 'password_needed');
      await tenWrongPasswords(t, account.liveKey, created.session_id, 'correct horse battery staple');
      assert.equal(world.requests.filter((r) => r.className === 'auth.CheckPassword').length, 10, 'ten checks reached Telegram, no more');
      assert.deepEqual((await sessionEvents(t, account.accountId)).map((e) => e.data.status), ['password_needed', 'qr_expired']);
    } finally {
      await t.close();
    }
  });

  it('a cloud password: password_needed, a wrong one refused by the SRP check (422), the right one links; the password is never logged or stored', async () => {
    const world = new FakeTelegram();
    const logs = captureLogs();
    const secret = 'correct horse battery staple';
    const t = await liveApp(world, 'one', { logger: logs.logger });
    try {
      const account = await t.createAccount();
      await subscribe(t, account.liveKey);
      const created = (await create(t, account.liveKey)).json();
      world.scan(decodeQr(created.qr_code), { ...JANE, password: secret });
      await eventually(async () => (await get(t, account.liveKey, created.session_id)).json().status === 'password_needed', 'password_needed');
      const wrong = assertErrorEnvelope(await password(t, account.liveKey, created.session_id, { password: 'tr0ub4dor&3' }), 422, 'invalid_parameter');
      assert.equal(wrong.details.field, 'password');
      assert.equal((await get(t, account.liveKey, created.session_id)).json().status, 'password_needed', 'still waiting after a wrong password');
      const ok = await password(t, account.liveKey, created.session_id, { password: secret });
      assert.equal(ok.statusCode, 200, ok.body);
      assert.equal(ok.json().status, 'connected');
      assert.equal(ok.json().username, 'jane_doe');
      const checks = world.requests.filter((r) => r.className === 'auth.CheckPassword');
      assert.equal(checks.length, 2, 'checked by auth.checkPassword (SRP), once per try');
      assert.deepEqual((await sessionEvents(t, account.accountId)).map((e) => e.data.status), ['password_needed', 'connected']);
      const everything = JSON.stringify(logs.lines) + JSON.stringify(await storedRow(t, created.session_id));
      assert.ok(!everything.includes(secret), 'the password is in no log line and no column');
      assertErrorEnvelope(await password(t, account.liveKey, created.session_id, { password: secret }), 422, 'invalid_parameter');
    } finally {
      await t.close();
    }
  });

  it('DELETE logs the authorization out at Telegram (auth.logOut) and erases the keys', async () => {
    const world = new FakeTelegram();
    const t = await liveApp(world, 'one');
    try {
      const account = await t.createAccount();
      const id = await linked(t, world, account.liveKey);
      assert.equal(world.authorizedKeys().length, 1);
      assert.deepEqual((await remove(t, account.liveKey, id)).json(), { deleted: true });
      assert.ok(world.requests.some((r) => r.className === 'auth.LogOut'), 'auth.logOut sent');
      assert.equal(world.authorizedKeys().length, 0, 'the authorization is gone at Telegram');
      assert.equal(await storedRow(t, id), undefined, 'the row and its sealed key are gone');
      assertErrorEnvelope(await get(t, account.liveKey, id), 404, 'not_found');
    } finally {
      await t.close();
    }
  });

  it('an API process without a worker hands a fresh link to a worker at once (its update state taken first); when the holder dies another takes it over from the sealed key; a revoked key disconnects it', async () => {
    const world = new FakeTelegram();
    await withRestartableStorage(async (reuse) => {
      const one = await liveApp(world, 'one', { reuse });
      const two = await liveApp(world, 'two', { reuse, worker: true });
      try {
        const account = await one.createAccount();
        const id = await linked(one, world, account.liveKey);
        const key = world.authorizedKeys()[0]!.key;
        // The linking process asked Telegram's update state on the fresh link, then let it go (serve --no-worker):
        // the worker takes it over, and asks the difference from that state, while the API process lives on (without the release it would hold the link for good).
        assert.ok(world.requests.some((r) => r.instance === 'one' && r.className === 'updates.GetState'), 'updates.getState on the freshly authorized link');
        const takeover = await eventually(() => world.requests.find((r) => r.instance === 'two' && r.className === 'updates.GetDifference'), 'the worker to take the link');
        assert.ok(takeover);
        assert.equal([...world.connections].filter((c) => c.instance === 'one').length, 0, 'the API process keeps no connection');
        const conn = [...world.connections].find((c) => c.instance === 'two')!;
        assert.equal(conn.key.key, key, 'the same authorization, opened from the database');
        assert.equal((await get(two, account.liveKey, id)).json().status, 'connected');

        // "two" dies without letting go: its lease runs out and "three" restores the session.
        await two.app.services.telegramAccounts.stop({ release: false });
        const three = await liveApp(world, 'three', { reuse, worker: true });
        await eventually(() => world.requests.find((r) => r.instance === 'three' && r.className === 'updates.GetDifference'), 'the takeover');
        await three.app.services.telegramAccounts.stop({ release: false });

        // Terminated from the phone: the next connection is refused and the session is disconnected.
        world.terminate(`fake-session:2:${key}`);
        const four = await liveApp(world, 'four', { reuse, worker: true });
        try {
          await eventually(async () => (await get(four, account.liveKey, id)).json().status === 'disconnected', 'the revoked session to be disconnected');
          assert.equal((await storedRow(four, id))!.auth_key, null, 'the dead key is erased');
        } finally {
          await three.close();
          await four.close();
        }
      } finally {
        await one.close();
        await two.close();
      }
    });
  });
});
