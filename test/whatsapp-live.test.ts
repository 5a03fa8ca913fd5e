import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import jsQRModule from 'jsqr';
import { PNG } from 'pngjs';
import type { Acquired } from '../src/platforms/whatsapp/live.js';
import {
  closeSharedAudio,
  defaultSendBody,
  FAST_WHATSAPP,
  startTestApp,
  STORAGE_LABEL,
  withRestartableStorage,
  type InjectResult,
  type TestAccount,
  type TestApp,
  type TestAppOptions,
  assertErrorEnvelope,
} from './fixtures/app-harness.js';
import { Writable } from 'node:stream';
import { purgeOldWhatsappSentMessages, startRetention } from '../src/housekeeping/retention.js';
import { createLogger } from '../src/logger.js';
import { encodedMessage } from './fakes/whatsapp-voice-note.js';
import { eventually } from './fixtures/eventually.js';
import { FakeWhatsapp } from './fakes/whatsapp-network.js';
import { type SentVoiceNote } from './fakes/whatsapp-socket.js';

const API = '/api/v1';
const SESSION_ID = /^ws_[0-9A-Za-z]{24}$/;
const LINKED_PHONE = '14155550123';
const RECIPIENT = '14155550100';
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const jsQR = ((jsQRModule as unknown as { default?: typeof jsQRModule }).default ?? jsQRModule) as unknown as (
  data: Uint8ClampedArray,
  width: number,
  height: number,
) => { data: string } | null;

const FAST = FAST_WHATSAPP;
const HOLDING = { leaseMs: 4_000, renewMs: 500 };

function liveApp(world: FakeWhatsapp, instance: string, extra: TestAppOptions = {}): Promise<TestApp> {
  return startTestApp({
    ...extra,
    whatsappSocketFactory: world.factory(instance),
    whatsappLive: { ...FAST, ...extra.whatsappLive },
  });
}

/** The text inside a PNG data URI QR code. */
function decodeQr(qrCode: string): string {
  const match = /^data:image\/png;base64,([A-Za-z0-9+/]+={0,2})$/.exec(qrCode);
  assert.ok(match, `qr_code is not a base64 PNG data URI: ${qrCode.slice(0, 40)}…`);
  const bytes = Buffer.from(match[1]!, 'base64');
  assert.deepEqual(bytes.subarray(0, 8), PNG_SIGNATURE, 'PNG signature');
  const image = PNG.sync.read(bytes);
  const decoded = jsQR(new Uint8ClampedArray(image.data.buffer, image.data.byteOffset, image.data.byteLength), image.width, image.height);
  assert.ok(decoded, 'the PNG holds a readable QR code');
  return decoded.data;
}

const getSession = (t: TestApp, key: string, id: string) => t.request({ method: 'GET', url: `${API}/whatsapp/sessions/${id}`, key });
const listSessions = (t: TestApp, key: string) => t.request({ method: 'GET', url: `${API}/whatsapp/sessions`, key });
const deleteSession = (t: TestApp, key: string, id: string) => t.request({ method: 'DELETE', url: `${API}/whatsapp/sessions/${id}`, key });

async function createSession(t: TestApp, key: string): Promise<{ session_id: string; qr_code: string; status: string }> {
  const res = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key });
  assert.equal(res.statusCode, 201, res.body);
  return res.json();
}

/** Polls GET until the session reaches `status`; returns the body. */
async function sessionReaches(t: TestApp, key: string, id: string, status: string, timeoutMs = 10_000): Promise<any> {
  let last: any;
  return eventually(
    async () => {
      last = (await getSession(t, key, id)).json();
      return last.status === status ? last : undefined;
    },
    `session ${id} to be ${status}`,
    timeoutMs,
  ).catch((error: Error) => {
    throw new Error(`${error.message}; last: ${JSON.stringify(last)}`);
  });
}

/** Creates a live session and pairs it like a phone would: scan, 515 restart, open. */
async function linkedSession(t: TestApp, world: FakeWhatsapp, key: string, phone = LINKED_PHONE): Promise<string> {
  const { session_id } = await createSession(t, key);
  world.scan(session_id, phone);
  await sessionReaches(t, key, session_id, 'connected');
  return session_id;
}

async function deliver(t: TestApp, key: string, sessionId: string, recipient = RECIPIENT, audioUrl = t.voiceUrl, timeoutMs?: number): Promise<any> {
  const res = await t.send(key, { platform: 'whatsapp', recipient, audio_url: audioUrl, session: { session_id: sessionId } });
  assert.equal(res.statusCode, 202, res.body);
  return t.waitForStatus(key, res.json().id, ['delivered', 'failed'], timeoutMs);
}

async function authRows(t: TestApp, sessionId: string): Promise<{ authState: string | null | undefined; keys: Array<{ type: string; value: string }> }> {
  const db = t.app.services.db.kysely;
  const row = await db.selectFrom('whatsapp_sessions').select('auth_state').where('id', '=', sessionId).executeTakeFirst();
  const keys = await db.selectFrom('whatsapp_keys').select(['type', 'value']).where('session_id', '=', sessionId).execute();
  return { authState: row?.auth_state, keys };
}

