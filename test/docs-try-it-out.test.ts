import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { test } from './fixtures/timed.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';
import { ROOT } from './fixtures/cli-process.js';

/**
 * /docs as a newcomer uses it: the document the UI is given is valid OpenAPI 3.0 (and the API's own
 * valid 3.1), every response is named, and "Try it out" on any route with a body sends a body that
 * works as it is with a sandbox key.
 */

after(async () => {
  await closeSharedAudio();
});

type Json = Record<string, any>;

async function appFor(t: { after(fn: () => Promise<void>): void }, worker = false): Promise<TestApp> {
  // No sandbox scan of its own: the examples scan their sessions, and on a busy machine the automatic one came first.
  const app = await startTestApp({ worker, env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
  t.after(() => app.close());
  return app;
}

const operationsOf = (doc: Json): Array<[string, string, Json]> =>
  Object.entries<Json>(doc.paths).flatMap(([path, ops]) => Object.entries<Json>(ops).map(([method, op]) => [method.toUpperCase(), path, op] as [string, string, Json]));

describe(`the interactive docs (${STORAGE_LABEL})`, () => {
  test('/docs/json is a valid OpenAPI 3.0 document and /api/v1/openapi.json a valid 3.1 one', async (t) => {
    const app = await appFor(t);
    for (const [url, version] of [['/docs/json', /^3\.0\./], ['/api/v1/openapi.json', /^3\.1\./]] as const) {
      const doc = (await app.request({ method: 'GET', url })).json<Json>();
      assert.match(doc.openapi, version, url);
      const result = await new Validator().validate(doc);
      assert.equal(result.valid, true, `${url}: ${JSON.stringify(result.errors, null, 1)?.slice(0, 2000)}`);
    }
  });

  test('every response is named by what it means, none is "Default Response"', async (t) => {
    const app = await appFor(t);
    for (const url of ['/docs/json', '/api/v1/openapi.json']) {
      const doc = (await app.request({ method: 'GET', url })).json<Json>();
      for (const [method, path, op] of operationsOf(doc)) {
        for (const [status, response] of Object.entries<Json>(op.responses)) {
          assert.notEqual(response.description, 'Default Response', `${url} ${method} ${path} ${status}`);
          assert.ok(typeof response.description === 'string' && response.description.length > 1, `${method} ${path} ${status}`);
        }
        if (op.responses['429']) assert.match(op.responses['429'].description, /rate_limited/);
      }
    }
  });

  test('"Try it out" bodies work as they are with a sandbox key; the send example delivers the service\'s own sample', async (t) => {
    const app = await appFor(t, true);
    const { testKey } = await app.createAccount();
    // The UI loads the document from the service it then calls: the same Host here.
    const headers = { host: 'localhost:3000' };
    const doc = (await app.request({ method: 'GET', url: '/docs/json', headers })).json<Json>();
    const withBody = operationsOf(doc).filter(([, , op]) => op.requestBody?.content?.['application/json']);
    assert.ok(withBody.length >= 6, `operations with a body: ${withBody.length}`);
    const example = (method: string, path: string): Json => {
      const found = withBody.find(([m, p]) => m === method && p === path);
      assert.ok(found, `${method} ${path} takes a body`);
      const body = found[2].requestBody.content['application/json'].example;
      assert.ok(body !== undefined, `${method} ${path} has an example body`);
      return body;
    };
    for (const [method, path] of withBody) example(method, path);
    const call = async (method: string, path: string, url: string, status: number): Promise<Json> => {
      const res = await app.request({ method: method as 'POST' | 'PATCH', url, key: testKey, headers, body: example(method, path) });
      assert.equal(res.statusCode, status, `${method} ${url}: ${res.body}`);
      return res.json<Json>();
    };

    const send = example('POST', '/api/v1/send');
    assert.equal(send.platform, 'telegram');
    assert.equal(send.audio_url, 'http://localhost:3000/samples/hello.ogg');
    const sent = await call('POST', '/api/v1/send', '/api/v1/send', 202);
    assert.equal((await app.waitForStatus(testKey, sent.id, ['delivered', 'failed'])).status, 'delivered');

    const session = await call('POST', '/api/v1/whatsapp/sessions', '/api/v1/whatsapp/sessions', 201);
    const sessionPath = '/api/v1/whatsapp/sessions/{session_id}/simulate';
    assert.equal((await call('POST', sessionPath, `/api/v1/whatsapp/sessions/${session.session_id}/simulate`, 200)).status, 'connected');

    const endpoint = await call('POST', '/api/v1/webhook_endpoints', '/api/v1/webhook_endpoints', 201);
    await call('POST', '/api/v1/webhook_endpoints/{endpoint_id}/roll_secret', `/api/v1/webhook_endpoints/${endpoint.id}/roll_secret`, 200);
    await call('POST', '/api/v1/webhook_endpoints/{endpoint_id}/test', `/api/v1/webhook_endpoints/${endpoint.id}/test`, 202);
    const checked = await call('POST', '/api/v1/recipients/check', '/api/v1/recipients/check', 200);
    assert.equal(checked.exists, true);
    // A Telegram account with a cloud password, linked through the sandbox's two steps.
    const tg = await call('POST', '/api/v1/telegram/sessions', '/api/v1/telegram/sessions', 201);
    const tgSimulate = '/api/v1/telegram/sessions/{session_id}/simulate';
    const tgPassword = '/api/v1/telegram/sessions/{session_id}/password';
    assert.equal((await call('POST', tgSimulate, `/api/v1/telegram/sessions/${tg.session_id}/simulate`, 200)).status, 'password_needed');
    assert.equal((await call('POST', tgPassword, `/api/v1/telegram/sessions/${tg.session_id}/password`, 200)).status, 'connected');
    const rhythmPath = '/api/v1/rhythm/{platform}';
    assert.equal((await call('PATCH', rhythmPath, '/api/v1/rhythm/telegram', 200)).send_window.time_zone, 'Europe/Berlin');
    const senders = (await app.request({ method: 'GET', url: '/api/v1/senders', key: testKey, headers })).json<Json>().data as Json[];
    const bot = senders.find((s) => s.platform === 'telegram');
    assert.ok(bot, 'the sandbox bot that sent is a sender');
    const senderPath = '/api/v1/senders/{sender_id}';
    assert.equal((await call('PATCH', senderPath, `/api/v1/senders/${bot.id}`, 200)).proxy, 'socks5://proxy.example:1080');
    const listed = await call('POST', '/api/v1/suppressions', '/api/v1/suppressions', 201);
    assert.equal(listed.data[0].platform, '*');
    assert.deepEqual((await call('PATCH', '/api/v1/opt_out_settings', '/api/v1/opt_out_settings', 200)).keywords, ['no more notes']);
    const covered = [
      '/api/v1/send',
      '/api/v1/whatsapp/sessions',
      sessionPath,
      '/api/v1/webhook_endpoints',
      '/api/v1/webhook_endpoints/{endpoint_id}/roll_secret',
      '/api/v1/webhook_endpoints/{endpoint_id}/test',
      '/api/v1/recipients/check',
      '/api/v1/telegram/sessions',
      tgSimulate,
      tgPassword,
      rhythmPath,
      senderPath,
      '/api/v1/suppressions',
      '/api/v1/opt_out_settings',
    ];
    const uncovered = withBody.filter(([, path, op]) => !covered.includes(path) && op.requestBody.content['application/json'].example !== undefined);
    assert.deepEqual(uncovered.map(([m, p]) => `${m} ${p}`), [], 'every example is tried here');
  });

  test('the document points readers to every guide page in docs/, and names no page that is not there', async (t) => {
    const app = await appFor(t);
    const pages = (await readdir(join(ROOT, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`).sort();
    for (const url of ['/docs/json', '/api/v1/openapi.json']) {
      const description = (await app.request({ method: 'GET', url })).json<Json>().info.description as string;
      const named = [...description.matchAll(/`(docs\/[^`]+\.md)`/g)].map((m) => m[1]!).sort();
      assert.deepEqual(named, pages, url);
      assert.match(description, /README\.md/, url);
    }
  });
});
