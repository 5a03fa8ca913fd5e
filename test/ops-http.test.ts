import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import pino from 'pino';
import { assertErrorEnvelope, closeSharedAudio, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN } from './fixtures/app-harness.js';

/* What a newcomer meets first: the bare address, a private audio URL, a service behind a reverse proxy. */

after(async () => {
  await closeSharedAudio();
});

describe(`GET / (${STORAGE_LABEL})`, () => {
  test('redirects to the dashboard instead of a bare 404', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const res = await t.request({ method: 'GET', url: '/' });
      assert.equal(res.statusCode, 302);
      assert.equal(res.headers.location, '/dashboard');
      // The target exists: a signed-out visitor is sent on to the sign-in form.
      const dashboard = await t.request({ method: 'GET', url: '/dashboard' });
      assert.equal(dashboard.statusCode, 303);
      assert.equal(dashboard.headers.location, '/dashboard/sign-in');
      assert.equal((await t.request({ method: 'GET', url: '/dashboard/sign-in' })).statusCode, 200);
    } finally {
      await t.close();
    }
  });
});

describe(`POST /send with a private audio URL (${STORAGE_LABEL})`, () => {
  test('the 422 says how to allow one in development', async () => {
    const t = await startTestApp({ worker: false, env: { AUDIO_ALLOW_PRIVATE_URLS: 'false' } });
    try {
      const { testKey } = await t.createAccount();
      const res = await t.send(testKey, { platform: 'telegram', recipient: '123456789', audio_url: 'http://127.0.0.1:8080/a.ogg', session: { bot_token: TELEGRAM_TOKEN } });
      const error = assertErrorEnvelope(res, 422, 'invalid_parameter');
      assert.equal(error.details.field, 'audio_url');
      assert.match(error.message, /ALLOW_PRIVATE_URLS=true/);
      const bad = await t.send(testKey, { platform: 'telegram', recipient: '123456789', audio_url: 'ftp://example.com/a.ogg', session: { bot_token: TELEGRAM_TOKEN } });
      assert.doesNotMatch(assertErrorEnvelope(bad, 422, 'invalid_parameter').message, /ALLOW_PRIVATE_URLS/, 'only where it is the way out');
    } finally {
      await t.close();
    }
  });
});

/** Remaining requests of the per-IP bucket after one unauthenticated request that appears to come through a proxy. */
async function remainingFor(t: Awaited<ReturnType<typeof startTestApp>>, forwardedFor: string): Promise<number> {
  const res = await t.request({ method: 'GET', url: '/api/v1/usage', remoteAddress: '10.0.0.5', headers: { 'x-forwarded-for': forwardedFor } });
  assert.equal(res.statusCode, 401);
  return Number(res.headers['x-ratelimit-remaining']);
}

describe(`TRUST_PROXY (${STORAGE_LABEL})`, () => {
  test('unset: X-Forwarded-For is ignored; every request from the proxy shares its bucket', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await remainingFor(t, '203.0.113.1');
      const b = await remainingFor(t, '203.0.113.2');
      assert.equal(b, a - 1, 'one bucket: the proxy\'s address');
    } finally {
      await t.close();
    }
  });

  test('set to the proxy\'s range: the client address comes from X-Forwarded-For, in the per-IP bucket and in the logs', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const t = await startTestApp({ worker: false, env: { TRUST_PROXY: '10.0.0.0/8', LOG_LEVEL: 'info' }, logger: pino({ level: 'info' }, sink) });
    try {
      const a1 = await remainingFor(t, '203.0.113.1');
      const a2 = await remainingFor(t, '203.0.113.1');
      const b1 = await remainingFor(t, '203.0.113.2');
      assert.equal(a2, a1 - 1, 'the same client draws from its own bucket');
      assert.equal(b1, a1, 'another client has a bucket of its own');
      // A client cannot pose as another through a proxy that is not trusted.
      const direct = await t.request({ method: 'GET', url: '/api/v1/usage', remoteAddress: '198.51.100.9', headers: { 'x-forwarded-for': '203.0.113.1' } });
      assert.equal(Number(direct.headers['x-ratelimit-remaining']), a1, 'an untrusted hop is the client itself');
      const logged = lines.map((line) => JSON.parse(line) as { req?: { remoteAddress?: string } }).filter((entry) => entry.req?.remoteAddress);
      assert.ok(logged.some((entry) => entry.req!.remoteAddress === '203.0.113.2'), `logs carry the real client address: ${lines.join('')}`);
    } finally {
      await t.close();
    }
  });
});
