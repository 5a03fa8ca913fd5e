/**
 * Cancel gives a note back to the monthly quota only when no attempt of it reached the platform: a note
 * waiting for a retry after the platform was called (a timeout, any answer) may have been delivered.
 */
import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, type TestAccount, type TestApp } from './fixtures/app-harness.js';
import { startTelegramApi, type TelegramFake } from './fakes/telegram-api.js';
import { eventually } from './fixtures/eventually.js';

after(closeSharedAudio);

describe(`cancel and the monthly quota (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let fake: TelegramFake;
  let account: TestAccount;

  before(async () => {
    fake = await startTelegramApi();
    t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    account = await t.createAccount({ plan: 'growth' });
  });
  after(async () => {
    await t?.close();
    await fake?.close();
  });

  const usage = async (): Promise<{ sent: number; remaining: number }> => {
    const res = await t.request({ method: 'GET', url: '/api/v1/usage', key: account.liveKey });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    return { sent: body.usage.total_sent, remaining: body.limits.remaining };
  };
  const statusOf = async (id: string): Promise<string> => (await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: account.liveKey })).json().status;
  /** Cancels once the note waits for its retry (a retry that has just begun answers 409: try again when it waits again). */
  const cancelWhenQueued = async (id: string): Promise<void> => {
    await eventually(async () => {
      if ((await statusOf(id)) !== 'queued') return undefined;
      const res = await t.request({ method: 'POST', url: `/api/v1/messages/${id}/cancel`, key: account.liveKey });
      if (res.statusCode === 409) return undefined;
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().status, 'canceled');
      return true;
    }, 'the note to be canceled while it waits for its retry', 20_000);
  };

  it('a note waiting for a retry after the platform was called stays counted when canceled', async () => {
    const chat = '370000001';
    fake.failForChat(chat, { kind: 'rate_limited', retryAfter: 600 });
    const before = await usage();
    const res = await t.send(account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: chat });
    assert.equal(res.statusCode, 202, res.body);
    const id = res.json().id;
    await fake.waitForCalls(1, (c) => c.method.toLowerCase() === 'sendvoice' && c.chatId === chat, 20_000);
    await cancelWhenQueued(id);
    assert.equal(await statusOf(id), 'canceled');
    assert.deepEqual(await usage(), { sent: before.sent + 1, remaining: before.remaining - 1 }, 'the note may be out: still counted');
  });

  it('a note whose attempts never reached the platform (the audio host failed) is given back', async () => {
    t.audio.route('/down.ogg', { kind: 'status', status: 503 });
    const before = await usage();
    // Another bot: the first test's retry_after rests its bot, and a resting bot's notes wait without an attempt.
    const otherBot = { bot_token: '987654321:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawR' };
    const res = await t.send(account.liveKey, { ...defaultSendBody('telegram', t.audio.url('/down.ogg')), recipient: '370000002', session: otherBot });
    assert.equal(res.statusCode, 202, res.body);
    const id = res.json().id;
    // After a first attempt (counted, like every attempt): only that the platform was never called gives it back.
    await eventually(async () => {
      const detail = (await t.request({ method: 'GET', url: `/api/v1/messages/${id}`, key: account.liveKey })).json();
      return detail.attempt_count >= 1 && detail.attempts.length >= 1 ? true : undefined;
    }, 'a first attempt', 20_000);
    await cancelWhenQueued(id);
    assert.deepEqual(await usage(), before, 'given back');
    assert.equal(fake.calls.filter((c) => c.chatId === '370000002').length, 0, 'the platform never saw it');
  });
});
