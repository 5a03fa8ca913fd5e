import assert from 'node:assert/strict';
import type { LookupFunction } from 'node:net';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeAll } from './fixtures/close-all.js';
import { Webhook } from 'standardwebhooks';
import { RETRY_DELAYS_MS, retryDelayAfter } from '../src/webhooks/sender.js';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from './fakes/webhook-receiver.js';
import {
  assertErrorEnvelope,
  closeSharedAudio,
  connectedSandboxSession,
  defaultSendBody,
  STORAGE_LABEL,
  startTestApp,
  withRestartableStorage,
  type TestAccount,
  type TestApp,
} from './fixtures/app-harness.js';

/**
 * Webhooks as a receiver sees them: signed per Standard Webhooks (checked with the `standardwebhooks`
 * package), in the shape of the status or session lookup, retried on the schedule, kept in an outbox
 * that outlives the process, and never sent to an address audio URLs may not use.
 */

const FAST_RETRIES = { retryDelaysMs: [20, 20, 20, 20, 20], pollMs: 100 };
const FAST_POLL = { pollMs: 100 };
const ENDPOINTS = '/api/v1/webhook_endpoints';

after(async () => {
  await closeSharedAudio();
});

async function createEndpoint(t: TestApp, key: string, body: Record<string, unknown>): Promise<{ id: string; secret: string }> {
  const res = await t.request({ method: 'POST', url: ENDPOINTS, key, body });
  assert.equal(res.statusCode, 201, res.body);
  return res.json();
}

function verified(secret: string, hook: ReceivedWebhook): any {
  return new Webhook(secret).verify(hook.body, hook.headers as Record<string, string>);
}

async function deliveries(t: TestApp, key: string, endpointId: string): Promise<any[]> {
  const res = await t.request({ method: 'GET', url: `${ENDPOINTS}/${endpointId}/deliveries`, key });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().data;
}