/** The message as stored: how many attempts it took, and the session it was routed by. */
async function storedMessage(t: TestApp, id: string): Promise<{ attempts: number; affinity: string | null }> {
  const row = await t.app.services.db.kysely
    .selectFrom('messages')
    .select(['attempts', 'affinity'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return { attempts: Number(row.attempts), affinity: row.affinity };
}

/**
 * Records every time the worker of `t` asked for a session's socket, and what it got: `held` (it sends),
 * or why not (`held_elsewhere` is a bounce: the message goes back to the queue for another process).
 */
function watchAcquire(t: TestApp): Array<{ sessionId: string; outcome: 'held' | Exclude<Acquired, { held: object }>['reason'] }> {
  const live = t.app.services.whatsappLive;
  const real = live.acquire.bind(live);
  const seen: ReturnType<typeof watchAcquire> = [];
  live.acquire = async (sessionId) => {
    const got = await real(sessionId);
    seen.push({ sessionId, outcome: got.held ? 'held' : got.reason });
    return got;
  };
  return seen;
}

after(async () => {
  await closeSharedAudio();
});

describe(`WhatsApp live sessions: linking and delivery (${STORAGE_LABEL})`, () => {
  const world = new FakeWhatsapp();
  let t: TestApp;
  let a: TestAccount;
  let sessionId: string;

  before(async () => {
    t = await liveApp(world, 'A');
    a = await t.createAccount();
  });
  after(async () => {
    await t.close();
  });

  it('POST with a live key → 201 with the PNG QR of the code WhatsApp gave, status qr_pending', async () => {
    const res = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: a.liveKey });
    assert.equal(res.statusCode, 201, res.body);
    const body = res.json();
    assert.deepEqual(Object.keys(body).sort(), ['qr_code', 'session_id', 'status']);
    assert.match(body.session_id, SESSION_ID);
    assert.equal(body.status, 'qr_pending');
    const socket = world.current(body.session_id);
    assert.ok(socket?.qr, 'a socket was opened for the session and showed a code');
    assert.equal(decodeQr(body.qr_code), socket.qr, 'the image is the code WhatsApp asked to show');
    sessionId = body.session_id;

    const got = (await getSession(t, a.liveKey, sessionId)).json();
    assert.deepEqual(got, { session_id: sessionId, status: 'qr_pending', phone_number: null, created_at: got.created_at, last_connected_at: null });
    assertErrorEnvelope(await getSession(t, a.testKey, sessionId), 404, 'not_found');
  });

  it('scan → WhatsApp restarts the connection (515) → the service reconnects with the saved creds → connected with the phone number', async () => {
    const before = Date.now();
    world.scan(sessionId, LINKED_PHONE);
    const got = await sessionReaches(t, a.liveKey, sessionId, 'connected');
    assert.equal(got.phone_number, LINKED_PHONE);
    assert.ok(Date.parse(got.last_connected_at) >= before - 1000, got.last_connected_at);
    const calls = world.calls.filter((c) => c.sessionId === sessionId);
    assert.equal(calls.length, 2, 'one socket to pair, one reconnect after the 515');
    assert.equal(calls[0]!.paired, false);
    assert.equal(calls[1]!.paired, true, 'the reconnect carries the creds the scan produced');
    assert.deepEqual(calls[1]!.noiseKeyPublic, calls[0]!.noiseKeyPublic, 'same device identity');
    const listed = (await listSessions(t, a.liveKey)).json().sessions.find((s: { id: string }) => s.id === sessionId);
    assert.equal(listed.status, 'connected');
    assert.equal(listed.phone_number, LINKED_PHONE);
  });

  it('POST {"phone_number"} with a live key → 201 with the pairing code WhatsApp gave; typing it on the phone links the device like a scan', async () => {
    const phone = '447700900123';
    const res = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: a.liveKey, body: { phone_number: phone } });
    assert.equal(res.statusCode, 201, res.body);
    const body = res.json();
    assert.deepEqual(Object.keys(body).sort(), ['pairing_code', 'session_id', 'status']);
    assert.equal(body.status, 'qr_pending');
    const socket = world.current(body.session_id)!;
    assert.equal(socket.pairingPhone, phone, 'WhatsApp was asked for a code for that number');
    assert.equal(body.pairing_code, socket.pairingCode);
    assert.match(body.pairing_code, /^[1-9A-HJ-NP-TV-Z]{8}$/);
    // Pending, the creds name the phone already (Baileys does that); the session is not linked for it.
    assert.equal((await getSession(t, a.liveKey, body.session_id)).json().status, 'qr_pending');

    world.enterCode(body.session_id, body.pairing_code);
    const got = await sessionReaches(t, a.liveKey, body.session_id, 'connected');
    assert.equal(got.phone_number, phone);
    const done = await deliver(t, a.liveKey, body.session_id, '14155550104');
    assert.equal(done.status, 'delivered', JSON.stringify(done));
  });

  it('a voice note through the connected session reaches WhatsApp as a ptt OGG Opus note with seconds and a 64-bar waveform', async () => {
    const done = await deliver(t, a.liveKey, sessionId, RECIPIENT, t.mp3Url);
    assert.equal(done.status, 'delivered', JSON.stringify(done));
    assert.ok(world.lookups.includes(RECIPIENT), 'the recipient was looked up first');
    const sent = world.sent.filter((s) => s.sessionId === sessionId);
    assert.equal(sent.length, 1);
    const note = sent[0]!;
    assert.equal(note.jid, `${RECIPIENT}@s.whatsapp.net`);
    assert.equal(note.content.ptt, true);
    assert.equal(note.content.mimetype, 'audio/ogg; codecs=opus');
    assert.ok(Buffer.isBuffer(note.content.audio));
    assert.equal(note.content.audio.subarray(0, 4).toString('latin1'), 'OggS', 'an Ogg stream');
    assert.ok(note.content.audio.includes(Buffer.from('OpusHead')), 'carrying Opus');
    assert.ok(Number.isInteger(note.content.seconds) && note.content.seconds >= 1 && note.content.seconds <= 10, String(note.content.seconds));
    assert.ok(note.content.waveform instanceof Uint8Array);
    assert.equal(note.content.waveform.length, 64);
    assert.ok([...note.content.waveform].every((v) => v >= 0 && v <= 100));
    assert.ok([...note.content.waveform].some((v) => v > 0), 'the waveform is not flat');
  });

  it('a recipient who is not on WhatsApp → failed recipient_not_found, nothing sent', async () => {
    world.absent.add('14155550999');
    const sentBefore = world.sent.length;
    const done = await deliver(t, a.liveKey, sessionId, '14155550999');
    assert.equal(done.status, 'failed');
    assert.equal(done.error.code, 'recipient_not_found');
    assert.equal(done.delivered_at, null);
    assert.equal(world.sent.length, sentBefore);
  });

  it('every send carries a message id derived from ours; a retry after a lost acknowledgement carries the same id, and the recipient gets one note', async () => {
    const recipient = '14155550102';
    const jid = `${recipient}@s.whatsapp.net`;
    // WhatsApp takes the note, but the acknowledgement is lost: the attempt ends in a timeout.
    world.acceptThenTimeOut = 1;
    const first = await t.send(a.liveKey, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient });
    assert.equal(first.statusCode, 202, first.body);
    const done = await t.waitForStatus(a.liveKey, first.json().id, ['delivered', 'failed'], 30_000);
    assert.equal(done.status, 'delivered', JSON.stringify(done));
    assert.equal(world.acceptThenTimeOut, 0, 'the first attempt was acknowledged to nobody');
    const shown = world.sent.filter((s) => s.jid === jid);
    const again = world.deduplicated.filter((s) => s.jid === jid);
    assert.equal(shown.length, 1, 'the recipient sees one voice note');
    assert.equal(again.length, 1, 'the retry reached WhatsApp under the same id');
    assert.equal(again[0]!.messageId, shown[0]!.messageId);
    assert.match(shown[0]!.messageId, /^3EB0[0-9A-F]{18}$/);
    assert.deepEqual(world.violations, []);

    // Another message to the same chat, same audio: another id, a second note.
    const second = await t.send(a.liveKey, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient });
    assert.equal((await t.waitForStatus(a.liveKey, second.json().id, ['delivered', 'failed'], 30_000)).status, 'delivered');
    const now = world.sent.filter((s) => s.jid === jid);
    assert.equal(now.length, 2);
    assert.notEqual(now[1]!.messageId, now[0]!.messageId);
  });

  it('a send the socket rejects is retried and then delivered', async () => {
    world.failSends = 1;
    const done = await deliver(t, a.liveKey, sessionId, '14155550101');
    assert.equal(done.status, 'delivered', JSON.stringify(done));
    assert.equal(world.failSends, 0);
    assert.ok(world.sent.some((s) => s.jid === '14155550101@s.whatsapp.net'));
  });

  it('a session that changed hands between claim and send: the message is handed back without spending an attempt, and returns within a second', async () => {
    const live = t.app.services.whatsappLive;
    const real = live.acquire;
    let bounces = 0;
    // As if another process had taken the session over just after this worker claimed the message.
    live.acquire = async (id) => {
      if (bounces < 3) {
        bounces += 1;
        return { reason: 'held_elsewhere' };
      }
      return real.call(live, id);
    };
    try {
      // Three turns of the ordinary backoff (about 2 s, 4 s, 8 s, ±20 %) could not fit in this wait.
      const done = await deliver(t, a.liveKey, sessionId, '14155550106', t.voiceUrl, 8_000);
      assert.equal(done.status, 'delivered', JSON.stringify(done));
      assert.equal(bounces, 3);
      assert.equal((await storedMessage(t, done.id)).attempts, 1, 'a hand-back is not an attempt');
    } finally {
      live.acquire = real;
    }
  });

  it('the auth state in the database is sealed: no creds or key material in clear', async () => {
    const { authState, keys } = await authRows(t, sessionId);
    assert.ok(authState, 'creds are stored');
    assert.ok(keys.length >= 2, `signal keys are stored (${keys.length})`);
    assert.ok(keys.some((k) => k.type === 'pre-key') && keys.some((k) => k.type === 'session'));
    for (const sealed of [authState, ...keys.map((k) => k.value)]) {
      assert.match(sealed, /^v1\.[\w-]+\.[\w-]+\.[\w-]+$/, 'a sealed value');
      for (const clear of ['noiseKey', 'signedIdentityKey', 'advSecretKey', 'registrationId', 'private', 'public', 'Buffer', LINKED_PHONE]) {
        assert.ok(!sealed.includes(clear), `"${clear}" visible in the database`);
      }
    }
  });

  it('the connection drops (428) → the service reconnects by itself and keeps delivering', async () => {
    const socketsBefore = world.socketsOf(sessionId).length;
    world.current(sessionId)!.closeWith(428, 'Connection Closed');
    await eventually(() => world.current(sessionId)?.opened, 'a reconnected socket');
    assert.equal(world.socketsOf(sessionId).length, socketsBefore + 1);
    assert.equal((await getSession(t, a.liveKey, sessionId)).json().status, 'connected');
    const done = await deliver(t, a.liveKey, sessionId, '14155550102');
    assert.equal(done.status, 'delivered', JSON.stringify(done));
  });

  it('logged out from the phone (401) → disconnected, creds erased, and POST /send → 422 session_not_connected', async () => {
    const other = await linkedSession(t, world, a.liveKey, '14155550124');
    world.current(other)!.closeWith(401, 'Stream Errored (conflict)');
    const got = await sessionReaches(t, a.liveKey, other, 'disconnected');
    assert.equal(got.phone_number, '14155550124');
    await eventually(async () => {
      const rows = await authRows(t, other);
      return rows.authState === null && rows.keys.length === 0;
    }, 'the creds of a logged-out device to be erased');
    const res = await t.send(a.liveKey, { platform: 'whatsapp', recipient: RECIPIENT, audio_url: t.voiceUrl, session: { session_id: other } });
    const error = assertErrorEnvelope(res, 422, 'session_not_connected');
    assert.equal(error.details?.status, 'disconnected');
    assert.equal(world.socketsOf(other).filter((s) => !s.ended).length, 0, 'no socket left open');
  });

  it('DELETE → the device is logged out, the session and every stored credential are gone, GET → 404', async () => {
    const other = await linkedSession(t, world, a.liveKey, '14155550125');
    assert.ok((await authRows(t, other)).keys.length > 0);
    const res = await deleteSession(t, a.liveKey, other);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { deleted: true });
    assert.ok(world.logouts.some((l) => l.sessionId === other), 'logout was called on the socket');
    const rows = await authRows(t, other);
    assert.equal(rows.authState, undefined, 'no session row');
    assert.deepEqual(rows.keys, [], 'no key rows');
    assertErrorEnvelope(await getSession(t, a.liveKey, other), 404, 'not_found');
    assertErrorEnvelope(await deleteSession(t, a.liveKey, other), 404, 'not_found');
    assert.ok(!(await listSessions(t, a.liveKey)).json().sessions.some((s: { id: string }) => s.id === other));
  });

  it('a message accepted while connected, not yet through when the phone logs the device out → failed session_expired, as every note of a logged-out sender', async () => {
    const other = await linkedSession(t, world, a.liveKey, '14155550126');
    world.failSends = 1_000;
    try {
      const res = await t.send(a.liveKey, { platform: 'whatsapp', recipient: RECIPIENT, audio_url: t.voiceUrl, session: { session_id: other } });
      assert.equal(res.statusCode, 202, res.body);
      await eventually(() => world.failSends < 1_000, 'a first attempt that WhatsApp did not accept');
      world.current(other)!.closeWith(401);
      const done = await t.waitForStatus(a.liveKey, res.json().id, ['delivered', 'failed']);
      assert.equal(done.status, 'failed');
      // The session's sender is known from its connection (its new-chat cap is read then), and the phone's
      // logout expires it: the note fails with what killed it (docs/senders.md), not "not connected".
      assert.equal(done.error.code, 'session_expired');
      assert.equal(done.error.message, 'the device was logged out from the phone');
      assert.equal(done.delivered_at, null);
    } finally {
      world.failSends = 0;
    }
  });
});

