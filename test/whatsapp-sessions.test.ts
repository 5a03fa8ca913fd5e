import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import jsQRModule from 'jsqr';
import { PNG } from 'pngjs';
import { newWhatsappSessionId } from '../src/core/ids.js';
import { insertWhatsappSession } from '../src/store/whatsapp-sessions.js';
import {
  closeSharedAudio,
  defaultSendBody,
  startTestApp,
  STORAGE_LABEL,
  type InjectResult,
  type TestAccount,
  type TestApp,
  unreachableWhatsapp,
  assertErrorEnvelope,
} from './fixtures/app-harness.js';

const API = '/api/v1';
const SESSION_ID = /^ws_[0-9A-Za-z]{24}$/;
const SANDBOX_PHONE = '15550000000';
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
// jsqr ships CommonJS with an ES-style default export: take whichever form the loader hands over.
const jsQR = ((jsQRModule as unknown as { default?: typeof jsQRModule }).default ?? jsQRModule) as unknown as (
  data: Uint8ClampedArray,
  width: number,
  height: number,
) => { data: string } | null;

/** A clock the test moves by hand: the QR validity and auto-scan delays pass without waiting. */
function fakeClock(): { now: () => number; advance(ms: number): number } {
  let at = Date.UTC(2025, 0, 15, 12, 0, 0);
  return {
    now: () => at,
    advance(ms: number) {
      at += ms;
      return at;
    },
  };
}

const iso = (ms: number): string => new Date(ms).toISOString();

interface Created {
  session_id: string;
  qr_code: string;
  status: string;
}

async function createSession(t: TestApp, key: string, extra: { payload?: string; headers?: Record<string, string> } = {}): Promise<Created> {
  const res = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key, ...extra });
  assert.equal(res.statusCode, 201, res.body);
  return res.json<Created>();
}

const getSession = (t: TestApp, key: string, id: string) => t.request({ method: 'GET', url: `${API}/whatsapp/sessions/${id}`, key });
const listSessions = (t: TestApp, key: string) => t.request({ method: 'GET', url: `${API}/whatsapp/sessions`, key });
const deleteSession = (t: TestApp, key: string, id: string) => t.request({ method: 'DELETE', url: `${API}/whatsapp/sessions/${id}`, key });
const simulate = (t: TestApp, key: string, id: string, body: unknown) =>
  t.request({ method: 'POST', url: `${API}/whatsapp/sessions/${id}/simulate`, key, ...(body === undefined ? {} : { body }) });

async function statusOf(t: TestApp, key: string, id: string): Promise<string> {
  const res = await getSession(t, key, id);
  assert.equal(res.statusCode, 200, res.body);
  return res.json().status;
}

/** Decodes the data URI and checks it is a PNG a phone camera could read. */
function decodeQr(qrCode: string): { width: number; height: number; text: string } {
  const match = /^data:image\/png;base64,([A-Za-z0-9+/]+={0,2})$/.exec(qrCode);
  assert.ok(match, `qr_code is not a base64 PNG data URI: ${qrCode.slice(0, 40)}…`);
  const bytes = Buffer.from(match[1]!, 'base64');
  assert.deepEqual(bytes.subarray(0, 8), PNG_SIGNATURE, 'PNG signature');
  assert.equal(bytes.readUInt32BE(8), 13, 'IHDR chunk length');
  assert.equal(bytes.subarray(12, 16).toString('latin1'), 'IHDR', 'first chunk is IHDR');
  const width = bytes.readUInt32BE(16);
  const height = bytes.readUInt32BE(20);
  assert.ok(width >= 21 && width <= 4096, `sane width: ${width}`);
  assert.ok(height >= 21 && height <= 4096, `sane height: ${height}`);
  assert.equal(bytes.subarray(bytes.length - 8, bytes.length - 4).toString('latin1'), 'IEND', 'ends with IEND');
  const image = PNG.sync.read(bytes);
  assert.equal(image.width, width);
  assert.equal(image.height, height);
  const decoded = jsQR(new Uint8ClampedArray(image.data.buffer, image.data.byteOffset, image.data.byteLength), image.width, image.height);
  assert.ok(decoded, 'the PNG holds a readable QR code');
  return { width, height, text: decoded.data };
}

after(async () => {
  await closeSharedAudio();
});

