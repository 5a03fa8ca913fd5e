import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import fc from 'fast-check';
import { closeSharedAudio, connectedSandboxSession, defaultSendBody, STORAGE_LABEL, startTestApp } from './fixtures/app-harness.js';
import { fuzzRequest } from './reliability/api-arbitraries.js';
import { createResponseChecker } from './reliability/openapi-check.js';

/**
 * The short version of RELIABILITY.md's R4 (bench/reliability/r4-api-fuzz.ts runs 10,000): generated
 * and mutated requests over every endpoint, each answer judged against the OpenAPI document the
 * service itself serves. None may be a 5xx; every error is the documented envelope; every status is
 * one its operation documents, with a body that matches its schema.
 */

const RUNS = Number(process.env.RELIABILITY_FUZZ_RUNS ?? 300);

after(closeSharedAudio);

describe(`R4: generated requests against the served OpenAPI document (${STORAGE_LABEL})`, () => {
  test(`${RUNS} generated requests: no 5xx, the envelope on every error, every answer as documented`, async (t) => {
    const app = await startTestApp({ worker: false, env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    t.after(() => app.close());
    const acct = await app.createAccount({ plan: 'enterprise', rateLimit: 1_000_000, quota: 1_000_000 });
    const sessionId = await connectedSandboxSession(app, acct.testKey);
    const sent = await app.send(acct.testKey, defaultSendBody('telegram', app.voiceUrl));
    assert.equal(sent.statusCode, 202, sent.body);
    const doc = (await app.request({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    const checker = createResponseChecker(doc);
    assert.ok(checker.operations.length >= 8, 'the document lists the endpoints');

    const ctx = { operations: checker.operations, keys: { test: acct.testKey, live: acct.liveKey }, ids: [sessionId, sent.json().id as string], audioUrl: app.voiceUrl };
    await fc.assert(
      fc.asyncProperty(fuzzRequest(ctx), async (req) => {
        const res = await app.app.server.app.inject({
          method: req.method as 'GET',
          url: req.url,
          headers: req.headers,
          ...(req.body !== undefined ? { payload: req.body } : {}),
        });
        const problems = checker.check({ method: req.method, url: req.url, status: res.statusCode, contentType: res.headers['content-type'] as string | undefined, body: res.body });
        if (typeof res.headers['x-request-id'] !== 'string') problems.push('no X-Request-Id');
        assert.deepEqual(problems, [], `${req.method} ${req.url.slice(0, 200)} → ${res.statusCode} ${res.body.slice(0, 300)}`);
      }),
      { numRuns: RUNS },
    );
  });
});
