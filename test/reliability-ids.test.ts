import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { closeSharedAudio, connectedSandboxSession, defaultSendBody, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';
import { callWithForeignIds, type Owned } from './reliability/cross-tenant.js';

/**
 * The short version of RELIABILITY.md's R6: every operation of the served OpenAPI document that takes
 * an id answers 404 to another account's ids and to the other environment's, and changes nothing.
 */

after(closeSharedAudio);

async function resourcesOf(app: TestApp, key: string, env: 'test' | 'live', label: string): Promise<Owned> {
  const ids: Record<string, string[]> = { message_id: [], session_id: [], endpoint_id: [], delivery_id: [] };
  const sent = await app.send(key, defaultSendBody('telegram', app.voiceUrl));
  assert.equal(sent.statusCode, 202, sent.body);
  ids.message_id!.push(sent.json().id);
  if (env === 'test') ids.session_id!.push(await connectedSandboxSession(app, key));
  const endpoint = await app.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key, body: { url: 'https://example.com/hooks/voicenote' } });
  if (endpoint.statusCode === 201 || endpoint.statusCode === 200) {
    const endpointId = endpoint.json().id as string;
    ids.endpoint_id!.push(endpointId);
    await app.request({ method: 'POST', url: `/api/v1/webhook_endpoints/${endpointId}/test`, key, body: {} });
    const deliveries = await app.request({ method: 'GET', url: `/api/v1/webhook_endpoints/${endpointId}/deliveries`, key });
    const first = deliveries.statusCode === 200 ? (deliveries.json().data?.[0]?.id as string | undefined) : undefined;
    if (first) ids.delivery_id!.push(first);
  }
  return { label, key, ids };
}

describe(`R6: ids of another account or environment (${STORAGE_LABEL})`, () => {
  test('every id-taking operation of the OpenAPI document answers 404 and changes nothing', async (t) => {
    const app = await startTestApp({ worker: false, env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    t.after(() => app.close());
    const a = await app.createAccount({ plan: 'enterprise' });
    const b = await app.createAccount({ plan: 'enterprise' });
    const aTest = await resourcesOf(app, a.testKey, 'test', 'A/test');
    const aLive = await resourcesOf(app, a.liveKey, 'live', 'A/live');
    const doc = (await app.request({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    const operations = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([template, ops]) =>
      Object.keys(ops).map((method) => ({ method: method.toUpperCase(), template })),
    );
    const caller = {
      request: async (method: string, url: string, key: string, body?: unknown) => {
        const res = await app.request({ method: method as 'GET', url, key, ...(body !== undefined ? { body } : {}) });
        return { status: res.statusCode, body: res.body };
      },
    };
    const results = [
      await callWithForeignIds(caller, operations, aTest, [
        { label: 'B/test', key: b.testKey },
        { label: 'B/live', key: b.liveKey },
        { label: 'A/live', key: a.liveKey },
      ]),
      await callWithForeignIds(caller, operations, aLive, [
        { label: 'B/test', key: b.testKey },
        { label: 'B/live', key: b.liveKey },
        { label: 'A/test', key: a.testKey },
      ]),
    ];
    const covered = new Set(results.flatMap((r) => r.operations));
    assert.ok(covered.size >= 5, `id-taking operations covered: ${[...covered].join(', ')}`);
    assert.deepEqual(results.flatMap((r) => r.others), []);
    assert.ok(results.every((r) => r.calls === r.notFound && r.calls > 0));

    // Nothing was changed by those calls: the owner still sees every resource as it was.
    for (const owned of [aTest, aLive]) {
      for (const id of owned.ids.message_id!) assert.equal((await app.request({ method: 'GET', url: `/api/v1/status/${id}`, key: owned.key })).statusCode, 200);
      for (const id of owned.ids.session_id!) {
        const s = await app.request({ method: 'GET', url: `/api/v1/whatsapp/sessions/${id}`, key: owned.key });
        assert.equal(s.statusCode, 200);
        assert.equal(s.json().status, 'connected', 'a foreign simulate/delete did not reach the session');
      }
      for (const id of owned.ids.endpoint_id!) assert.equal((await app.request({ method: 'GET', url: `/api/v1/webhook_endpoints/${id}`, key: owned.key })).statusCode, 200);
    }
  });
});