describe(`WhatsApp sandbox sessions: create, read, list, delete (${STORAGE_LABEL})`, () => {
  const clock = fakeClock();
  let t: TestApp;
  let a: TestAccount;
  let b: TestAccount;

  before(async () => {
    t = await startTestApp({
      env: { SANDBOX_AUTO_SCAN_SECONDS: '0' },
      now: clock.now,
      worker: false,
      // Tests never reach the real WhatsApp: live linking here finds it unreachable.
      whatsappSocketFactory: unreachableWhatsapp,
      whatsappLive: { qrWaitMs: 3_000 },
    });
    a = await t.createAccount();
    b = await t.createAccount();
  });
  after(async () => {
    await t.close();
  });

  it('POST without a body → 201 with exactly session_id, qr_code (a real, readable PNG QR) and status qr_pending', async () => {
    const res = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: a.testKey });
    assert.equal(res.statusCode, 201, res.body);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    const body = res.json<Created>();
    assert.deepEqual(Object.keys(body).sort(), ['qr_code', 'session_id', 'status']);
    assert.match(body.session_id, SESSION_ID);
    assert.equal(body.status, 'qr_pending');
    const qr = decodeQr(body.qr_code);
    // A WhatsApp Web pairing payload: a server ref, then three base64 keys, comma separated.
    assert.match(qr.text, /^2@[A-Za-z0-9+/=]+(,[A-Za-z0-9+/=]+){3}$/);

    const other = await createSession(t, a.testKey);
    assert.notEqual(other.session_id, body.session_id);
    assert.notEqual(decodeQr(other.qr_code).text, qr.text, 'every session gets its own pairing code');
  });

  it('POST with Content-Type: application/json and an empty body is the same as no body (201)', async () => {
    const created = await createSession(t, a.testKey, { payload: '', headers: { 'content-type': 'application/json' } });
    assert.match(created.session_id, SESSION_ID);
    assert.equal(created.status, 'qr_pending');
    decodeQr(created.qr_code);
    const withCharset = await createSession(t, a.testKey, { payload: '', headers: { 'content-type': 'application/json; charset=utf-8' } });
    assert.equal(withCharset.status, 'qr_pending');
  });

  it('...while POST /send with Content-Type: application/json and an empty body stays 400 invalid_request', async () => {
    const res = await t.request({ method: 'POST', url: `${API}/send`, key: a.testKey, payload: '', headers: { 'content-type': 'application/json' } });
    assertErrorEnvelope(res, 400, 'invalid_request');
  });

  it('GET /whatsapp/sessions/:id → exactly session_id, status, phone_number, created_at, last_connected_at', async () => {
    const createdAt = clock.now();
    const { session_id } = await createSession(t, a.testKey);
    const res = await getSession(t, a.testKey, session_id);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), {
      session_id,
      status: 'qr_pending',
      phone_number: null,
      created_at: iso(createdAt),
      last_connected_at: null,
    });
  });

  it('GET /whatsapp/sessions lists exactly this account and environment’s sessions, with the list fields', async () => {
    const own = await t.createAccount();
    const first = await createSession(t, own.testKey);
    const second = await createSession(t, own.testKey);
    await createSession(t, b.testKey); // another account's

    const res = await listSessions(t, own.testKey);
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.deepEqual(Object.keys(body), ['sessions']);
    assert.deepEqual(body.sessions.map((s: { id: string }) => s.id).sort(), [first.session_id, second.session_id].sort());
    for (const item of body.sessions) {
      assert.deepEqual(Object.keys(item).sort(), ['created_at', 'id', 'last_connected_at', 'phone_number', 'status']);
      assert.equal(item.status, 'qr_pending');
      assert.equal(item.phone_number, null);
      assert.equal(item.last_connected_at, null);
      assert.equal(item.created_at, iso(clock.now()));
    }

    const live = await listSessions(t, own.liveKey);
    assert.equal(live.statusCode, 200, live.body);
    assert.deepEqual(live.json(), { sessions: [] }, 'the live key of the same account sees none of the sandbox sessions');

    const fresh = await t.createAccount();
    assert.deepEqual((await listSessions(t, fresh.testKey)).json(), { sessions: [] });
  });

  it('DELETE → {deleted: true}; then GET → 404 not_found, DELETE again → 404, gone from the list', async () => {
    const { session_id } = await createSession(t, a.testKey);
    const res = await deleteSession(t, a.testKey, session_id);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { deleted: true });

    assertErrorEnvelope(await getSession(t, a.testKey, session_id), 404, 'not_found');
    assertErrorEnvelope(await deleteSession(t, a.testKey, session_id), 404, 'not_found');
    assertErrorEnvelope(await simulate(t, a.testKey, session_id, { event: 'scan' }), 404, 'not_found');
    const ids = (await listSessions(t, a.testKey)).json().sessions.map((s: { id: string }) => s.id);
    assert.ok(!ids.includes(session_id));
  });

  it('unknown session ids → 404 not_found on GET and DELETE', async () => {
    assertErrorEnvelope(await getSession(t, a.testKey, newWhatsappSessionId()), 404, 'not_found');
    assertErrorEnvelope(await deleteSession(t, a.testKey, newWhatsappSessionId()), 404, 'not_found');
    assertErrorEnvelope(await getSession(t, a.testKey, 'not-a-session'), 404, 'not_found');
  });

  it('another account’s session, or the other environment’s, is 404 for GET, DELETE and simulate, and stays untouched', async () => {
    const { session_id } = await createSession(t, a.testKey);
    for (const key of [b.testKey, b.liveKey, a.liveKey]) {
      assertErrorEnvelope(await getSession(t, key, session_id), 404, 'not_found');
      assertErrorEnvelope(await deleteSession(t, key, session_id), 404, 'not_found');
      assertErrorEnvelope(await simulate(t, key, session_id, { event: 'scan' }), 404, 'not_found');
    }
    assert.equal(await statusOf(t, a.testKey, session_id), 'qr_pending', 'neither deleted nor scanned by the others');
  });

  it('a live session (inserted as live linking would) is invisible to the test key and to other accounts', async () => {
    const at = clock.now();
    const id = newWhatsappSessionId(at);
    await insertWhatsappSession(t.app.services.db.kysely, {
      id,
      account_id: a.accountId,
      env: 'live',
      status: 'connected',
      phone_number: '14155550123',
      qr_expires_at: null,
      auto_connect_at: null,
      auth_state: null,
      created_at: at,
      updated_at: at,
      last_connected_at: at,
    });
    const own = await getSession(t, a.liveKey, id);
    assert.equal(own.statusCode, 200, own.body);
    assert.equal(own.json().status, 'connected');
    assert.deepEqual(
      (await listSessions(t, a.liveKey)).json().sessions.map((s: { id: string }) => s.id),
      [id],
    );
    for (const key of [a.testKey, b.liveKey, b.testKey]) {
      assertErrorEnvelope(await getSession(t, key, id), 404, 'not_found');
      assertErrorEnvelope(await deleteSession(t, key, id), 404, 'not_found');
      const ids = (await listSessions(t, key)).json().sessions.map((s: { id: string }) => s.id);
      assert.ok(!ids.includes(id));
    }
    // Live sessions are real devices: simulate does not exist for live keys, even on their own session.
    assertErrorEnvelope(await simulate(t, a.liveKey, id, { event: 'disconnect' }), 404, 'not_found');
    assert.equal((await getSession(t, a.liveKey, id)).json().status, 'connected');
  });

  it('a live key POST /whatsapp/sessions while WhatsApp cannot be reached → 502 platform_error in the error envelope, nothing left behind', async () => {
    const before = (await listSessions(t, b.liveKey)).json();
    const res = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: b.liveKey });
    const error = assertErrorEnvelope(res, 502, 'platform_error');
    assert.equal(error.details, null);
    assert.deepEqual((await listSessions(t, b.liveKey)).json(), before);
  });
});

