import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { assertErrorEnvelope, closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp } from './fixtures/app-harness.js';
import { captureLogs } from './fixtures/log-capture.js';

/**
 * Operations (docs/operations.md): Prometheus metrics off the public API, X-Request-Id on every
 * response and in the log lines of its request and of the delivery it caused, load shedding.
 */

const TOKEN = 'metrics-token-0123456789abcdef';

after(closeSharedAudio);

/** One sample line of a Prometheus exposition, by metric name and exact label set; undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const wanted = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort();
  for (const line of text.split('\n')) {
    const m = /^([a-z_:]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = (m[2] ?? '').split(/,(?=[a-z_]+=")/).filter(Boolean).sort();
    if (JSON.stringify(got) === JSON.stringify(wanted)) return Number(m[3]);
  }
  return undefined;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe(`metrics (${STORAGE_LABEL})`, () => {
  test('with METRICS_TOKEN, GET /metrics needs the bearer token and reports HTTP, deliveries, audio, queue and sessions', async (t) => {
    const app = await startTestApp({ env: { METRICS_TOKEN: TOKEN, SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    t.after(() => app.close());
    const acct = await app.createAccount();

    assertErrorEnvelope(await app.request({ method: 'GET', url: '/metrics' }), 401, 'unauthorized');
    assertErrorEnvelope(await app.request({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer wrong-token-0123456789' } }), 401, 'unauthorized');
    // An API key is not a metrics token.
    assertErrorEnvelope(await app.request({ method: 'GET', url: '/metrics', key: acct.testKey }), 401, 'unauthorized');

    const sent = await app.send(acct.testKey, defaultSendBody('telegram', app.voiceUrl));
    assert.equal(sent.statusCode, 202, sent.body);
    await app.waitForStatus(acct.testKey, sent.json().id, ['delivered']);
    const session = await app.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: acct.testKey });
    assert.equal(session.statusCode, 201, session.body);

    const res = await app.request({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(res.statusCode, 200, res.body);
    assert.match(String(res.headers['content-type']), /^text\/plain/);
    const text = res.body;
    assert.equal(sample(text, 'voicenote_http_requests_total', { method: 'POST', route: '/api/v1/send', status: '202' }), 1);
    assert.ok((sample(text, 'voicenote_http_request_duration_seconds_count', { method: 'POST', route: '/api/v1/send' }) ?? 0) >= 1);
    assert.equal(sample(text, 'voicenote_deliveries_total', { platform: 'telegram', env: 'test', outcome: 'delivered', code: 'none' }), 1);
    assert.equal(sample(text, 'voicenote_delivery_attempt_duration_seconds_count', { platform: 'telegram', outcome: 'delivered' }), 1);
    assert.equal(sample(text, 'voicenote_audio_cache_lookups_total', { result: 'miss' }), 1);
    assert.equal(sample(text, 'voicenote_audio_conversion_duration_seconds_count', { format: 'ogg_opus' }) ?? sumOf(text, 'voicenote_audio_conversion_duration_seconds_count'), 1);
    assert.equal(sample(text, 'voicenote_whatsapp_sessions', { env: 'test', status: 'qr_pending' }), 1);
    assert.equal(sample(text, 'voicenote_queue_oldest_due_age_seconds', { platform: 'telegram' }), 0);
    assert.ok(sample(text, 'process_resident_memory_bytes', {}) !== undefined, 'default process metrics are there');
    // Ids never become label values: the status route is counted by its pattern.
    assert.doesNotMatch(text, /msg_[0-9A-Za-z]{24}/);
  });

  test('queue depth and the age of the oldest due message are read from storage at scrape time', async (t) => {
    const app = await startTestApp({ worker: false, env: { METRICS_TOKEN: TOKEN } });
    t.after(() => app.close());
    const acct = await app.createAccount();
    for (let i = 0; i < 3; i++) assert.equal((await app.send(acct.testKey, defaultSendBody('telegram', app.voiceUrl))).statusCode, 202);
    assert.equal((await app.send(acct.testKey, defaultSendBody('linkedin', app.voiceUrl))).statusCode, 202);
    await new Promise((r) => setTimeout(r, 20));
    const text = (await app.request({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } })).body;
    assert.equal(sample(text, 'voicenote_queue_depth', { platform: 'telegram', status: 'queued' }), 3);
    assert.equal(sample(text, 'voicenote_queue_depth', { platform: 'linkedin', status: 'queued' }), 1);
    assert.ok((sample(text, 'voicenote_queue_oldest_due_age_seconds', { platform: 'telegram' }) ?? 0) > 0);
    assert.equal(sample(text, 'voicenote_queue_oldest_due_age_seconds', { platform: 'whatsapp' }), 0);
  });

  test('without METRICS_TOKEN there is no /metrics on the API port', async (t) => {
    const app = await startTestApp();
    t.after(() => app.close());
    assertErrorEnvelope(await app.request({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } }), 404, 'not_found');
  });

  test('METRICS_PORT serves /metrics on a listener of its own (token required when set), not on the API port', async (t) => {
    const port = await freePort();
    const app = await startTestApp({ env: { METRICS_PORT: String(port), HOST: '127.0.0.1' } });
    t.after(() => app.close());
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /process_cpu_user_seconds_total/);
    assert.equal((await fetch(`http://127.0.0.1:${port}/api/v1/usage`)).status, 404);
    assertErrorEnvelope(await app.request({ method: 'GET', url: '/metrics' }), 404, 'not_found');

    const port2 = await freePort();
    const guarded = await startTestApp({ env: { METRICS_PORT: String(port2), HOST: '127.0.0.1', METRICS_TOKEN: TOKEN } });
    t.after(() => guarded.close());
    const refused = await fetch(`http://127.0.0.1:${port2}/metrics`);
    assert.equal(refused.status, 401);
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'unauthorized');
    assert.equal((await fetch(`http://127.0.0.1:${port2}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
  });

  test('bad METRICS_PORT, METRICS_TOKEN or MAX_EVENT_LOOP_DELAY_MS stop start-up with a line naming the variable', () => {
    const base = { DATA_DIR: '/tmp/unused' };
    for (const [name, value] of [
      ['METRICS_PORT', 'abc'],
      ['METRICS_PORT', '0'],
      ['METRICS_PORT', '70000'],
      ['METRICS_TOKEN', 'short'],
      ['METRICS_TOKEN', 'has a space in it 0123456789'],
      ['MAX_EVENT_LOOP_DELAY_MS', '-1'],
    ] as const) {
      assert.throws(() => loadConfig({ ...base, [name]: value }), (err: unknown) => err instanceof ConfigError && err.message.startsWith(`${name}: `) && !err.message.includes('\n'));
    }
  });
});

function sumOf(text: string, name: string): number {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
}

describe(`X-Request-Id (${STORAGE_LABEL})`, () => {
  test('every response carries one: the caller\'s own when well-formed, a fresh one otherwise', async (t) => {
    const app = await startTestApp();
    t.after(() => app.close());
    const acct = await app.createAccount();
    const own = await app.request({ method: 'GET', url: '/api/v1/usage', key: acct.testKey, headers: { 'x-request-id': 'trace-7f1c0f3e.42:a_b' } });
    assert.equal(own.statusCode, 200);
    assert.equal(own.headers['x-request-id'], 'trace-7f1c0f3e.42:a_b');
    const ids = new Set<string>();
    const requests: Parameters<typeof app.request>[0][] = [
      { method: 'GET', url: '/healthz' },
      { method: 'GET', url: '/api/v1/usage' },
      { method: 'GET', url: '/api/v1/status/msg_nope', key: acct.testKey },
      { method: 'GET', url: '/api/v1/status/%E0%A4%A', key: acct.testKey },
      { method: 'GET', url: '/nowhere' },
      { method: 'POST', url: '/api/v1/send', key: acct.testKey, payload: '{bad', headers: { 'content-type': 'application/json' } },
      { method: 'GET', url: '/api/v1/usage', key: acct.testKey, headers: { 'x-request-id': 'has spaces and "quotes"' } },
      { method: 'GET', url: '/api/v1/usage', key: acct.testKey, headers: { 'x-request-id': 'x'.repeat(129) } },
    ];
    for (const req of requests) {
      const res = await app.request(req);
      const id = res.headers['x-request-id'];
      assert.equal(typeof id, 'string', `${req.method} ${req.url} → ${res.statusCode} has no X-Request-Id`);
      assert.match(id as string, /^req_[0-9a-f]{24}$/, `${req.url}: ${String(id)}`);
      ids.add(id as string);
    }
    assert.equal(ids.size, 8, 'each request gets its own id');
  });

  test('the request id is in every log line of its request and in the delivery log lines of the message it created', async (t) => {
    const { lines, logger } = captureLogs();
    const app = await startTestApp({ logger });
    t.after(() => app.close());
    const acct = await app.createAccount();
    const requestId = 'order-42-7f1c0f3e';
    const sent = await app.send(acct.testKey, defaultSendBody('telegram', app.voiceUrl), { 'x-request-id': requestId });
    assert.equal(sent.statusCode, 202, sent.body);
    assert.equal(sent.headers['x-request-id'], requestId);
    const messageId = sent.json().id as string;
    await app.waitForStatus(acct.testKey, messageId, ['delivered']);
    // The worker logs once the message is settled; give that line a moment to be written.
    for (let i = 0; i < 100 && !lines.some((l) => l.message_id === messageId && l.msg === 'delivered'); i++) await new Promise((r) => setTimeout(r, 20));

    const ofRequest = lines.filter((l) => l.request_id === requestId);
    assert.ok(ofRequest.some((l) => l.msg === 'incoming request'), 'the incoming request line');
    assert.ok(ofRequest.some((l) => l.msg === 'request completed'), 'the request completed line');
    const delivery = lines.filter((l) => l.message_id === messageId);
    assert.ok(delivery.length > 0);
    for (const line of delivery) assert.equal(line.request_id, requestId, JSON.stringify(line));
    // Every line Fastify logs for a request names its request id.
    for (const line of lines.filter((l) => l.req !== undefined || l.res !== undefined)) assert.equal(typeof line.request_id, 'string', JSON.stringify(line));
  });
});

describe(`load shedding (${STORAGE_LABEL})`, () => {
  test('under event-loop pressure the API answers 503 service_unavailable with Retry-After; /healthz stays live; it recovers', async (t) => {
    const app = await startTestApp({ env: { MAX_EVENT_LOOP_DELAY_MS: '40' } });
    t.after(() => app.close());
    const acct = await app.createAccount();
    assert.equal((await app.request({ method: 'GET', url: '/api/v1/usage', key: acct.testKey })).statusCode, 200);

    // Busy chunks of 150 ms for 2.5 s: every sample of the event-loop delay taken meanwhile is far over 40 ms.
    await new Promise<void>((resolve) => {
      const until = Date.now() + 2_500;
      const chunk = (): void => {
        const end = Date.now() + 150;
        while (Date.now() < end) {
          // blocking on purpose
        }
        if (Date.now() < until) setImmediate(chunk);
        else resolve();
      };
      chunk();
    });
    const [shed, live] = await Promise.all([
      app.request({ method: 'GET', url: '/api/v1/usage', key: acct.testKey }),
      app.request({ method: 'GET', url: '/healthz' }),
    ]);
    assertErrorEnvelope(shed, 503, 'service_unavailable');
    assert.ok(Number(shed.headers['retry-after']) >= 1, 'Retry-After');
    assert.equal(typeof shed.headers['x-request-id'], 'string');
    assert.equal(live.statusCode, 200);

    let status = 503;
    for (let i = 0; i < 100 && status === 503; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = (await app.request({ method: 'GET', url: '/api/v1/usage', key: acct.testKey })).statusCode;
    }
    assert.equal(status, 200, 'requests are served again once the loop is calm');
  });
});
