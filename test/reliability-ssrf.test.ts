import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { closeAll } from './fixtures/close-all.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN } from './fixtures/app-harness.js';
import { ssrfTricks, startCanary } from './reliability/ssrf-corpus.js';

/**
 * The short version of RELIABILITY.md's R5, through the API: every spelling of an internal address in
 * `audio_url` is refused — at the door (422 invalid_parameter) or when fetched (failed,
 * audio_fetch_blocked) — and a canary listening on loopback never sees a connection. (Redirects and
 * hostile DNS answers are tested hop by hop in audio-ssrf.test.ts.)
 */

after(closeSharedAudio);

describe(`R5: SSRF corpus through POST /send (${STORAGE_LABEL})`, () => {
  test('every trick is refused and the loopback canary is never reached', async (t) => {
    const canary = await startCanary('127.0.0.1');
    const canary6 = await startCanary('::1');
    t.after(() => closeAll(canary, canary6));
    assert.ok(canary);
    const app = await startTestApp({ env: { AUDIO_ALLOW_PRIVATE_URLS: 'false' } });
    t.after(() => app.close());
    const acct = await app.createAccount({ plan: 'enterprise' });
    const tricks = ssrfTricks(canary.port, canary6?.port ?? canary.port);
    assert.ok(tricks.length >= 30);
    const outcomes: string[] = [];
    const accepted: { url: string; id: string }[] = [];
    for (const url of tricks) {
      const res = await app.send(acct.testKey, { platform: 'telegram', recipient: '123456789', audio_url: url, session: { bot_token: TELEGRAM_TOKEN } });
      if (res.statusCode === 422 && res.json().error.code === 'invalid_parameter') continue;
      if (res.statusCode !== 202) {
        outcomes.push(`${url}: ${res.statusCode} ${res.body}`);
        continue;
      }
      accepted.push({ url, id: res.json().id });
    }
    for (const { url, id } of accepted) {
      const final = await app.waitForStatus(acct.testKey, id, ['delivered', 'failed'], 60_000);
      if (final.status !== 'failed' || final.error?.code !== 'audio_fetch_blocked') outcomes.push(`${url}: ${final.status} ${JSON.stringify(final.error)}`);
    }
    assert.deepEqual(outcomes, [], 'tricks that were not refused');
    assert.equal(canary.connections(), 0, 'the IPv4 canary was reached');
    assert.equal(canary6?.connections() ?? 0, 0, 'the IPv6 canary was reached');
  });
});
