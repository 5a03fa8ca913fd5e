/**
 * Telegram's flood control says how long to wait in `parameters.retry_after`, in seconds: the retry
 * comes no sooner. (Read as milliseconds, it would come at once, and be refused again.)
 */
import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { STORAGE_LABEL, closeSharedAudio, defaultSendBody, startTestApp } from './fixtures/app-harness.js';
import { startTelegramApi } from './fakes/telegram-api.js';

after(closeSharedAudio);

describe(`telegram retry_after (${STORAGE_LABEL})`, () => {
  it('a 429 with retry_after 2 is tried again no sooner than 2 s later, then delivered', async (t) => {
    const fake = await startTelegramApi();
    t.after(() => fake.close());
    const app = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    t.after(() => app.close());
    const chat = '330000001';
    fake.failForChat(chat, { kind: 'rate_limited', retryAfter: 2 }, 1);
    const account = await app.createAccount();
    const res = await app.send(account.liveKey, { ...defaultSendBody('telegram', app.voiceUrl), recipient: chat });
    assert.equal(res.statusCode, 202, res.body);
    const status = await app.waitForStatus(account.liveKey, res.json().id, ['delivered', 'failed'], 30_000);
    assert.equal(status.status, 'delivered', JSON.stringify(status));

    const calls = fake.callsForChat(chat);
    assert.deepEqual(calls.map((c) => c.reply.status), [429, 200]);
    const waited = calls[1]!.receivedAt - calls[0]!.receivedAt;
    assert.ok(waited >= 2_000, `the retry came ${waited} ms after the 429 that said retry_after 2 (seconds)`);
  });
});