describe(`WhatsApp live sessions: no QR code, QR expiry (${STORAGE_LABEL})`, () => {
  const world = new FakeWhatsapp();
  let t: TestApp;
  let a: TestAccount;

  before(async () => {
    t = await liveApp(world, 'A', { whatsappLive: { qrWaitMs: 400, qrValidityMs: 1_000 } });
    a = await t.createAccount();
  });
  after(async () => {
    await t.close();
  });

  it('WhatsApp shows no QR code in time → 502 platform_error in the error envelope, and no session is left', async () => {
    world.qrMode = 'silent';
    try {
      const res = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: a.liveKey });
      const error = assertErrorEnvelope(res, 502, 'platform_error');
      assert.equal(error.details, null);
      assert.deepEqual((await listSessions(t, a.liveKey)).json(), { sessions: [] });
      assert.ok(world.sockets.every((s) => s.ended), 'the socket was closed');
      const rows = await t.app.services.db.kysely.selectFrom('whatsapp_sessions').select('id').execute();
      assert.deepEqual(rows, []);
    } finally {
      world.qrMode = 'show';
    }
  });

  it('WhatsApp cannot be reached at all → 502 platform_error at once', async () => {
    world.qrMode = 'fail';
    try {
      const started = Date.now();
      assertErrorEnvelope(await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: a.liveKey }), 502, 'platform_error');
      assert.ok(Date.now() - started < 400, 'no waiting for the QR deadline when the connection failed');
      assert.deepEqual((await listSessions(t, a.liveKey)).json(), { sessions: [] });
    } finally {
      world.qrMode = 'show';
    }
  });

  it('a pairing code nobody enters in time → qr_expired, creds erased, device never linked', async () => {
    const res = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: a.liveKey, body: { phone_number: '447700900124' } });
    assert.equal(res.statusCode, 201, res.body);
    const id = res.json().session_id;
    await sessionReaches(t, a.liveKey, id, 'qr_expired', 5_000);
    assert.equal(world.logouts.filter((l) => l.sessionId === id).length, 0, 'nothing was linked, so nothing to log out');
    assert.deepEqual(await authRows(t, id), { authState: null, keys: [] });
  });

  it('nobody scans within the QR validity → qr_expired, socket closed, creds erased; sends → 422 session_not_connected', async () => {
    const { session_id } = await createSession(t, a.liveKey);
    assert.equal((await getSession(t, a.liveKey, session_id)).json().status, 'qr_pending');
    const got = await sessionReaches(t, a.liveKey, session_id, 'qr_expired', 5_000);
    assert.equal(got.phone_number, null);
    assert.ok(world.socketsOf(session_id).every((s) => s.ended), 'the socket was closed');
    const rows = await authRows(t, session_id);
    assert.equal(rows.authState, null);
    assert.deepEqual(rows.keys, []);
    const res = await t.send(a.liveKey, { platform: 'whatsapp', recipient: RECIPIENT, audio_url: t.voiceUrl, session: { session_id } });
    assert.equal(assertErrorEnvelope(res, 422, 'session_not_connected').details?.status, 'qr_expired');
  });
});

