/**
 * A body nested 10,000 deep (`{"a":{"a":…}}`, 60 KB) used to overflow the call stack in the NUL
 * guard's walk: a 500, logged as an error, on the API and on the dashboard's sign-in (no key needed).
 */
import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { assertErrorEnvelope, closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp } from './fixtures/app-harness.js';
import { captureLogs } from './fixtures/log-capture.js';

after(closeSharedAudio);

function nested(depth: number): string {
  return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

describe(`deeply nested JSON bodies (${STORAGE_LABEL})`, () => {
  test('10,000 levels: 400 invalid_request in the envelope on the API and the sign-in form, nothing logged as an error', async (t) => {
    const { lines, logger } = captureLogs();
    const app = await startTestApp({ worker: false, logger });
    t.after(() => app.close());
    const account = await app.createAccount();
    const deep = nested(10_000);
    assert.ok(deep.length >= 60_000);
    for (const url of ['/api/v1/send', '/api/v1/webhook_endpoints']) {
      const res = await app.request({ method: 'POST', url, key: account.testKey, payload: deep, headers: { 'content-type': 'application/json' } });
      const error = assertErrorEnvelope(res, 400, 'invalid_request');
      assert.match(error.message, /nested deeper than 32 levels/);
    }
    // Inside a field the API knows, too.
    const inSession = `{"platform":"telegram","recipient":"1","audio_url":"https://example.com/a.ogg","session":${nested(5_000)}}`;
    assertErrorEnvelope(await app.request({ method: 'POST', url: '/api/v1/send', key: account.testKey, payload: inSession, headers: { 'content-type': 'application/json' } }), 400, 'invalid_request');
    // No key at all: refused before anything walks it (401), never a 500.
    const anonymous = await app.request({ method: 'POST', url: '/api/v1/send', payload: deep, headers: { 'content-type': 'application/json' } });
    assert.ok(anonymous.statusCode === 400 || anonymous.statusCode === 401, `${anonymous.statusCode} ${anonymous.body.slice(0, 200)}`);
    const signIn = await app.request({ method: 'POST', url: '/dashboard/sign-in', payload: deep, headers: { 'content-type': 'application/json' } });
    assert.equal(signIn.statusCode, 400, signIn.body.slice(0, 200));
    assert.deepEqual(lines.filter((l) => Number(l.level) >= 50).map((l) => l.msg), [], 'no error logged');
    // A body of ordinary depth still goes through.
    assert.equal((await app.send(account.testKey, defaultSendBody('telegram', app.voiceUrl))).statusCode, 202);
  });

  test('32 levels are taken as far as depth goes, 33 are not', async (t) => {
    const app = await startTestApp({ worker: false });
    t.after(() => app.close());
    const account = await app.createAccount();
    // The body is the first level, so a `session` holding 31 more is 32 in all (then refused for its missing bot_token).
    const at = (levels: number): string => `{"platform":"telegram","recipient":"1","audio_url":"https://example.com/a.ogg","session":${nested(levels - 1)}}`;
    const ok = assertErrorEnvelope(await app.request({ method: 'POST', url: '/api/v1/send', key: account.testKey, payload: at(32), headers: { 'content-type': 'application/json' } }), 422, 'invalid_parameter');
    assert.equal(ok.details.field, 'session.bot_token');
    const deep = assertErrorEnvelope(await app.request({ method: 'POST', url: '/api/v1/send', key: account.testKey, payload: at(33), headers: { 'content-type': 'application/json' } }), 400, 'invalid_request');
    assert.match(deep.message, /nested deeper than 32 levels/);
  });

  test('arrays count as levels too: 40 arrays deep inside session are refused', async (t) => {
    const app = await startTestApp({ worker: false });
    t.after(() => app.close());
    const account = await app.createAccount();
    const arrays = `${'['.repeat(40)}1${']'.repeat(40)}`;
    const body = `{"platform":"telegram","recipient":"1","audio_url":"https://example.com/a.ogg","session":${arrays}}`;
    const error = assertErrorEnvelope(await app.request({ method: 'POST', url: '/api/v1/send', key: account.testKey, payload: body, headers: { 'content-type': 'application/json' } }), 400, 'invalid_request');
    assert.match(error.message, /nested deeper than 32 levels/);
    // Arrays and objects mixed count alike.
    const mixed = `{"platform":"telegram","recipient":"1","audio_url":"https://example.com/a.ogg","session":${'[{"a":'.repeat(20)}1${'}]'.repeat(20)}}`;
    assert.match(assertErrorEnvelope(await app.request({ method: 'POST', url: '/api/v1/send', key: account.testKey, payload: mixed, headers: { 'content-type': 'application/json' } }), 400, 'invalid_request').message, /nested deeper than 32 levels/);
  });
});
