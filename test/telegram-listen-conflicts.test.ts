import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, type TestApp } from './fixtures/app-harness.js';
import { startTelegramApi, type TelegramFake } from './fakes/telegram-api.js';
import { eventually } from './fixtures/telegram-account.js';

/** A listened bot's poller meets another program polling the same bot, and the Bot API's flood control. */

const LISTEN = { listenScanMs: 100, listenPollSeconds: 1 };

after(closeSharedAudio);

const getUpdatesAt = (fake: TelegramFake) => fake.calls.filter((c) => c.method.toLowerCase() === 'getupdates').map((c) => c.receivedAt);

async function listenedNote(t: TestApp, key: string, recipient: string): Promise<string> {
  const res = await t.send(key, { ...defaultSendBody('telegram', t.voiceUrl), recipient, listen: true });
  assert.equal(res.statusCode, 202, res.body);
  await t.waitForStatus(key, res.json().id, ['delivered']);
  return res.json().id;
}

describe(`Telegram bot polling as the Bot API answers it (${STORAGE_LABEL})`, () => {
  it('another program polling the same bot: after a few 409 "terminated by other getUpdates request" in a row, polling stops and the listening state says why', async () => {
    const fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, platformTuning: { telegram: LISTEN } });
    // The other program: a bot instance elsewhere that polls again as soon as its poll ends.
    const rival = new AbortController();
    const rivalLoop = (async () => {
      while (!rival.signal.aborted) {
        await fetch(`${fake.apiRoot}/bot${TELEGRAM_TOKEN}/getUpdates`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ timeout: 1 }),
          signal: rival.signal,
        }).then((r) => r.arrayBuffer(), () => undefined);
      }
    })();
    try {
      const account = await t.createAccount();
      const note = await listenedNote(t, account.liveKey, '558001');
      const listening = await eventually(async () => {
        const shown = (await t.request({ method: 'GET', url: `/api/v1/messages/${note}`, key: account.liveKey })).json().listening;
        return shown?.status === 'refused' ? shown : undefined;
      }, 'polling to stop', 30_000);
      assert.match(listening.reason, /another program polls this bot.*409/);
      rival.abort();
      await rivalLoop;
      await new Promise((r) => setTimeout(r, 200));
      const polls = getUpdatesAt(fake).length;
      await new Promise((r) => setTimeout(r, 1_500));
      assert.equal(getUpdatesAt(fake).length, polls, 'no more getUpdates from the service');
    } finally {
      rival.abort();
      await rivalLoop;
      await t.close();
      await fake.close();
    }
  });

  it('429 on getUpdates: the next poll waits the retry_after Telegram gives', async () => {
    const fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, platformTuning: { telegram: LISTEN } });
    try {
      const account = await t.createAccount();
      fake.limitGetUpdates(TELEGRAM_TOKEN, 5);
      await listenedNote(t, account.liveKey, '558002');
      const calls = await eventually(() => (getUpdatesAt(fake).length >= 2 ? getUpdatesAt(fake) : undefined), 'a second poll', 20_000);
      const gap = calls[1]! - calls[0]!;
      assert.ok(gap >= 4_900, `waited the 5 s of retry_after: ${gap} ms`);
    } finally {
      await t.close();
      await fake.close();
    }
  });
});