describe(`WhatsApp live sessions: a connection that cannot be restored (${STORAGE_LABEL})`, () => {
  const world = new FakeWhatsapp();
  let t: TestApp;

  before(async () => {
    t = await liveApp(world, 'A', { whatsappLive: { reconnectAttempts: 3, reconnectMaxDelayMs: 100 } });
  });
  after(async () => {
    await t.close();
  });

  it('WhatsApp stays unreachable through every reconnect → disconnected, creds erased', async () => {
    const { liveKey } = await t.createAccount();
    const id = await linkedSession(t, world, liveKey);
    world.unreachable = true;
    world.current(id)!.closeWith(428, 'Connection Closed');
    const got = await sessionReaches(t, liveKey, id, 'disconnected');
    assert.equal(got.phone_number, LINKED_PHONE);
    assert.equal(world.socketsOf(id).length, 2 + 3, 'the pairing socket, the open one, then three reconnects');
    assert.deepEqual(await authRows(t, id), { authState: null, keys: [] });
    assertErrorEnvelope(
      await t.send(liveKey, { platform: 'whatsapp', recipient: RECIPIENT, audio_url: t.voiceUrl, session: { session_id: id } }),
      422,
      'session_not_connected',
    );
  });
});

describe(`WhatsApp live sessions: restarts and takeover (${STORAGE_LABEL})`, () => {
  it('after a restart the session is restored from the database, without a new QR code, and delivers', async () => {
    const world = new FakeWhatsapp();
    await withRestartableStorage(async (reuse) => {
      const first = await liveApp(world, 'first', { reuse });
      let key: string;
      let id: string;
      try {
        const account = await first.createAccount();
        key = account.liveKey;
        id = await linkedSession(first, world, key);
        assert.equal((await deliver(first, key, id)).status, 'delivered');
      } finally {
        await first.close();
      }
      assert.ok(world.socketsOf(id).every((s) => s.ended), 'closing the app closed the socket');
      assert.equal(world.logouts.length, 0, 'a restart does not unlink the device');

      const second = await liveApp(world, 'second', { reuse });
      try {
        const restored = await eventually(
          () => world.calls.find((c) => c.instance === 'second' && c.sessionId === id && c.socket.opened),
          'the restarted app to reconnect the session',
        );
        assert.equal(restored.paired, true, 'the creds were restored from the database');
        assert.deepEqual(restored.noiseKeyPublic, world.calls.find((c) => c.sessionId === id)!.noiseKeyPublic, 'same device identity');
        assert.equal(restored.socket.qr, undefined, 'no new QR code');
        const got = (await getSession(second, key, id)).json();
        assert.equal(got.status, 'connected');
        assert.equal(got.phone_number, LINKED_PHONE);
        const done = await deliver(second, key, id);
        assert.equal(done.status, 'delivered', JSON.stringify(done));
        const note = world.sent.at(-1)!;
        assert.equal(note.instance, 'second');
        assert.equal(note.hadSignalSession, true, 'the signal keys written before the restart were read back');
        // Every key type Baileys 7 writes came back intact from the database (Buffers as Buffers).
        assert.deepEqual(restored.socket.keysAtOpen, world.baileys7Keys);
        const token = (restored.socket.keysAtOpen.tctoken!['14155550123@s.whatsapp.net'] as { token: unknown }).token;
        assert.ok(Buffer.isBuffer(token), 'tctoken.token is a Buffer again');
        const stored = await authRows(second, id);
        for (const type of ['lid-mapping', 'device-list', 'tctoken']) {
          const rows = stored.keys.filter((k) => k.type === type);
          assert.ok(rows.length > 0, `${type} is stored`);
          for (const row of rows) assert.ok(!row.value.includes('201987654321098') && !row.value.includes('14155550123'), `${type} is sealed at rest`);
        }
      } finally {
        await second.close();
      }
    });
  });

  it('two instances on one storage: when the holder dies without letting go, the other takes the session over and delivers', async () => {
    const world = new FakeWhatsapp();
    await withRestartableStorage(async (reuse) => {
      // Leases of 4 s: with four test files side by side on two cores a holder's renewal can stall past
      // the usual 1.5 s, and the other instance then rightly takes the session before the assertion.
      const one = await liveApp(world, 'one', { reuse, whatsappLive: HOLDING });
      const two = await liveApp(world, 'two', { reuse, whatsappLive: HOLDING });
      try {
        const account = await one.createAccount();
        const id = await linkedSession(one, world, account.liveKey);
        const byOne = watchAcquire(one);
        const byTwo = watchAcquire(two);
        // Accepted by "two", whose worker is woken first; the claim routes it to the holder's worker all the same.
        const first = await deliver(two, account.liveKey, id, '14155550103', two.voiceUrl);
        assert.equal(first.status, 'delivered', JSON.stringify(first));
        assert.equal(world.sent.at(-1)!.instance, 'one', 'the holder delivers');
        assert.deepEqual(byTwo, [], 'the worker of the other instance never took the message');
        assert.deepEqual(byOne, [{ sessionId: id, outcome: 'held' }], 'the holder took it once and sent it');
        assert.deepEqual(await storedMessage(two, first.id), { attempts: 1, affinity: id }, 'delivered at the first attempt');
        assert.equal(world.calls.filter((c) => c.instance === 'two').length, 0, 'the other instance never opened a second socket');

        // "one" dies: its sockets go, its leases are left to run out.
        await one.app.services.whatsappLive.stop({ release: false });
        await one.close();
        await eventually(() => world.calls.find((c) => c.instance === 'two' && c.sessionId === id && c.socket.opened), 'instance two to take over', 10_000);
        const done = await deliver(two, account.liveKey, id, '14155550104');
        assert.equal(done.status, 'delivered', JSON.stringify(done));
        assert.equal(world.sent.at(-1)!.instance, 'two');
        assert.equal((await getSession(two, account.liveKey, id)).json().status, 'connected');
      } finally {
        await one.close();
        await two.close();
      }
    });
  });

  it('two instances, each holding a session, several messages accepted by either: each goes to its session\'s holder, none is bounced', async () => {
    const world = new FakeWhatsapp();
    await withRestartableStorage(async (reuse) => {
      // Leases of 4 s: with four test files side by side on two cores a holder's renewal can stall past
      // the usual 1.5 s, and the other instance then rightly takes the session before the assertion.
      const one = await liveApp(world, 'one', { reuse, whatsappLive: HOLDING });
      const two = await liveApp(world, 'two', { reuse, whatsappLive: HOLDING });
      try {
        const account = await one.createAccount();
        const ofOne = await linkedSession(one, world, account.liveKey, '14155550131');
        const ofTwo = await linkedSession(two, world, account.liveKey, '14155550132');
        const holderOf = new Map([
          [ofOne, 'one'],
          [ofTwo, 'two'],
        ]);
        const seen = new Map([
          ['one', watchAcquire(one)],
          ['two', watchAcquire(two)],
        ]);
        const accepted: Array<{ id: string; sessionId: string; recipient: string }> = [];
        let n = 0;
        for (let round = 0; round < 2; round += 1) {
          for (const api of [one, two]) {
            for (const sessionId of [ofOne, ofTwo]) {
              const recipient = `1415555020${n++}`;
              const res = await api.send(account.liveKey, { platform: 'whatsapp', recipient, audio_url: api.voiceUrl, session: { session_id: sessionId } });
              assert.equal(res.statusCode, 202, res.body);
              accepted.push({ id: res.json().id, sessionId, recipient });
            }
          }
        }
        for (const message of accepted) {
          const done = await one.waitForStatus(account.liveKey, message.id, ['delivered', 'failed']);
          assert.equal(done.status, 'delivered', JSON.stringify(done));
          assert.deepEqual(await storedMessage(one, message.id), { attempts: 1, affinity: message.sessionId }, 'delivered at the first attempt');
          const notes = world.sent.filter((s) => s.jid === `${message.recipient}@s.whatsapp.net`);
          assert.equal(notes.length, 1, `one voice note to ${message.recipient}`);
          assert.equal(notes[0]!.sessionId, message.sessionId);
          assert.equal(notes[0]!.instance, holderOf.get(message.sessionId), 'sent by the holder of its session');
        }
        for (const [instance, acquisitions] of seen) {
          const own = [...holderOf].find(([, holder]) => holder === instance)![0];
          // A message that finds its session sending or in its pacing gap goes back to the queue (not an
          // attempt: `attempts` stays 1 above) and is taken again, by the same holder, at its turn.
          assert.ok(
            acquisitions.every((a) => a.sessionId === own && a.outcome === 'held'),
            `instance ${instance} took only the messages of its own session: ${JSON.stringify(acquisitions)}`,
          );
          assert.ok(acquisitions.length >= accepted.filter((m) => m.sessionId === own).length, `instance ${instance} took each of its session's messages`);
        }
        assert.ok(
          world.calls.every((c) => c.instance === holderOf.get(c.sessionId)),
          'no instance opened a socket for the other\'s session',
        );
      } finally {
        await one.close();
        await two.close();
      }
    });
  });

  it('DELETE of a session nobody holds connects with its stored creds just to log the device out', async () => {
    const world = new FakeWhatsapp();
    await withRestartableStorage(async (reuse) => {
      const first = await liveApp(world, 'first', { reuse });
      let key: string;
      let id: string;
      try {
        key = (await first.createAccount()).liveKey;
        id = await linkedSession(first, world, key);
      } finally {
        await first.close();
      }
      const api = await liveApp(world, 'api', { reuse, worker: false });
      try {
        assert.equal((await getSession(api, key, id)).json().status, 'connected');
        assert.deepEqual((await deleteSession(api, key, id)).json(), { deleted: true });
        assert.deepEqual(await authRows(api, id), { authState: undefined, keys: [] });
        const logout = await eventually(() => world.logouts.find((l) => l.sessionId === id), 'the device to be logged out');
        assert.equal(logout.instance, 'api');
        const call = world.calls.find((c) => c.instance === 'api' && c.sessionId === id)!;
        assert.equal(call.paired, true, 'with the creds that were stored');
        assert.equal(call.socket.qr, undefined);
      } finally {
        await api.close();
      }
    });
  });

  it('an API process without a worker pairs the session, then hands it to a worker process, which delivers', async () => {
    const world = new FakeWhatsapp();
    await withRestartableStorage(async (reuse) => {
      const api = await liveApp(world, 'api', { reuse, worker: false });
      const worker = await liveApp(world, 'worker', { reuse });
      try {
        const account = await api.createAccount();
        const { session_id: id } = await createSession(api, account.liveKey);
        world.scan(id, LINKED_PHONE);
        await sessionReaches(api, account.liveKey, id, 'connected');
        await eventually(() => world.calls.find((c) => c.instance === 'worker' && c.sessionId === id && c.socket.opened), 'the worker to take the session');
        assert.ok(world.calls.filter((c) => c.instance === 'api').every((c) => c.socket.ended), 'the API process let its socket go');
        const done = await deliver(api, account.liveKey, id, '14155550105');
        assert.equal(done.status, 'delivered', JSON.stringify(done));
        assert.equal(world.sent.at(-1)!.instance, 'worker');

        // DELETE answered by the API process, while the worker holds the socket: the worker logs the device out.
        assert.deepEqual((await deleteSession(api, account.liveKey, id)).json(), { deleted: true });
        await eventually(() => world.logouts.find((l) => l.sessionId === id && l.instance === 'worker'), 'the holder to log the device out');
        await eventually(() => world.socketsOf(id).every((s) => s.ended), 'the holder to close its socket');
        // Nothing the holder did while letting go (key writes, creds updates) brought credentials back.
        assert.deepEqual(await authRows(api, id), { authState: undefined, keys: [] });
        const leases = await api.app.services.db.kysely.selectFrom('affinity_leases').selectAll().where('key', '=', id).execute();
        assert.deepEqual(leases, [], 'no process holds the deleted session');
      } finally {
        await api.close();
        await worker.close();
      }
    });
  });
});