describe(`WhatsApp sandbox sessions: QR expiry and simulated events (${STORAGE_LABEL})`, () => {
  const clock = fakeClock();
  let t: TestApp;
  let a: TestAccount;

  before(async () => {
    t = await startTestApp({ env: { SANDBOX_AUTO_SCAN_SECONDS: '0' }, now: clock.now, worker: false });
    a = await t.createAccount();
  });
  after(async () => {
    await t.close();
  });

  it('with SANDBOX_AUTO_SCAN_SECONDS=0 an unscanned session stays qr_pending at 44 s and is qr_expired at 46 s', async () => {
    const createdAt = clock.now();
    const { session_id } = await createSession(t, a.testKey);
    clock.advance(44_000);
    assert.equal(await statusOf(t, a.testKey, session_id), 'qr_pending');
    clock.advance(2_000);
    const res = await getSession(t, a.testKey, session_id);
    assert.deepEqual(res.json(), {
      session_id,
      status: 'qr_expired',
      phone_number: null,
      created_at: iso(createdAt),
      last_connected_at: null,
    });
    // An expired QR cannot be scanned any more.
    const error = assertErrorEnvelope(await simulate(t, a.testKey, session_id, { event: 'scan' }), 422, 'invalid_parameter');
    assert.equal(error.details?.field, 'event');
    assert.equal(await statusOf(t, a.testKey, session_id), 'qr_expired');
  });

  it('the list shows the expiry too, without a lookup of the session first', async () => {
    const { session_id } = await createSession(t, a.testKey);
    clock.advance(46_000);
    const item = (await listSessions(t, a.testKey)).json().sessions.find((s: { id: string }) => s.id === session_id);
    assert.equal(item?.status, 'qr_expired');
  });

  it('simulate scan → connected with the sandbox phone and last_connected_at; disconnect → disconnected', async () => {
    const createdAt = clock.now();
    const { session_id } = await createSession(t, a.testKey);
    const scannedAt = clock.advance(5_000);
    const scanned = await simulate(t, a.testKey, session_id, { event: 'scan' });
    assert.equal(scanned.statusCode, 200, scanned.body);
    const connected = {
      session_id,
      status: 'connected',
      phone_number: SANDBOX_PHONE,
      created_at: iso(createdAt),
      last_connected_at: iso(scannedAt),
    };
    assert.deepEqual(scanned.json(), connected);
    assert.deepEqual((await getSession(t, a.testKey, session_id)).json(), connected);

    // A connected session does not expire when the QR's 45 s have passed.
    clock.advance(60_000);
    assert.equal(await statusOf(t, a.testKey, session_id), 'connected');

    const disconnected = await simulate(t, a.testKey, session_id, { event: 'disconnect' });
    assert.equal(disconnected.statusCode, 200, disconnected.body);
    assert.deepEqual(disconnected.json(), { ...connected, status: 'disconnected' });
    const item = (await listSessions(t, a.testKey)).json().sessions.find((s: { id: string }) => s.id === session_id);
    assert.deepEqual(item, { id: session_id, phone_number: SANDBOX_PHONE, status: 'disconnected', created_at: iso(createdAt), last_connected_at: iso(scannedAt) });
  });

  it('POST {"phone_number"} → 201 with exactly session_id, pairing_code and status; the code is 8 characters, the same for the same number; it connects like a QR session', async () => {
    const post = (body: unknown) => t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: a.testKey, body });
    const first = await post({ phone_number: '14155550123' });
    assert.equal(first.statusCode, 201, first.body);
    const created = first.json();
    assert.deepEqual(Object.keys(created).sort(), ['pairing_code', 'session_id', 'status']);
    assert.equal(created.status, 'qr_pending');
    assert.match(created.pairing_code, /^[1-9A-HJ-NP-TV-Z]{8}$/);
    const again = (await post({ phone_number: '14155550123' })).json();
    assert.notEqual(again.session_id, created.session_id);
    assert.equal(again.pairing_code, created.pairing_code, 'deterministic in the sandbox');
    assert.notEqual((await post({ phone_number: '447700900123' })).json().pairing_code, created.pairing_code);

    const scannedAt = clock.advance(5_000);
    const linked = await simulate(t, a.testKey, created.session_id, { event: 'scan' });
    assert.equal(linked.statusCode, 200, linked.body);
    assert.equal(linked.json().status, 'connected');
    assert.equal(linked.json().phone_number, SANDBOX_PHONE);
    assert.equal(linked.json().last_connected_at, iso(scannedAt));

    // Bad numbers: a wrong value is 422 naming phone_number, a wrong type 400; an empty object is a QR session.
    for (const phone_number of ['+14155550123', '123', '1415555012345678', 'fourteen']) {
      const res = await post({ phone_number });
      assert.equal(res.statusCode, 422, res.body);
      assert.equal(res.json().error.code, 'invalid_parameter');
      assert.equal(res.json().error.details.field, 'phone_number');
    }
    const mistyped = await post({ phone_number: 14155550123 });
    assert.equal(mistyped.statusCode, 400, mistyped.body);
    assert.equal(mistyped.json().error.code, 'invalid_request');
    assert.equal(mistyped.json().error.details.field, 'phone_number');
    const plain = await post({});
    assert.equal(plain.statusCode, 201, plain.body);
    assert.deepEqual(Object.keys(plain.json()).sort(), ['qr_code', 'session_id', 'status']);
  });

  it('simulate expire → qr_expired', async () => {
    const { session_id } = await createSession(t, a.testKey);
    const res = await simulate(t, a.testKey, session_id, { event: 'expire' });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().status, 'qr_expired');
    assert.equal(res.json().phone_number, null);
    assert.equal(await statusOf(t, a.testKey, session_id), 'qr_expired');
  });

  it('moves the status does not allow → 422 invalid_parameter (field event), status unchanged', async () => {
    const pending = (await createSession(t, a.testKey)).session_id;
    const connected = (await createSession(t, a.testKey)).session_id;
    assert.equal((await simulate(t, a.testKey, connected, { event: 'scan' })).statusCode, 200);
    const disconnected = (await createSession(t, a.testKey)).session_id;
    assert.equal((await simulate(t, a.testKey, disconnected, { event: 'scan' })).statusCode, 200);
    assert.equal((await simulate(t, a.testKey, disconnected, { event: 'disconnect' })).statusCode, 200);
    const expired = (await createSession(t, a.testKey)).session_id;
    assert.equal((await simulate(t, a.testKey, expired, { event: 'expire' })).statusCode, 200);

    const refused: Array<[string, string, string]> = [
      [pending, 'disconnect', 'qr_pending'],
      [connected, 'scan', 'connected'],
      [connected, 'expire', 'connected'],
      [disconnected, 'scan', 'disconnected'],
      [disconnected, 'expire', 'disconnected'],
      [disconnected, 'disconnect', 'disconnected'],
      [expired, 'scan', 'qr_expired'],
      [expired, 'expire', 'qr_expired'],
      [expired, 'disconnect', 'qr_expired'],
    ];
    for (const [id, event, status] of refused) {
      const error = assertErrorEnvelope(await simulate(t, a.testKey, id, { event }), 422, 'invalid_parameter');
      assert.equal(error.details?.field, 'event', `${event} on ${status}`);
      assert.equal(await statusOf(t, a.testKey, id), status, `${event} on ${status} leaves it ${status}`);
    }
  });

  it('an unknown event → 422 invalid_parameter; a missing body or event, or a non-string event → 400 invalid_request', async () => {
    const { session_id } = await createSession(t, a.testKey);
    for (const event of ['explode', 'SCAN', '']) {
      const error = assertErrorEnvelope(await simulate(t, a.testKey, session_id, { event }), 422, 'invalid_parameter');
      assert.equal(error.details?.field, 'event');
    }
    assertErrorEnvelope(await simulate(t, a.testKey, session_id, undefined), 400, 'invalid_request');
    const missing = assertErrorEnvelope(await simulate(t, a.testKey, session_id, {}), 400, 'invalid_request');
    assert.equal(missing.details?.field, 'event');
    assertErrorEnvelope(await simulate(t, a.testKey, session_id, { event: 1 }), 400, 'invalid_request');
    assertErrorEnvelope(await simulate(t, a.testKey, session_id, ['scan']), 400, 'invalid_request');
    assert.equal(await statusOf(t, a.testKey, session_id), 'qr_pending');
  });

  it('simulate on an unknown session → 404; with a live key → 404, even on a sandbox session id', async () => {
    assertErrorEnvelope(await simulate(t, a.testKey, newWhatsappSessionId(), { event: 'scan' }), 404, 'not_found');
    const { session_id } = await createSession(t, a.testKey);
    assertErrorEnvelope(await simulate(t, a.liveKey, session_id, { event: 'scan' }), 404, 'not_found');
    assertErrorEnvelope(await simulate(t, a.liveKey, newWhatsappSessionId(), { event: 'scan' }), 404, 'not_found');
    assert.equal(await statusOf(t, a.testKey, session_id), 'qr_pending');
  });
});

