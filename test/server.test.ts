import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, withRestartableStorage, type TestApp } from './fixtures/app-harness.js';

after(async () => {
  await closeSharedAudio();
});

/** An app for one test, closed (storage dropped) when the test ends. */
async function appFor(t: { after(fn: () => Promise<void>): void }): Promise<TestApp> {
  const app = await startTestApp({ worker: false });
  t.after(() => app.close());
  return app;
}

type Json = Record<string, any>;

function assertServiceUnavailable(res: { statusCode: number; headers: Record<string, unknown>; json(): any }): void {
  assert.equal(res.statusCode, 503);
  const body = res.json();
  assert.equal(body.error.code, 'service_unavailable');
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  const retryAfter = res.headers['retry-after'];
  assert.ok(typeof retryAfter === 'string' && /^\d+$/.test(retryAfter) && Number(retryAfter) > 0, `Retry-After in seconds, got ${String(retryAfter)}`);
}

describe(`OpenAPI and docs (${STORAGE_LABEL})`, () => {
  test('GET /api/v1/openapi.json is an OpenAPI 3.1 document of the public endpoints', async (t) => {
    const app = await appFor(t);
    const res = await app.request({ method: 'GET', url: '/api/v1/openapi.json' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    const doc = res.json<Json>();
    assert.match(doc.openapi, /^3\.1\.\d+$/);
    assert.equal(typeof doc.info?.title, 'string');
    assert.equal(typeof doc.info?.version, 'string');
    for (const [path, methods] of Object.entries({
      '/api/v1/send': ['post'],
      '/api/v1/status/{message_id}': ['get'],
      '/api/v1/usage': ['get'],
      '/api/v1/whatsapp/sessions': ['get', 'post'],
      '/api/v1/whatsapp/sessions/{session_id}': ['get', 'delete'],
    })) {
      assert.ok(doc.paths?.[path], `paths has ${path}; it has ${Object.keys(doc.paths ?? {}).join(', ')}`);
      for (const method of methods) assert.ok(doc.paths[path][method], `${method.toUpperCase()} ${path} is documented`);
    }
    // Probes and the document itself are not part of the API surface.
    assert.equal(doc.paths['/healthz'], undefined);
    assert.equal(doc.paths['/api/v1/openapi.json'], undefined);
  });

  test('the 202 response of POST /send lists exactly the five fields of the seed', async (t) => {
    const app = await appFor(t);
    const doc = (await app.request({ method: 'GET', url: '/api/v1/openapi.json' })).json<Json>();
    const resolve = (schema: Json): Json => {
      if (typeof schema.$ref !== 'string') return schema;
      const name = schema.$ref.replace(/^#\/components\/schemas\//, '');
      const target = doc.components?.schemas?.[name];
      assert.ok(target, `unresolvable $ref ${schema.$ref}`);
      return resolve(target);
    };
    const accepted = doc.paths['/api/v1/send'].post.responses['202'];
    assert.ok(accepted, 'a 202 response is documented');
    const schema = resolve(accepted.content['application/json'].schema);
    assert.deepEqual(Object.keys(schema.properties).sort(), ['created_at', 'id', 'platform', 'recipient', 'status']);
  });

  test('GET /docs serves an HTML page', async (t) => {
    const app = await appFor(t);
    let res = await app.request({ method: 'GET', url: '/docs' });
    for (let hops = 0; hops < 3 && res.statusCode >= 300 && res.statusCode < 400; hops++) {
      const location = String(res.headers.location);
      res = await app.request({ method: 'GET', url: new URL(location, 'http://localhost/docs').pathname });
    }
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/html/);
    assert.match(res.body, /<html/i);
    assert.match(res.body, /<title>voicenote API<\/title>/, 'our name, not "Swagger UI"');
    assert.match(res.body, /theme\/favicon\.ico/, 'our icon');
  });

  test('one version: the OpenAPI document\'s info.version is package.json\'s', async (t) => {
    const app = await appFor(t);
    const { version } = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    const doc = (await app.request({ method: 'GET', url: '/api/v1/openapi.json' })).json<Json>();
    assert.equal(doc.info.version, version);
    assert.equal(doc.info.title, 'voicenote');
  });

  test('/docs is given the document as OpenAPI 3.0 (the UI renders 3.1 seconds slower); the API\'s own stays 3.1', async (t) => {
    const app = await appFor(t);
    const ui = (await app.request({ method: 'GET', url: '/docs/json' })).json<Json>();
    const api = (await app.request({ method: 'GET', url: '/api/v1/openapi.json' })).json<Json>();
    assert.equal(ui.openapi, '3.0.3');
    assert.match(api.openapi, /^3\.1\./);
    assert.deepEqual(Object.keys(ui.paths).sort(), Object.keys(api.paths).sort(), 'the same operations');
    const text = JSON.stringify(ui);
    assert.doesNotMatch(text, /"type":"null"/, 'no 3.1-only null type left');
    assert.doesNotMatch(text, /"const":/, 'no 3.1-only const left');
    assert.match(text, /"nullable":true/);
    const { asOpenApi30 } = await import('../src/api/docs-openapi30.js');
    assert.deepEqual(asOpenApi30({ openapi: '3.1.0', x: { anyOf: [{ type: 'string', maxLength: 3 }, { type: 'null' }] }, y: { type: ['integer', 'null'] }, z: { const: 'a' } }), {
      openapi: '3.0.3',
      x: { type: 'string', maxLength: 3, nullable: true },
      y: { type: 'integer', nullable: true },
      z: { enum: ['a'] },
    });
  });

  test('POST /send\'s body is documented as a union by platform, while the route still answers as before', async (t) => {
    const app = await appFor(t);
    const doc = (await app.request({ method: 'GET', url: '/api/v1/openapi.json' })).json<Json>();
    const body = doc.paths['/api/v1/send'].post.requestBody.content['application/json'].schema;
    assert.deepEqual(body, { $ref: '#/components/schemas/SendRequest' });
    const union = doc.components.schemas.SendRequest;
    assert.equal(union.discriminator.propertyName, 'platform');
    const shapes = Object.fromEntries(
      union.oneOf.map((r: Json) => {
        const shape = doc.components.schemas[r.$ref.split('/').pop()];
        return [shape.properties.platform.const, shape];
      }),
    );
    assert.deepEqual(Object.keys(shapes).sort(), ['linkedin', 'telegram', 'whatsapp']);
    const fields = (platform: string) => Object.keys(shapes[platform].properties).sort();
    assert.deepEqual(fields('linkedin'), ['audio_url', 'cancel_on_reply', 'dry_run', 'duration', 'listen', 'platform', 'recipient', 'recipient_time_zone', 'send_at', 'session']);
    assert.deepEqual(fields('telegram'), ['audio_url', 'cancel_on_reply', 'caption', 'dry_run', 'duration', 'listen', 'platform', 'recipient', 'recipient_time_zone', 'recording_indicator', 'send_at', 'session']);
    assert.deepEqual(fields('whatsapp'), ['audio_url', 'cancel_on_reply', 'dry_run', 'duration', 'platform', 'recipient', 'recipient_time_zone', 'recording_indicator', 'send_at', 'session']);
    for (const shape of Object.values(shapes) as Json[]) assert.equal(shape.additionalProperties, false);
    const session = (name: string) => doc.components.schemas[name];
    assert.deepEqual(Object.keys(session('LinkedinSession').properties).sort(), ['cookies', 'csrf_token', 'li_at', 'proxy', 'user_agent']);
    assert.deepEqual(session('LinkedinSession').required, ['li_at', 'csrf_token']);
    assert.deepEqual(session('TelegramSession').oneOf.map((r: Json) => r.$ref.split('/').pop()), ['TelegramBotSession', 'TelegramAccountSession']);
    assert.deepEqual(Object.keys(session('TelegramBotSession').properties), ['bot_token', 'proxy']);
    assert.deepEqual(Object.keys(session('TelegramAccountSession').properties), ['session_id']);
    assert.deepEqual(Object.keys(session('WhatsappSession').properties), ['session_id']);
    // The route itself is unchanged: an unknown platform is still a 400 naming the platforms, a bad session a 422 naming its field.
    const { testKey } = await app.createAccount();
    const signal = await app.send(testKey, { ...defaultSendBody('telegram', app.voiceUrl), platform: 'signal' });
    assert.equal(signal.statusCode, 400, signal.body);
    assert.equal(signal.json().error.code, 'invalid_request');
    assert.match(signal.json().error.message, /^platform must be one of /);
    const badSession = await app.send(testKey, { ...defaultSendBody('telegram', app.voiceUrl), session: { li_at: 'x', csrf_token: 'ajax:1' } });
    assert.equal(badSession.statusCode, 422, badSession.body);
    assert.match(badSession.json().error.details.field, /^session\./);
  });

  test('/docs shows our name as its logo, not Fastify\'s; /favicon.ico is an icon, not a 404', async (t) => {
    const app = await appFor(t);
    const init = await app.request({ method: 'GET', url: '/docs/static/swagger-initializer.js' });
    assert.equal(init.statusCode, 200);
    const logo = /data:image\/svg\+xml;base64,([A-Za-z0-9+/=]+)/.exec(init.body);
    assert.ok(logo, 'a logo is put in the top bar');
    const svg = Buffer.from(logo[1]!, 'base64').toString('utf8');
    assert.match(svg, />voicenote</);
    assert.doesNotMatch(svg, /fastify/i);
    const icon = await app.request({ method: 'GET', url: '/favicon.ico' });
    assert.equal(icon.statusCode, 200);
    assert.equal(icon.headers['content-type'], 'image/x-icon');
    assert.deepEqual(Buffer.from(icon.body, 'latin1').subarray(0, 4), Buffer.from([0, 0, 1, 0]), 'an ICO file');
  });
});

describe(`health and readiness (${STORAGE_LABEL})`, () => {
  test('/healthz and /readyz answer 200 on a healthy app, without a key', async (t) => {
    const app = await appFor(t);
    const health = await app.request({ method: 'GET', url: '/healthz' });
    assert.equal(health.statusCode, 200);
    assert.equal(health.json().status, 'ok');
    const ready = await app.request({ method: 'GET', url: '/readyz' });
    assert.equal(ready.statusCode, 200);
    assert.equal(ready.json().status, 'ready');
  });

  test('/readyz and the API are 503 service_unavailable with Retry-After when storage is closed; /healthz stays 200', async () => {
    await withRestartableStorage(async (reuse) => {
      const app = await startTestApp({ worker: false, reuse });
      try {
        const account = await app.createAccount();
        assert.equal((await app.request({ method: 'GET', url: '/readyz' })).statusCode, 200);
        await app.app.services.db.close();
        assertServiceUnavailable(await app.request({ method: 'GET', url: '/readyz' }));
        assert.equal((await app.request({ method: 'GET', url: '/healthz' })).statusCode, 200, 'the process itself is alive');
        // The API says "try again later", not "we have a bug", while storage is away.
        assertServiceUnavailable(await app.request({ method: 'GET', url: '/api/v1/usage', key: account.testKey }));
        assertServiceUnavailable(await app.send(account.testKey, defaultSendBody('telegram', app.voiceUrl)));
      } finally {
        // Storage is already closed: closing it a second time may complain, which is not under test.
        await app.close().catch(() => undefined);
      }
    });
  });

  test('while draining, /readyz and /api/v1 requests get 503 service_unavailable with Retry-After; /healthz stays 200', async (t) => {
    const app = await appFor(t);
    const account = await app.createAccount();
    assert.equal((await app.request({ method: 'GET', url: '/api/v1/usage', key: account.testKey })).statusCode, 200);

    app.app.server.startDraining();

    assertServiceUnavailable(await app.request({ method: 'GET', url: '/readyz' }));
    assertServiceUnavailable(await app.request({ method: 'GET', url: '/api/v1/usage', key: account.testKey }));
    const send = await app.send(account.testKey, { platform: 'telegram', recipient: '123', audio_url: app.voiceUrl, session: { bot_token: 'x' } });
    assertServiceUnavailable(send);
    assertServiceUnavailable(await app.request({ method: 'GET', url: '/api/v1/usage' }));
    const health = await app.request({ method: 'GET', url: '/healthz' });
    assert.equal(health.statusCode, 200, 'a draining process is still alive: orchestrators must not kill it early');
  });
});

describe(`unknown routes (${STORAGE_LABEL})`, () => {
  test('an unknown route under /api/v1 with a valid key is a 404 not_found envelope', async (t) => {
    const app = await appFor(t);
    const account = await app.createAccount();
    for (const [method, url] of [
      ['GET', '/api/v1/nope'],
      ['POST', '/api/v1/messages/send'],
      ['GET', '/api/v1/status'],
    ] as const) {
      const res = await app.request({ method, url, key: account.testKey });
      assert.equal(res.statusCode, 404, `${method} ${url}`);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      const body = res.json();
      assert.deepEqual(Object.keys(body), ['error']);
      assert.deepEqual(Object.keys(body.error).sort(), ['code', 'details', 'message']);
      assert.equal(body.error.code, 'not_found');
      assert.equal(typeof body.error.message, 'string');
      // Still an API response: the limit headers are there.
      assert.ok(res.headers['x-ratelimit-limit'], 'X-RateLimit-Limit on a 404');
    }
  });

  test('odd URLs still get the envelope: an over-long id is a 404, bad percent-encoding a 400; a trailing slash is the same route', async (t) => {
    const app = await appFor(t);
    const account = await app.createAccount();
    const envelope = (res: { json(): any }, code: string): void => {
      const body = res.json();
      assert.deepEqual(Object.keys(body), ['error']);
      assert.deepEqual(Object.keys(body.error).sort(), ['code', 'details', 'message']);
      assert.equal(body.error.code, code);
    };
    const long = await app.request({ method: 'GET', url: `/api/v1/status/msg_${'a'.repeat(200)}`, key: account.testKey });
    assert.equal(long.statusCode, 404, long.body);
    envelope(long, 'not_found');
    const badSession = await app.request({ method: 'GET', url: `/api/v1/whatsapp/sessions/ws_${'b'.repeat(200)}`, key: account.testKey });
    assert.equal(badSession.statusCode, 404, badSession.body);
    envelope(badSession, 'not_found');
    const badEncoding = await app.request({ method: 'GET', url: '/api/v1/status/%zz', key: account.testKey });
    assert.equal(badEncoding.statusCode, 400, badEncoding.body);
    envelope(badEncoding, 'invalid_request');
    const slash = await app.request({ method: 'GET', url: '/api/v1/usage/', key: account.testKey });
    assert.equal(slash.statusCode, 200, slash.body);
    assert.ok('limits' in slash.json());
  });

  test('the OpenAPI document, which needs no key, carries the rate-limit headers of the caller IP\'s bucket', async (t) => {
    const app = await appFor(t);
    const res = await app.request({ method: 'GET', url: '/api/v1/openapi.json' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['x-ratelimit-limit'], '300');
    assert.match(String(res.headers['x-ratelimit-remaining']), /^\d+$/);
    assert.match(String(res.headers['x-ratelimit-reset']), /^\d+$/);
    assert.equal(res.headers['x-usage-limit'], undefined, 'no key, no usage headers');
  });

  test('an unknown route under /api/v1 without a key is 401, not a map of the routes', async (t) => {
    const app = await appFor(t);
    const res = await app.request({ method: 'GET', url: '/api/v1/nope' });
    assert.equal(res.statusCode, 401);
    assert.equal(res.json().error.code, 'unauthorized');
  });
});
