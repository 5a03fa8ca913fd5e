import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import {
  closeSharedAudio,
  defaultSendBody,
  LINKEDIN_SESSION,
  STORAGE_LABEL,
  startTestApp,
  TELEGRAM_TOKEN,
  type InjectResult,
  type TestAccount,
  type TestApp,
  assertErrorEnvelope,
} from './fixtures/app-harness.js';

/**
 * POST /send and GET /status/:id through HTTP: the 202 body, every validation answer in the
 * documented error envelope, and who may see which message. The worker is off here: what matters is
 * what the API accepts and refuses (delivery has test/delivery.test.ts).
 */

const MESSAGE_ID = /^msg_[0-9A-Za-z]{24}$/;
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const SENT_FIELDS = ['created_at', 'id', 'platform', 'recipient', 'status'];
const STATUS_FIELDS = ['created_at', 'delivered_at', 'error', 'id', 'platform', 'recipient', 'status'];

/** Asserts the documented error envelope, its status and code, and (when given) details.field. */
function assertError(res: InjectResult, status: number, code: string, field?: string | null): Record<string, any> {
  const error = assertErrorEnvelope(res, status, code);
  if (field !== undefined) {
    if (field === null) assert.ok(error.details === null || error.details.field === undefined, res.body);
    else assert.equal(error.details?.field, field, res.body);
  }
  return error;
}

function assertAccepted(res: InjectResult, expected: { platform: string; recipient: string }): Record<string, any> {
  assert.equal(res.statusCode, 202, res.body);
  const body = res.json();
  assert.deepEqual(Object.keys(body).sort(), SENT_FIELDS);
  assert.match(body.id, MESSAGE_ID);
  assert.equal(body.status, 'queued');
  assert.equal(body.platform, expected.platform);
  assert.equal(body.recipient, expected.recipient);
  assert.match(body.created_at, ISO_UTC);
  assert.ok(Math.abs(Date.parse(body.created_at) - Date.now()) < 60_000, `created_at ${body.created_at} is not now`);
  return body;
}

after(async () => {
  await closeSharedAudio();
});