/** The copies of sent voice notes a session keeps for resend requests, as stored. */
async function sentRows(t: TestApp, sessionId: string): Promise<Array<{ remote_jid: string; message_id: string; content: string; created_at: number }>> {
  return t.app.services.db.kysely
    .selectFrom('whatsapp_sent_messages')
    .select(['remote_jid', 'message_id', 'content', 'created_at'])
    .where('session_id', '=', sessionId)
    .execute();
}

/** The secret parts of a sent voice note, in every form they could take in a log line or a column. */
function noteSecrets(note: SentVoiceNote): string[] {
  const audio = note.message.audioMessage;
  const forms = (bytes: Buffer) => [bytes.toString('base64'), bytes.toString('base64url'), bytes.toString('hex')];
  return [...forms(audio.mediaKey), ...forms(note.message.messageContextInfo.messageSecret), audio.url, audio.directPath];
}

/** A logger that keeps every line (trace level and up) in memory. */
function capturedLogger(): { logger: ReturnType<typeof createLogger>; text: () => string } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { logger: createLogger('trace', stream), text: () => lines.join('') };
}

const DAY_MS = 86_400_000;

describe(`WhatsApp live sessions: resend requests (${STORAGE_LABEL})`, () => {
  it('a recipient device asks again for a note sent before a worker restart: the process holding the session now answers with that note', async () => {
    const world = new FakeWhatsapp();
    const logs = capturedLogger();
    await withRestartableStorage(async (reuse) => {
      const first = await liveApp(world, 'first', { reuse, logger: logs.logger });
      let key: string;
      let id: string;
      let note: SentVoiceNote;
      try {
        key = (await first.createAccount()).liveKey;
        id = await linkedSession(first, world, key);
        assert.equal((await deliver(first, key, id)).status, 'delivered');
        note = world.sent.at(-1)!;
        assert.equal(note.instance, 'first');
      } finally {
        await first.close();
      }

      const second = await liveApp(world, 'second', { reuse, logger: logs.logger });
      try {
        const socket = (await eventually(
          () => world.calls.find((c) => c.instance === 'second' && c.sessionId === id && c.socket.opened),
          'the restarted app to reconnect the session',
        )).socket;
        // The recipient's phone (device 3) could not decrypt it: a retry receipt naming the chat, as WhatsApp sends it.
        const asked = await socket.askForResend({ remoteJid: `${RECIPIENT}@s.whatsapp.net`, id: note.messageId, participant: `${RECIPIENT}:3@s.whatsapp.net` });
        assert.ok(asked.relayed, 'the resend request was answered');
        assert.deepEqual(asked.relayed, await encodedMessage(note.message), 'with exactly the message sent before the restart');
        const audio = (asked.answer as { audioMessage: Record<string, any> }).audioMessage;
        assert.deepEqual(Buffer.from(audio.mediaKey), note.message.audioMessage.mediaKey, 'the same media key: the uploaded audio, not a new upload');
        assert.equal(audio.url, note.message.audioMessage.url);
        assert.equal(audio.ptt, true);
        assert.equal(audio.seconds, note.content.seconds);
        // A receipt that names the device in the chat jid is the same chat.
        assert.ok((await socket.askForResend({ remoteJid: `${RECIPIENT}:3@s.whatsapp.net`, id: note.messageId })).relayed);

        // Nothing that was not sent by this session to this chat is given out.
        const unknown = await socket.askForResend({ remoteJid: `${RECIPIENT}@s.whatsapp.net`, id: '3EB0000000000000000000' });
        assert.equal(unknown.answer, undefined, 'an unknown message → undefined (Baileys then sends nothing)');
        assert.equal(unknown.relayed, null);
        assert.equal((await socket.askForResend({ remoteJid: '14155550199@s.whatsapp.net', id: note.messageId })).answer, undefined, 'another chat asking for that id');
        assert.equal(await socket.getMessage({ remoteJid: `${RECIPIENT}@s.whatsapp.net`, id: note.messageId, fromMe: false }), undefined, 'not a message of ours');

        // At rest: sealed, one row, keyed by session, chat and message id.
        const rows = await sentRows(second, id);
        assert.deepEqual(rows.map((r) => [r.remote_jid, r.message_id]), [[`${RECIPIENT}@s.whatsapp.net`, note.messageId]]);
        assert.match(rows[0]!.content, /^v1\.[\w-]+\.[\w-]+\.[\w-]+$/, 'a sealed value');
        for (const secret of noteSecrets(note)) {
          assert.ok(!rows[0]!.content.includes(secret), 'no media key, message secret or media URL in clear in the database');
          assert.ok(!logs.text().includes(secret), 'no media key, message secret or media URL in the logs');
        }
        assert.ok(logs.text().includes('resending it'), 'the logs were captured (and say a resend was answered)');
      } finally {
        await second.close();
      }
    });
    assert.deepEqual(world.violations, []);
  });

  describe('one app', () => {
    const world = new FakeWhatsapp();
    let t: TestApp;
    let key: string;

    before(async () => {
      t = await liveApp(world, 'A');
      key = (await t.createAccount()).liveKey;
    });
    after(async () => {
      await t.close();
    });

    it('a chat WhatsApp names by linked identity (@lid) is the phone number it stands for; an unmapped one gets nothing', async () => {
      const id = await linkedSession(t, world, key);
      const recipient = '14155550107';
      world.lids.set(recipient, '201555000000107');
      assert.equal((await deliver(t, key, id, recipient)).status, 'delivered');
      const note = world.sent.at(-1)!;
      const socket = world.current(id)!;
      const asked = await socket.askForResend({ remoteJid: '201555000000107@lid', id: note.messageId, participant: '201555000000107:2@lid' });
      assert.deepEqual(asked.relayed, await encodedMessage(note.message));
      assert.equal((await socket.askForResend({ remoteJid: '201555000000999@lid', id: note.messageId })).answer, undefined);
    });

    it('deleting the session removes what it sent: its socket answers nothing any more', async () => {
      const id = await linkedSession(t, world, key, '14155550127');
      assert.equal((await deliver(t, key, id, '14155550108')).status, 'delivered');
      const note = world.sent.at(-1)!;
      const socket = world.current(id)!;
      assert.ok((await socket.askForResend({ remoteJid: note.jid, id: note.messageId })).relayed, 'answered while the session exists');
      assert.equal((await sentRows(t, id)).length, 1);
      assert.equal((await deleteSession(t, key, id)).statusCode, 200);
      assert.deepEqual(await sentRows(t, id), []);
      const after = await socket.askForResend({ remoteJid: note.jid, id: note.messageId });
      assert.equal(after.answer, undefined);
      assert.equal(after.relayed, null);
    });

    it('a device logged out from the phone: what it sent goes with its credentials', async () => {
      const id = await linkedSession(t, world, key, '14155550128');
      assert.equal((await deliver(t, key, id, '14155550109')).status, 'delivered');
      assert.equal((await sentRows(t, id)).length, 1);
      world.current(id)!.closeWith(401, 'Stream Errored (conflict)');
      await sessionReaches(t, key, id, 'disconnected');
      await eventually(async () => (await sentRows(t, id)).length === 0, 'the sent messages of a logged-out device to be removed');
    });

    it('older than 14 days: not answered, and swept by retention (always, even with MESSAGE_RETENTION_DAYS=0); younger ones stay', async () => {
      const id = await linkedSession(t, world, key, '14155550129');
      assert.equal((await deliver(t, key, id, '14155550110')).status, 'delivered');
      const old = world.sent.at(-1)!;
      assert.equal((await deliver(t, key, id, '14155550111')).status, 'delivered');
      const recent = world.sent.at(-1)!;
      const db = t.app.services.db.kysely;
      await db
        .updateTable('whatsapp_sent_messages')
        .set({ created_at: Date.now() - 14 * DAY_MS - 60_000 })
        .where('session_id', '=', id)
        .where('message_id', '=', old.messageId)
        .execute();
      await db
        .updateTable('whatsapp_sent_messages')
        .set({ created_at: Date.now() - 13 * DAY_MS })
        .where('session_id', '=', id)
        .where('message_id', '=', recent.messageId)
        .execute();
      const socket = world.current(id)!;
      assert.equal((await socket.askForResend({ remoteJid: old.jid, id: old.messageId })).answer, undefined, 'too old to be given out, even before the sweep');
      assert.ok((await socket.askForResend({ remoteJid: recent.jid, id: recent.messageId })).relayed, '13 days old: answered');

      // The worker's housekeeping sweeps it whatever the message retention is (0 keeps messages for ever).
      const retention = startRetention(db, 0, createLogger('silent'), { firstRunMs: 0 });
      try {
        await eventually(async () => !(await sentRows(t, id)).some((r) => r.message_id === old.messageId), 'the 14-day sweep');
      } finally {
        await retention.stop();
      }
      assert.deepEqual((await sentRows(t, id)).map((r) => r.message_id), [recent.messageId]);
      assert.equal(await purgeOldWhatsappSentMessages(db), 0, 'nothing older left');
      assert.equal(await purgeOldWhatsappSentMessages(db, { now: Date.now() + 2 * DAY_MS, batchSize: 1 }), 1, 'in batches, when its day comes');
      assert.deepEqual(await sentRows(t, id), []);
    });
  });
});