describe(`WhatsApp sandbox sessions: auto-connect after SANDBOX_AUTO_SCAN_SECONDS (${STORAGE_LABEL})`, () => {
  const clock = fakeClock();
  let t: TestApp;
  let a: TestAccount;

  before(async () => {
    t = await startTestApp({ env: { SANDBOX_AUTO_SCAN_SECONDS: '3' }, now: clock.now, worker: false });
    a = await t.createAccount();
  });
  after(async () => {
    await t.close();
  });

  it('stays qr_pending before the delay, then is connected with phone 15550000000 and last_connected_at set', async () => {
    const createdAt = clock.now();
    const { session_id, status } = await createSession(t, a.testKey);
    assert.equal(status, 'qr_pending');
    clock.advance(2_900);
    assert.equal(await statusOf(t, a.testKey, session_id), 'qr_pending');
    clock.advance(200);
    const res = await getSession(t, a.testKey, session_id);
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.status, 'connected');
    assert.equal(body.phone_number, SANDBOX_PHONE);
    assert.equal(body.created_at, iso(createdAt));
    assert.ok(body.last_connected_at !== null, 'last_connected_at is set');
    const connectedAt = Date.parse(body.last_connected_at);
    assert.ok(connectedAt >= createdAt + 3_000 && connectedAt <= clock.now(), `last_connected_at ${body.last_connected_at}`);

    // Still connected long after the QR's 45 s.
    clock.advance(120_000);
    assert.equal(await statusOf(t, a.testKey, session_id), 'connected');
  });

  it('the list shows the auto-connected session too', async () => {
    const { session_id } = await createSession(t, a.testKey);
    clock.advance(3_500);
    const item = (await listSessions(t, a.testKey)).json().sessions.find((s: { id: string }) => s.id === session_id);
    assert.equal(item?.status, 'connected');
    assert.equal(item?.phone_number, SANDBOX_PHONE);
    assert.notEqual(item?.last_connected_at, null);
  });

  it('a session expired by simulate before the delay does not connect by itself afterwards', async () => {
    const { session_id } = await createSession(t, a.testKey);
    assert.equal((await simulate(t, a.testKey, session_id, { event: 'expire' })).statusCode, 200);
    clock.advance(10_000);
    assert.equal(await statusOf(t, a.testKey, session_id), 'qr_expired');
  });
});