describe(`POST /send and GET /status (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  let other: TestAccount;
  /** A connected sandbox WhatsApp session of `account` (test env). */
  let connectedSession: string;
  /** A sandbox WhatsApp session of `account` still waiting for its QR scan. */
  let pendingSession: string;

  const body = (platform: string, overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
    ...defaultSendBody(platform, t.voiceUrl, connectedSession),
    ...overrides,
  });

  async function createSession(key: string): Promise<string> {
    const res = await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key });
    assert.equal(res.statusCode, 201, res.body);
    const created = res.json();
    assert.equal(created.status, 'qr_pending');
    return created.session_id as string;
  }

  before(async () => {
    // No worker: messages stay queued. No auto-scan: a new WhatsApp session stays qr_pending until told.
    t = await startTestApp({ worker: false, env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    account = await t.createAccount({ rateLimit: 10_000, quota: 10_000 });
    other = await t.createAccount({ rateLimit: 10_000, quota: 10_000 });
    connectedSession = await createSession(account.testKey);
    const scanned = await t.request({ method: 'POST', url: `/api/v1/whatsapp/sessions/${connectedSession}/simulate`, key: account.testKey, body: { event: 'scan' } });
    assert.equal(scanned.statusCode, 200, scanned.body);
    assert.equal(scanned.json().status, 'connected');
    pendingSession = await createSession(account.testKey);
  });

  after(async () => {
    await t?.close();
  });

  describe('accepting', () => {
    for (const platform of ['telegram', 'linkedin', 'whatsapp']) {
      it(`answers 202 with exactly id, status queued, platform, recipient, created_at (${platform})`, async () => {
        const sent = body(platform);
        const res = await t.send(account.testKey, sent);
        assertAccepted(res, { platform, recipient: sent.recipient as string });
        assert.match(String(res.headers['content-type']), /^application\/json/);
      });
    }

    it('gives every message its own id and echoes the recipient exactly as given', async () => {
      const ids = new Set<string>();
      for (const recipient of ['-1001234567890', '@my_channel_name', '42']) {
        const res = await t.send(account.testKey, body('telegram', { recipient }));
        ids.add(assertAccepted(res, { platform: 'telegram', recipient }).id);
      }
      assert.equal(ids.size, 3);
    });

    it('accepts the optional duration and caption where they apply', async () => {
      assertAccepted(await t.send(account.testKey, body('telegram', { caption: 'hello', duration: 12.5 })), { platform: 'telegram', recipient: '123456789' });
      assertAccepted(await t.send(account.testKey, body('telegram', { caption: 'c'.repeat(1024) })), { platform: 'telegram', recipient: '123456789' });
      assertAccepted(await t.send(account.testKey, body('linkedin', { duration: 60 })), { platform: 'linkedin', recipient: 'jane-smith-a1b2c3' });
      // No maximum of its own on telegram or whatsapp.
      assertAccepted(await t.send(account.testKey, body('telegram', { duration: 600 })), { platform: 'telegram', recipient: '123456789' });
      assertAccepted(await t.send(account.testKey, body('whatsapp', { duration: 61 })), { platform: 'whatsapp', recipient: '14155550100' });
    });

    it('reads null for duration or caption as "not given", on every platform', async () => {
      assertAccepted(await t.send(account.testKey, body('telegram', { caption: null, duration: null })), { platform: 'telegram', recipient: '123456789' });
      assertAccepted(await t.send(account.testKey, body('linkedin', { caption: null, duration: null })), { platform: 'linkedin', recipient: 'jane-smith-a1b2c3' });
      assertAccepted(await t.send(account.testKey, body('whatsapp', { caption: null })), { platform: 'whatsapp', recipient: '14155550100' });
    });

    it('accepts an audio_url of exactly 2,048 characters', async () => {
      const base = `${t.voiceUrl}?pad=`;
      const url = base + 'a'.repeat(2048 - base.length);
      assert.equal(url.length, 2048);
      assertAccepted(await t.send(account.testKey, body('telegram', { audio_url: url })), { platform: 'telegram', recipient: '123456789' });
    });

    it('refuses fields it does not know (a typo must not pass silently): 400 invalid_request naming the first one', async () => {
      const res = await t.send(account.testKey, body('telegram', { priority: 'high', metadata: { a: 1 } }));
      assert.equal(assertError(res, 400, 'invalid_request').details.field, 'priority');
    });
  });

  describe('malformed requests (400, 413, 415)', () => {
    it('answers malformed JSON with 400 invalid_request', async () => {
      for (const payload of ['{"platform": "telegram",', '{platform: telegram}', 'not json at all']) {
        const res = await t.request({ method: 'POST', url: '/api/v1/send', key: account.testKey, payload, headers: { 'content-type': 'application/json' } });
        assertError(res, 400, 'invalid_request');
      }
    });

    it('answers a JSON body that is not an object with 400 invalid_request', async () => {
      for (const value of [[1, 2], 'telegram', 42, null]) {
        const res = await t.request({ method: 'POST', url: '/api/v1/send', key: account.testKey, payload: JSON.stringify(value), headers: { 'content-type': 'application/json' } });
        assertError(res, 400, 'invalid_request');
      }
    });

    it('answers an empty body with 400 invalid_request', async () => {
      const res = await t.request({ method: 'POST', url: '/api/v1/send', key: account.testKey, payload: '', headers: { 'content-type': 'application/json' } });
      assertError(res, 400, 'invalid_request');
    });

    for (const field of ['platform', 'recipient', 'audio_url', 'session']) {
      it(`answers a missing ${field} with 400 invalid_request naming it`, async () => {
        const sent = body('telegram');
        delete sent[field];
        assertError(await t.send(account.testKey, sent), 400, 'invalid_request', field);
      });
    }

    const mistyped: Array<[string, unknown]> = [
      ['platform', 7],
      ['recipient', 123456789],
      ['audio_url', { href: 'https://example.com/a.ogg' }],
      ['session', TELEGRAM_TOKEN],
      ['session', null],
      ['session', [TELEGRAM_TOKEN]],
      ['duration', '12'],
      ['caption', 5],
    ];
    for (const [field, value] of mistyped) {
      it(`answers ${field} = ${JSON.stringify(value)} with 400 invalid_request naming ${field}`, async () => {
        assertError(await t.send(account.testKey, body('telegram', { [field]: value })), 400, 'invalid_request', field);
      });
    }

    it('answers a body over 64 KiB with 413 payload_too_large, however valid it is otherwise', async () => {
      const sent = body('telegram', { caption: 'x'.repeat(65 * 1024) });
      assert.ok(JSON.stringify(sent).length > 64 * 1024);
      assertError(await t.send(account.testKey, sent), 413, 'payload_too_large');
    });

    it('answers a body that is not JSON with 415 unsupported_media_type', async () => {
      const valid = JSON.stringify(body('telegram'));
      for (const contentType of ['text/plain', 'text/plain; charset=utf-8', 'application/x-www-form-urlencoded', 'application/xml', 'multipart/form-data; boundary=x']) {
        const res = await t.request({ method: 'POST', url: '/api/v1/send', key: account.testKey, payload: valid, headers: { 'content-type': contentType } });
        assertError(res, 415, 'unsupported_media_type');
      }
    });

    it('takes application/json with a charset parameter', async () => {
      const res = await t.request({
        method: 'POST',
        url: '/api/v1/send',
        key: account.testKey,
        payload: JSON.stringify(body('telegram')),
        headers: { 'content-type': 'application/json; charset=utf-8' },
      });
      assertAccepted(res, { platform: 'telegram', recipient: '123456789' });
    });
  });

  describe('invalid values (422)', () => {
    it('answers an unknown platform as a mistyped field: 400 invalid_request naming platform, listing the platforms', async () => {
      for (const platform of ['signal', 'Telegram', '', 'sms', 'loopback']) {
        const error = assertError(await t.send(account.testKey, { ...body('telegram'), platform }), 400, 'invalid_request', 'platform');
        assert.match(error.message, /linkedin, telegram, whatsapp/);
      }
    });

    const recipients: Record<string, { good: string[]; bad: string[] }> = {
      whatsapp: {
        good: ['14155550100', '1234567', '123456789012345'],
        bad: ['+14155550100', '123456', '1234567890123456', '1415555010a', '1 415 555 0100', '', '@14155550100'],
      },
      telegram: {
        good: ['123456789', '-1001234567890', '@my_channel', '@Channel_Name_2024'],
        bad: ['my_channel', '@abc', '@1channel', '12.5', '+123456', '', '@bad-name', 'https://t.me/my_channel'],
      },
      linkedin: {
        good: ['jane-smith-a1b2c3', 'https://www.linkedin.com/in/jane-smith-a1b2c3/', 'https://linkedin.com/in/jane-smith-a1b2c3', 'urn:li:fsd_profile:ACoAAB1234xyz'],
        bad: ['jane smith', 'ab', 'https://example.com/in/jane-smith', 'https://www.linkedin.com/company/acme', 'urn:li:member:123', '', 'jane/smith'],
      },
    };
    for (const [platform, { good, bad }] of Object.entries(recipients)) {
      it(`takes ${platform} recipients in the documented formats`, async () => {
        for (const recipient of good) {
          assertAccepted(await t.send(account.testKey, body(platform, { recipient })), { platform, recipient });
        }
      });
      it(`refuses malformed ${platform} recipients with 422 naming recipient`, async () => {
        for (const recipient of bad) {
          assertError(await t.send(account.testKey, body(platform, { recipient })), 422, 'invalid_parameter', 'recipient');
        }
      });
    }

    it('checks the telegram bot_token (session.bot_token)', async () => {
      for (const session of [{}, { bot_token: '' }, { bot_token: 'not-a-token' }, { bot_token: '123456789:short' }, { bot_token: 'abc:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ' }, { li_at: 'x', csrf_token: 'ajax:1' }]) {
        assertError(await t.send(account.testKey, body('telegram', { session })), 422, 'invalid_parameter', 'session.bot_token');
      }
    });

    it('checks the linkedin li_at and csrf_token (session.li_at, session.csrf_token)', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ csrf_token: LINKEDIN_SESSION.csrf_token }, 'session.li_at'],
        [{ li_at: '', csrf_token: LINKEDIN_SESSION.csrf_token }, 'session.li_at'],
        [{ li_at: 'has space', csrf_token: LINKEDIN_SESSION.csrf_token }, 'session.li_at'],
        [{ li_at: 'a;b=c', csrf_token: LINKEDIN_SESSION.csrf_token }, 'session.li_at'],
        [{ li_at: LINKEDIN_SESSION.li_at }, 'session.csrf_token'],
        [{ li_at: LINKEDIN_SESSION.li_at, csrf_token: '1234567890' }, 'session.csrf_token'],
        [{ li_at: LINKEDIN_SESSION.li_at, csrf_token: 'ajax:' }, 'session.csrf_token'],
        [{ li_at: LINKEDIN_SESSION.li_at, csrf_token: '"ajax:123"' }, 'session.csrf_token'],
      ];
      for (const [session, field] of cases) {
        assertError(await t.send(account.testKey, body('linkedin', { session })), 422, 'invalid_parameter', field);
      }
    });

    it('checks the whatsapp session_id format (session.session_id)', async () => {
      for (const session of [{}, { session_id: '' }, { session_id: 'abc' }, { session_id: 'ws_short' }, { session_id: connectedSession.replace('ws_', 'wx_') }]) {
        assertError(await t.send(account.testKey, body('whatsapp', { session })), 422, 'invalid_parameter', 'session.session_id');
      }
    });

    it('refuses a whatsapp session that does not exist for this account and environment (422 invalid_parameter)', async () => {
      const unknown = `ws_${'A'.repeat(24)}`;
      assertError(await t.send(account.testKey, body('whatsapp', { session: { session_id: unknown } })), 422, 'invalid_parameter', 'session.session_id');
      // Another account's connected session is not this account's to use.
      assertError(await t.send(other.testKey, body('whatsapp')), 422, 'invalid_parameter', 'session.session_id');
      // Nor is a sandbox session usable with the same account's live key.
      assertError(await t.send(account.liveKey, body('whatsapp')), 422, 'invalid_parameter', 'session.session_id');
    });

    it('refuses a whatsapp session that exists but is not connected (422 session_not_connected)', async () => {
      const error = assertError(
        await t.send(account.testKey, body('whatsapp', { session: { session_id: pendingSession } })),
        422,
        'session_not_connected',
        'session.session_id',
      );
      assert.match(error.message, /qr_pending/);

      // Once scanned, the same request is accepted.
      const session = await createSession(account.testKey);
      assertError(await t.send(account.testKey, body('whatsapp', { session: { session_id: session } })), 422, 'session_not_connected');
      const scanned = await t.request({ method: 'POST', url: `/api/v1/whatsapp/sessions/${session}/simulate`, key: account.testKey, body: { event: 'scan' } });
      assert.equal(scanned.statusCode, 200, scanned.body);
      assertAccepted(await t.send(account.testKey, body('whatsapp', { session: { session_id: session } })), { platform: 'whatsapp', recipient: '14155550100' });

      // A disconnected one is refused again.
      const gone = await t.request({ method: 'POST', url: `/api/v1/whatsapp/sessions/${session}/simulate`, key: account.testKey, body: { event: 'disconnect' } });
      assert.equal(gone.statusCode, 200, gone.body);
      assertError(await t.send(account.testKey, body('whatsapp', { session: { session_id: session } })), 422, 'session_not_connected', 'session.session_id');
    });

    it('refuses an audio_url that is not http(s), not a URL, or longer than 2,048 characters (audio_url)', async () => {
      const tooLong = `${t.voiceUrl}?pad=${'a'.repeat(2048)}`;
      for (const audio_url of ['ftp://example.com/a.ogg', 'file:///etc/passwd', 'data:audio/ogg;base64,AAAA', 'javascript:alert(1)', 'example.com/a.ogg', 'not a url', '', tooLong]) {
        assertError(await t.send(account.testKey, body('telegram', { audio_url })), 422, 'invalid_parameter', 'audio_url');
      }
    });

    it('refuses a caption on any platform but telegram, and one over 1,024 characters (caption)', async () => {
      assertError(await t.send(account.testKey, body('whatsapp', { caption: 'hi' })), 422, 'invalid_parameter', 'caption');
      assertError(await t.send(account.testKey, body('linkedin', { caption: 'hi' })), 422, 'invalid_parameter', 'caption');
      assertError(await t.send(account.testKey, body('telegram', { caption: 'c'.repeat(1025) })), 422, 'invalid_parameter', 'caption');
    });

    it('refuses a duration over 60 s on linkedin, and one that is not positive anywhere (duration)', async () => {
      assertError(await t.send(account.testKey, body('linkedin', { duration: 61 })), 422, 'invalid_parameter', 'duration');
      assertError(await t.send(account.testKey, body('linkedin', { duration: 60.5 })), 422, 'invalid_parameter', 'duration');
      assertError(await t.send(account.testKey, body('telegram', { duration: 0 })), 422, 'invalid_parameter', 'duration');
      assertError(await t.send(account.testKey, body('whatsapp', { duration: -3 })), 422, 'invalid_parameter', 'duration');
    });

    it('counts only accepted sends against the quota', async () => {
      const usage = async () => (await t.request({ method: 'GET', url: '/api/v1/usage', key: other.testKey })).json().usage.total_sent as number;
      const before = await usage();
      assertError(await t.send(other.testKey, body('telegram', { recipient: 'nope' })), 422, 'invalid_parameter', 'recipient');
      assertError(await t.send(other.testKey, body('telegram', { duration: 'x' })), 400, 'invalid_request', 'duration');
      assert.equal(await usage(), before);
      assertAccepted(await t.send(other.testKey, body('telegram')), { platform: 'telegram', recipient: '123456789' });
      assert.equal(await usage(), before + 1);
    });
  });

  describe('GET /status/:id', () => {
    it('shows a queued message with exactly the seven fields', async () => {
      const sent = assertAccepted(await t.send(account.testKey, body('linkedin')), { platform: 'linkedin', recipient: 'jane-smith-a1b2c3' });
      const res = await t.request({ method: 'GET', url: `/api/v1/status/${sent.id}`, key: account.testKey });
      assert.equal(res.statusCode, 200, res.body);
      const status = res.json();
      assert.deepEqual(Object.keys(status).sort(), STATUS_FIELDS);
      assert.deepEqual(status, { ...sent, delivered_at: null, error: null });
    });

    it('answers 404 not_found for an unknown id', async () => {
      for (const id of ['msg_000000000000000000000000', 'msg_nope', 'nothing']) {
        assertError(await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: account.testKey }), 404, 'not_found');
      }
    });

    it("answers 404 not_found for another account's message, as for an unknown one", async () => {
      const sent = assertAccepted(await t.send(account.testKey, body('telegram')), { platform: 'telegram', recipient: '123456789' });
      const theirs = await t.request({ method: 'GET', url: `/api/v1/status/${sent.id}`, key: other.testKey });
      const unknown = await t.request({ method: 'GET', url: `/api/v1/status/msg_${'0'.repeat(24)}`, key: other.testKey });
      assertError(theirs, 404, 'not_found');
      assertError(unknown, 404, 'not_found');
      assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${sent.id}`, key: other.liveKey })).statusCode, 404);
    });

    it("answers 404 not_found for the account's own message seen with the other environment's key", async () => {
      const testMessage = assertAccepted(await t.send(account.testKey, body('telegram')), { platform: 'telegram', recipient: '123456789' });
      const liveMessage = assertAccepted(await t.send(account.liveKey, body('telegram')), { platform: 'telegram', recipient: '123456789' });
      assertError(await t.request({ method: 'GET', url: `/api/v1/status/${testMessage.id}`, key: account.liveKey }), 404, 'not_found');
      assertError(await t.request({ method: 'GET', url: `/api/v1/status/${liveMessage.id}`, key: account.testKey }), 404, 'not_found');
      // Each is visible with its own environment's key.
      assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${testMessage.id}`, key: account.testKey })).statusCode, 200);
      assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${liveMessage.id}`, key: account.liveKey })).statusCode, 200);
    });

    it('answers 401 without a valid key, before looking anything up', async () => {
      const sent = assertAccepted(await t.send(account.testKey, body('telegram')), { platform: 'telegram', recipient: '123456789' });
      const res = await t.request({ method: 'GET', url: `/api/v1/status/${sent.id}` });
      assertError(res, 401, 'unauthorized');
      assert.equal(res.headers['www-authenticate'], 'Bearer');
      assertError(await t.request({ method: 'GET', url: `/api/v1/status/${sent.id}`, key: `sk_test_${'x'.repeat(32)}` }), 401, 'unauthorized');
    });
  });
});