async function waitForDelivery(t: TestApp, key: string, endpointId: string, status: string, timeoutMs = 20_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const list = await deliveries(t, key, endpointId);
    const found = list.find((d) => d.status === status);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no ${status} delivery: ${JSON.stringify(list)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe(`webhook endpoints API (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  let other: TestAccount;

  before(async () => {
    t = await startTestApp({ worker: false });
    account = await t.createAccount();
    other = await t.createAccount();
  });
  after(async () => t.close());

  it('creates an endpoint with a whsec_ secret shown once, lists it per key environment, deletes it', async () => {
    const created = await t.request({ method: 'POST', url: ENDPOINTS, key: account.testKey, body: { url: 'https://hooks.example.com/voice', description: 'orders' } });
    assert.equal(created.statusCode, 201, created.body);
    const endpoint = created.json();
    assert.match(endpoint.id, /^we_[0-9A-Za-z]{24}$/);
    assert.match(endpoint.secret, /^whsec_[A-Za-z0-9+/]{32}$/);
    assert.equal(endpoint.url, 'https://hooks.example.com/voice');
    assert.deepEqual(endpoint.events, ['voice_note.delivered', 'voice_note.failed', 'voice_note.canceled', 'voice_note.read', 'voice_note.played', 'voice_note.replied', 'whatsapp_session.updated', 'sender.updated', 'telegram_session.updated', 'recipient.opted_out']);

    const listed = await t.request({ method: 'GET', url: ENDPOINTS, key: account.testKey });
    assert.equal(listed.statusCode, 200);
    assert.equal(listed.json().has_more, false);
    assert.deepEqual(listed.json().data.map((e: any) => e.id), [endpoint.id]);
    assert.equal(listed.json().data[0].secret, undefined, 'the secret is shown only at creation');
    const stored = await t.app.services.db.kysely.selectFrom('webhook_endpoints').select('secret').where('id', '=', endpoint.id).executeTakeFirstOrThrow();
    assert.ok(!stored.secret.includes(endpoint.secret.slice(6)), 'the secret is sealed at rest');

    // Another environment or account: it does not exist there.
    assert.deepEqual((await t.request({ method: 'GET', url: ENDPOINTS, key: account.liveKey })).json().data, []);
    assertErrorEnvelope(await t.request({ method: 'GET', url: `${ENDPOINTS}/${endpoint.id}`, key: account.liveKey }), 404, 'not_found');
    assertErrorEnvelope(await t.request({ method: 'DELETE', url: `${ENDPOINTS}/${endpoint.id}`, key: other.testKey }), 404, 'not_found');

    const deleted = await t.request({ method: 'DELETE', url: `${ENDPOINTS}/${endpoint.id}`, key: account.testKey });
    assert.equal(deleted.statusCode, 200, deleted.body);
    assert.deepEqual(deleted.json(), { id: endpoint.id, deleted: true });
    assertErrorEnvelope(await t.request({ method: 'DELETE', url: `${ENDPOINTS}/${endpoint.id}`, key: account.testKey }), 404, 'not_found');
  });

  it('answers every mistake in the error envelope', async () => {
    const key = account.testKey;
    assert.equal(assertErrorEnvelope(await t.request({ method: 'POST', url: ENDPOINTS, key, body: {} }), 400, 'invalid_request').details.field, 'url');
    assertErrorEnvelope(await t.request({ method: 'POST', url: ENDPOINTS, key, payload: '{"url":', headers: { 'content-type': 'application/json' } }), 400, 'invalid_request');
    assertErrorEnvelope(await t.request({ method: 'POST', url: ENDPOINTS, key, payload: 'url=x', headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type');
    assert.equal(assertErrorEnvelope(await t.request({ method: 'POST', url: ENDPOINTS, key, body: { url: 'ftp://example.com/x' } }), 422, 'invalid_parameter').details.field, 'url');
    assert.equal(assertErrorEnvelope(await t.request({ method: 'POST', url: ENDPOINTS, key, body: { url: 'not a url' } }), 422, 'invalid_parameter').details.field, 'url');
    assert.equal(
      assertErrorEnvelope(await t.request({ method: 'POST', url: ENDPOINTS, key, body: { url: 'https://example.com/', events: ['voice_note.sent'] } }), 422, 'invalid_parameter').details.field,
      'events',
    );
    assertErrorEnvelope(await t.request({ method: 'POST', url: ENDPOINTS, key, body: { url: 'https://example.com/', events: [] } }), 422, 'invalid_parameter');
    assertErrorEnvelope(await t.request({ method: 'POST', url: ENDPOINTS, key, body: { url: 'https://example.com/', events: 'voice_note.failed' } }), 400, 'invalid_request');
    assertErrorEnvelope(await t.request({ method: 'POST', url: ENDPOINTS, body: { url: 'https://example.com/' } }), 401, 'unauthorized');
    assertErrorEnvelope(await t.request({ method: 'POST', url: `${ENDPOINTS}/we_nope/roll_secret`, key }), 404, 'not_found');
    assertErrorEnvelope(await t.request({ method: 'POST', url: `${ENDPOINTS}/we_nope/test`, key }), 404, 'not_found');
    assertErrorEnvelope(await t.request({ method: 'GET', url: `${ENDPOINTS}/we_nope/deliveries`, key }), 404, 'not_found');
    const { id } = await createEndpoint(t, key, { url: 'https://example.com/' });
    assert.equal(assertErrorEnvelope(await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/test`, key, body: { type: 'nope' } }), 422, 'invalid_parameter').details.field, 'type');
    assert.equal(assertErrorEnvelope(await t.request({ method: 'GET', url: `${ENDPOINTS}/${id}/deliveries?limit=0`, key }), 422, 'invalid_parameter').details.field, 'limit');
    assertErrorEnvelope(await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/deliveries/whd_nope/resend`, key }), 404, 'not_found');
    const rolled = await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/roll_secret`, key, body: { previous_secret_expires_in: -1 } });
    assertErrorEnvelope(rolled, 422, 'invalid_parameter');
  });

  it('draws from the 1,000-per-minute bucket of the non-send endpoints', async () => {
    const res = await t.request({ method: 'GET', url: ENDPOINTS, key: account.testKey });
    assert.equal(res.headers['x-ratelimit-limit'], '1000');
  });

  it('is documented in the OpenAPI document', async () => {
    const doc = (await t.request({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    for (const path of ['/api/v1/webhook_endpoints', '/api/v1/webhook_endpoints/{endpoint_id}', '/api/v1/messages', '/api/v1/messages/{message_id}']) {
      assert.ok(doc.paths[path], `${path} is in the OpenAPI document`);
    }
  });
});

describe(`webhook URLs pass the audio URL address checks (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  let receiver: WebhookReceiver;
  // A public-looking name that resolves to loopback: only the check on the resolved address can stop it.
  const toLoopback: LookupFunction = (_hostname, options, callback) => {
    if ((options as { all?: boolean }).all) (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: '127.0.0.1', family: 4 }]);
    else callback(null, '127.0.0.1', 4);
  };

  before(async () => {
    receiver = await startWebhookReceiver();
    t = await startTestApp({ worker: false, env: { AUDIO_ALLOW_PRIVATE_URLS: 'false' }, webhooks: { ...FAST_RETRIES, lookup: toLoopback } });
    account = await t.createAccount();
  });
  after(() => closeAll(t, receiver));

  it('refuses loopback, private, link-local and local-name URLs at creation', async () => {
    for (const url of ['http://127.0.0.1:8080/hook', 'http://10.0.0.7/hook', 'http://169.254.169.254/latest', 'http://[::1]/hook', 'http://[::ffff:127.0.0.1]/x', 'http://localhost/hook', 'http://0x7f.1/hook']) {
      const error = assertErrorEnvelope(await t.request({ method: 'POST', url: ENDPOINTS, key: account.testKey, body: { url } }), 422, 'invalid_parameter');
      assert.equal(error.details.field, 'url', url);
      assert.match(error.message, /set ALLOW_PRIVATE_URLS=true/, 'names the switch, as the audio URL refusal does');
    }
  });

  it('refuses to send to a name that resolves to a private address, and records why', async () => {
    const { id } = await createEndpoint(t, account.testKey, { url: `http://hooks.example.test:${receiver.port}/hook` });
    assert.equal((await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/test`, key: account.testKey })).statusCode, 202);
    const failed = await waitForDelivery(t, account.testKey, id, 'failed');
    assert.equal(failed.answers.length, 6, 'retried like any failure');
    assert.equal(failed.answers[0].status_code, null);
    assert.match(failed.answers[0].error, /refused/);
    assert.equal(receiver.received.length, 0, 'nothing reached the loopback receiver');
  });
});

describe(`webhook deliveries (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  let receiver: WebhookReceiver;

  before(async () => {
    receiver = await startWebhookReceiver();
    t = await startTestApp({ webhooks: { ...FAST_RETRIES, timeoutMs: 400 } });
    account = await t.createAccount();
  });
  after(() => closeAll(t, receiver));

  it('sends voice_note.delivered and voice_note.failed, signed, with the status lookup as data', async () => {
    receiver.received.length = 0;
    const { id: endpointId, secret } = await createEndpoint(t, account.testKey, { url: receiver.url(), events: ['voice_note.delivered', 'voice_note.failed'] });
    const ok = (await t.send(account.testKey, defaultSendBody('telegram', t.voiceUrl))).json().id;
    const bad = (await t.send(account.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '10000000002' })).json().id;
    const okStatus = await t.waitForStatus(account.testKey, ok, ['delivered']);
    const badStatus = await t.waitForStatus(account.testKey, bad, ['failed']);

    const [delivered] = await receiver.waitFor(1, 'voice_note.delivered');
    const [failed] = await receiver.waitFor(1, 'voice_note.failed');
    for (const [hook, status, type] of [[delivered!, okStatus, 'voice_note.delivered'], [failed!, badStatus, 'voice_note.failed']] as const) {
      const payload = verified(secret, hook);
      assert.deepEqual(Object.keys(payload), ['type', 'timestamp', 'data']);
      assert.equal(payload.type, type);
      assert.deepEqual(payload.data, status);
      assert.match(String(hook.headers['webhook-id']), /^evt_/);
      assert.match(String(hook.headers['webhook-signature']), /^v1,[A-Za-z0-9+/=]+$/);
      assert.equal(hook.headers['content-type'], 'application/json');
    }
    assert.throws(() => new Webhook(`whsec_${Buffer.alloc(24, 1).toString('base64')}`).verify(delivered!.body, delivered!.headers as Record<string, string>));
    const recorded = await waitForDelivery(t, account.testKey, endpointId, 'succeeded');
    assert.equal(recorded.answers[0].status_code, 200);
    assert.equal(recorded.answers[0].response_excerpt, '{"ok":true}');
    await t.request({ method: 'DELETE', url: `${ENDPOINTS}/${endpointId}`, key: account.testKey });
  });

  it('sends an endpoint only the event types it subscribes to', async () => {
    receiver.received.length = 0;
    const other = await t.createAccount();
    const { id: endpointId } = await createEndpoint(t, other.testKey, { url: receiver.url(), events: ['voice_note.failed'] });
    const ok = (await t.send(other.testKey, defaultSendBody('telegram', t.voiceUrl))).json().id;
    await t.waitForStatus(other.testKey, ok, ['delivered']);
    const bad = (await t.send(other.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '10000000002' })).json().id;
    await t.waitForStatus(other.testKey, bad, ['failed']);
    const [failed] = await receiver.waitFor(1, 'voice_note.failed');
    assert.equal(JSON.parse(failed!.body).data.id, bad);
    // The outbox hands events to endpoints in the order they were written: once the failed note's
    // delivery is listed, the delivered note's (settled first) would be listed too, had it been written.
    await waitForDelivery(t, other.testKey, endpointId, 'succeeded');
    assert.deepEqual((await deliveries(t, other.testKey, endpointId)).map((d) => d.event_type), ['voice_note.failed']);
    assert.deepEqual(receiver.received.map((hook) => JSON.parse(hook.body).type), ['voice_note.failed']);
    await t.request({ method: 'DELETE', url: `${ENDPOINTS}/${endpointId}`, key: other.testKey });
  });

  it('retries a failing receiver and records every answer', async () => {
    receiver.received.length = 0;
    const { id } = await createEndpoint(t, account.testKey, { url: receiver.url('/flaky') });
    receiver.queue({ status: 500, body: 'boom' }, { status: 302 }, 'hang');
    assert.equal((await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/test`, key: account.testKey })).statusCode, 202);
    const done = await waitForDelivery(t, account.testKey, id, 'succeeded');
    assert.deepEqual(done.answers.map((a: any) => a.status_code), [500, 302, null, 200]);
    assert.equal(done.answers[0].response_excerpt, 'boom');
    assert.match(done.answers[0].error, /HTTP 500/);
    assert.match(done.answers[2].error, /no answer within 0.4 s/);
    const ids = new Set(receiver.received.map((r) => r.headers['webhook-id']));
    assert.equal(ids.size, 1, 'every retry carries the same webhook-id');
    await t.request({ method: 'DELETE', url: `${ENDPOINTS}/${id}`, key: account.testKey });
  });

  it('gives up after the first try and five retries', async () => {
    const { id } = await createEndpoint(t, account.testKey, { url: receiver.url('/down') });
    receiver.queue(...Array.from({ length: 6 }, () => ({ status: 503 })));
    await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/test`, key: account.testKey });
    const failed = await waitForDelivery(t, account.testKey, id, 'failed');
    assert.deepEqual(failed.answers.map((a: any) => a.status_code), [503, 503, 503, 503, 503, 503]);
    assert.equal(failed.next_attempt_at, null);

    // A resend is a new delivery of the same event (same webhook-id).
    const before = receiver.received.length;
    const resent = await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/deliveries/${failed.id}/resend`, key: account.testKey });
    assert.equal(resent.statusCode, 202, resent.body);
    assert.notEqual(resent.json().id, failed.id);
    assert.equal(resent.json().event_id, failed.event_id);
    await receiver.waitFor(before + 1);
    assert.equal(receiver.received.at(-1)!.headers['webhook-id'], failed.event_id);
    await t.request({ method: 'DELETE', url: `${ENDPOINTS}/${id}`, key: account.testKey });
  });

  it('signs with the old and the new secret after a roll, and with the new one only when asked', async () => {
    receiver.received.length = 0;
    const { id, secret: oldSecret } = await createEndpoint(t, account.testKey, { url: receiver.url('/roll') });
    const rolled = await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/roll_secret`, key: account.testKey });
    assert.equal(rolled.statusCode, 200, rolled.body);
    const newSecret = rolled.json().secret;
    assert.notEqual(newSecret, oldSecret);
    assert.ok(rolled.json().previous_secret_expires_at);
    await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/test`, key: account.testKey });
    const [both] = await receiver.waitFor(1);
    assert.equal(String(both!.headers['webhook-signature']).split(' ').length, 2);
    verified(newSecret, both!);
    verified(oldSecret, both!);

    const again = await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/roll_secret`, key: account.testKey, body: { previous_secret_expires_in: 0 } });
    const newest = again.json().secret;
    assert.equal(again.json().previous_secret_expires_at, null);
    await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/test`, key: account.testKey, body: { type: 'voice_note.failed' } });
    const [, only] = await receiver.waitFor(2);
    assert.equal(verified(newest, only!).type, 'voice_note.failed');
    assert.throws(() => verified(newSecret, only!));
    await t.request({ method: 'DELETE', url: `${ENDPOINTS}/${id}`, key: account.testKey });
  });

  it('sends whatsapp_session.updated when a session changes status', async () => {
    receiver.received.length = 0;
    const { id, secret } = await createEndpoint(t, account.testKey, { url: receiver.url('/sessions'), events: ['whatsapp_session.updated'] });
    const sessionId = await connectedSandboxSession(t, account.testKey);
    await t.request({ method: 'POST', url: `/api/v1/whatsapp/sessions/${sessionId}/simulate`, key: account.testKey, body: { event: 'disconnect' } });
    const hooks = await receiver.waitFor(2, 'whatsapp_session.updated');
    // Deliveries run side by side: arrival order is not promised (the timestamp orders them).
    const payloads = hooks.map((h) => verified(secret, h));
    assert.deepEqual(payloads.map((p) => p.data.status).sort(), ['connected', 'disconnected']);
    const lookup = (await t.request({ method: 'GET', url: `/api/v1/whatsapp/sessions/${sessionId}`, key: account.testKey })).json();
    assert.deepEqual(payloads.find((p) => p.data.status === 'disconnected').data, lookup);
    await t.request({ method: 'DELETE', url: `${ENDPOINTS}/${id}`, key: account.testKey });
  });

  it('plays voice_note.read and voice_note.played for a sandbox WhatsApp recipient ending in 5', async () => {
    receiver.received.length = 0;
    const { id, secret } = await createEndpoint(t, account.testKey, { url: receiver.url('/listens'), events: ['voice_note.read', 'voice_note.played'] });
    const sessionId = await connectedSandboxSession(t, account.testKey);
    const sent = await t.send(account.testKey, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient: '14155550105' });
    const messageId = sent.json().id;
    const status = await t.waitForStatus(account.testKey, messageId, ['delivered']);
    const [read] = await receiver.waitFor(1, 'voice_note.read');
    const [played] = await receiver.waitFor(1, 'voice_note.played');
    assert.deepEqual(verified(secret, read!).data, status);
    assert.ok(Date.parse(verified(secret, played!).timestamp) > Date.parse(verified(secret, read!).timestamp));
    // Subscribed to the two listens only: the delivery itself is not sent to this endpoint.
    const types = receiver.received.filter((r) => r.path === '/listens').map((r) => (JSON.parse(r.body) as { type: string }).type);
    assert.deepEqual(types.sort(), ['voice_note.played', 'voice_note.read']);
    const detail = (await t.request({ method: 'GET', url: `/api/v1/messages/${messageId}`, key: account.testKey })).json();
    assert.equal(detail.receipts.supported, true);
    assert.equal(detail.receipts.read_at, verified(secret, read!).timestamp);
    assert.equal(detail.receipts.played_at, verified(secret, played!).timestamp);
    // A later stage implies the earlier ones: the played note reached the device, at its delivery.
    assert.equal(detail.receipts.delivered_to_device_at, status.delivered_at);
    await t.request({ method: 'DELETE', url: `${ENDPOINTS}/${id}`, key: account.testKey });
  });
});

describe(`webhook history (${STORAGE_LABEL})`, () => {
  it('forgets finished deliveries past the history window and keeps pending ones', async () => {
    const receiver = await startWebhookReceiver();
    const t = await startTestApp({ worker: false, webhooks: { retryDelaysMs: [3_600_000], pollMs: 100 } });
    try {
      const account = await t.createAccount();
      const { id: okId } = await createEndpoint(t, account.testKey, { url: receiver.url('/ok') });
      const { id: downId } = await createEndpoint(t, account.testKey, { url: receiver.url('/down') });
      receiver.queue({ status: 200 });
      await t.request({ method: 'POST', url: `${ENDPOINTS}/${okId}/test`, key: account.testKey });
      await waitForDelivery(t, account.testKey, okId, 'succeeded');
      receiver.queue({ status: 500 });
      await t.request({ method: 'POST', url: `${ENDPOINTS}/${downId}/test`, key: account.testKey });
      await receiver.waitFor(2);
      const { purgeWebhookHistory } = await import('../src/store/webhooks.js');
      await purgeWebhookHistory(t.app.services.db.kysely, Date.now() + 1_000);
      assert.deepEqual(await deliveries(t, account.testKey, okId), []);
      const pending = await deliveries(t, account.testKey, downId);
      assert.equal(pending.length, 1);
      assert.equal(pending[0].status, 'pending');
    } finally {
      await t.close();
      await receiver.close();
    }
  });
});

describe(`sandbox sessions announce their timed moves (${STORAGE_LABEL})`, () => {
  it('sends whatsapp_session.updated when a session connects by itself, with nobody polling it', async () => {
    const receiver = await startWebhookReceiver();
    const t = await startTestApp({ worker: false, env: { SANDBOX_AUTO_SCAN_SECONDS: '1' }, webhooks: FAST_POLL });
    try {
      const account = await t.createAccount();
      const { secret } = await createEndpoint(t, account.testKey, { url: receiver.url(), events: ['whatsapp_session.updated'] });
      const created = await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: account.testKey });
      assert.equal(created.statusCode, 201, created.body);
      const [hook] = await receiver.waitFor(1);
      const payload = verified(secret, hook!);
      assert.equal(payload.data.session_id, created.json().session_id);
      assert.equal(payload.data.status, 'connected');
      assert.equal(payload.data.phone_number, '15550000000');
    } finally {
      await t.close();
      await receiver.close();
    }
  });
});

describe(`the webhook outbox outlives the process (${STORAGE_LABEL})`, () => {
  it('sends an event written before a restart once the service is back', async () => {
    const receiver = await startWebhookReceiver();
    try {
      await withRestartableStorage(async (reuse) => {
        // First life: the sender looks at the outbox at start and then not for an hour.
        const first = await startTestApp({ reuse, webhooks: { pollMs: 3_600_000 } });
        const account = await first.createAccount();
        const { secret } = await createEndpoint(first, account.testKey, { url: receiver.url('/outbox') });
        const messageId = (await first.send(account.testKey, defaultSendBody('telegram', first.voiceUrl))).json().id;
        const status = await first.waitForStatus(account.testKey, messageId, ['delivered']);
        await first.close();
        assert.equal(receiver.received.length, 0, 'the event waited in the outbox');

        const second = await startTestApp({ reuse, worker: false, webhooks: FAST_POLL });
        try {
          const [hook] = await receiver.waitFor(1);
          const payload = verified(secret, hook!);
          assert.equal(payload.type, 'voice_note.delivered');
          assert.deepEqual(payload.data, status);
        } finally {
          await second.close();
        }
      });
    } finally {
      await receiver.close();
    }
  });
});

describe('webhook retry schedule', () => {
  it('waits 1 s, 5 s, 30 s, 2 min and 10 min between tries, then stops', () => {
    assert.deepEqual([1, 2, 3, 4, 5, 6].map((n) => retryDelayAfter(n)), [1_000, 5_000, 30_000, 120_000, 600_000, null]);
    assert.deepEqual(RETRY_DELAYS_MS, [1_000, 5_000, 30_000, 120_000, 600_000]);
  });

  it('lists each delivery as one moment saw it while its tries are being recorded', async () => {
    const receiver = await startWebhookReceiver();
    receiver.fallback = { status: 500 };
    const t = await startTestApp({ worker: false, webhooks: { retryDelaysMs: [30, 30, 30, 30, 30], pollMs: 20 } });
    try {
      const account = await t.createAccount();
      const { id } = await createEndpoint(t, account.testKey, { url: receiver.url() });
      for (let i = 0; i < 4; i++) await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/test`, key: account.testKey });
      const deadline = Date.now() + 20_000;
      let lists = 0;
      for (;;) {
        const list = await deliveries(t, account.testKey, id);
        lists++;
        for (const d of list) {
          assert.equal(d.attempts, d.answers.length, JSON.stringify(d));
          if (d.status === 'failed') assert.equal(d.answers.length, 6, JSON.stringify(d));
          const last = d.answers.at(-1);
          // A pending delivery's next try comes after its last answer, never before it.
          if (d.status === 'pending' && last) assert.ok(Date.parse(d.next_attempt_at) >= Date.parse(last.at) + last.duration_ms, JSON.stringify(d));
        }
        if (list.length === 4 && list.every((d) => d.status === 'failed')) break;
        assert.ok(Date.now() < deadline, `the tries did not end: ${JSON.stringify(list)}`);
        await new Promise((r) => setTimeout(r, 5)); // under the key's 1,000 requests a minute
      }
      assert.ok(lists > 4, `read the list ${lists} times`);
    } finally {
      await t.close();
      await receiver.close();
    }
  });

  it('schedules the first retry 1 s after a failed try in a default app', async () => {
    const receiver = await startWebhookReceiver();
    receiver.fallback = { status: 500 };
    const t = await startTestApp({ worker: false, webhooks: FAST_POLL });
    try {
      const account = await t.createAccount();
      const { id } = await createEndpoint(t, account.testKey, { url: receiver.url() });
      await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/test`, key: account.testKey });
      let seen: any;
      for (let i = 0; i < 400 && !seen; i++) {
        seen = (await deliveries(t, account.testKey, id)).find((d) => d.answers.length >= 1);
        if (!seen) await new Promise((r) => setTimeout(r, 25));
      }
      assert.ok(seen, 'a delivery with an answer');
      const answeredAt = Date.parse(seen.answers[0].at) + seen.answers[0].duration_ms;
      if (seen.answers.length === 1 && seen.status === 'pending') {
        assert.equal(Date.parse(seen.next_attempt_at) - answeredAt, 1_000);
      } else {
        // A slow machine read it only after the retry: that retry did not start before its time.
        assert.ok(Date.parse(seen.answers[1].at) - answeredAt >= 1_000, JSON.stringify(seen));
      }
    } finally {
      await t.close();
      await receiver.close();
    }
  });
});