describe(`WhatsApp voice notes through sandbox sessions (${STORAGE_LABEL})`, () => {
  const clock = fakeClock();
  let t: TestApp;
  let a: TestAccount;

  async function connectedSession(): Promise<string> {
    const { session_id } = await createSession(t, a.testKey);
    const res = await simulate(t, a.testKey, session_id, { event: 'scan' });
    assert.equal(res.statusCode, 200, res.body);
    return session_id;
  }

  before(async () => {
    t = await startTestApp({ env: { SANDBOX_AUTO_SCAN_SECONDS: '0', SANDBOX_LATENCY_MS: '1500' }, now: clock.now, worker: true });
    a = await t.createAccount();
  });
  after(async () => {
    await t.close();
  });

  it('a voice note through a connected session is delivered', async () => {
    const sessionId = await connectedSession();
    const res = await t.send(a.testKey, defaultSendBody('whatsapp', t.mp3Url, sessionId));
    assert.equal(res.statusCode, 202, res.body);
    const done = await t.waitForStatus(a.testKey, res.json().id, ['delivered', 'failed']);
    assert.equal(done.status, 'delivered', JSON.stringify(done));
    assert.equal(done.error, null);
    assert.notEqual(done.delivered_at, null);
  });

  it('a session disconnected after acceptance but before delivery fails the message with session_not_connected', async () => {
    const sessionId = await connectedSession();
    const res = await t.send(a.testKey, defaultSendBody('whatsapp', t.voiceUrl, sessionId));
    assert.equal(res.statusCode, 202, res.body);
    const id = res.json().id;
    // The sandbox platform takes 1.5 s: disconnect while the worker holds the message.
    await t.waitForStatus(a.testKey, id, ['processing', 'delivered', 'failed']);
    assert.equal((await simulate(t, a.testKey, sessionId, { event: 'disconnect' })).statusCode, 200);
    const done = await t.waitForStatus(a.testKey, id, ['delivered', 'failed']);
    assert.equal(done.status, 'failed', JSON.stringify(done));
    assert.equal(done.delivered_at, null);
    assert.equal(done.error.code, 'session_not_connected');
    assert.equal(typeof done.error.message, 'string');
  });

  it('sending through a session that is not connected is refused at once: 422 session_not_connected', async () => {
    const { session_id } = await createSession(t, a.testKey);
    const error = assertErrorEnvelope(await t.send(a.testKey, defaultSendBody('whatsapp', t.voiceUrl, session_id)), 422, 'session_not_connected');
    assert.equal(error.details?.field, 'session.session_id');
  });

  it('another account’s connected session cannot be used: 422 invalid_parameter on session.session_id', async () => {
    const sessionId = await connectedSession();
    const other = await t.createAccount();
    const error = assertErrorEnvelope(await t.send(other.testKey, defaultSendBody('whatsapp', t.voiceUrl, sessionId)), 422, 'invalid_parameter');
    assert.equal(error.details?.field, 'session.session_id');
  });
});