describe(`POST /send with private audio URLs refused (AUDIO_ALLOW_PRIVATE_URLS=false, ${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;

  before(async () => {
    t = await startTestApp({ worker: false, env: { AUDIO_ALLOW_PRIVATE_URLS: 'false' } });
    account = await t.createAccount({ rateLimit: 10_000, quota: 10_000 });
  });

  after(async () => {
    await t?.close();
  });

  it('refuses literal loopback, private, link-local and local-name audio URLs with 422 naming audio_url', async () => {
    const urls = [
      'http://127.0.0.1/voice.ogg',
      'http://127.0.0.1:8080/voice.ogg',
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.7/a.ogg',
      'http://192.168.1.1/a.ogg',
      'http://[::1]/a.ogg',
      'http://[::ffff:127.0.0.1]/a.ogg',
      'http://0.0.0.0/a.ogg',
      'http://2130706433/a.ogg',
      'http://localhost/a.ogg',
      t.voiceUrl,
    ];
    for (const audio_url of urls) {
      const res = await t.send(account.testKey, { ...defaultSendBody('telegram', audio_url) });
      assertError(res, 422, 'invalid_parameter', 'audio_url');
    }
  });

  it('still accepts a public audio URL', async () => {
    const res = await t.send(account.testKey, defaultSendBody('telegram', 'https://example.com/voice.ogg'));
    assertAccepted(res, { platform: 'telegram', recipient: '123456789' });
  });
});
