/**
 * The numbers docs/sending.md promises for sending like a person, written out here rather than computed
 * from the code's own constants (a test that compares with the constant cannot fail when it changes):
 * the default warm-ups day by day (rounded down on the days between the first and the last), and the
 * recording indicator's 30 s at most.
 */
import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { allowanceOn, DAY_MS, defaultRhythm, indicatorMs, utcDay } from '../src/core/rhythm.js';
import { saveRhythm } from '../src/store/rhythm.js';
import { closeSharedAudio, defaultSendBody, startTestApp, STORAGE_LABEL } from './fixtures/app-harness.js';
import { startTelegramApi, type TelegramCall } from './fakes/telegram-api.js';
import { eventually } from './fixtures/eventually.js';

after(closeSharedAudio);

const day0 = utcDay(Date.UTC(2026, 10, 20, 13));
const week = (rhythm: ReturnType<typeof defaultRhythm>): Array<number | null> => [0, 1, 2, 3, 4, 5, 6, 7, 8, 30].map((d) => allowanceOn(rhythm, day0, day0 + d * DAY_MS));

describe('the README\'s numbers for sending like a person', () => {
  it('WhatsApp\'s default warm-up: 5, 6, 7, 9, 10, 12, 13 on its first seven days, then 15', () => {
    assert.deepEqual(week(defaultRhythm('whatsapp')), [5, 6, 7, 9, 10, 12, 13, 15, 15, 15]);
  });

  it('LinkedIn\'s default warm-up: 20, 31, 42, 54, 65, 77, 88 on its first seven days, then 100', () => {
    assert.deepEqual(week(defaultRhythm('linkedin')), [20, 31, 42, 54, 65, 77, 88, 100, 100, 100]);
  });

  it('the recording indicator shows for at most 30 s, however long the note', () => {
    assert.equal(indicatorMs(25, () => 1), 30_000);
    assert.equal(indicatorMs(40, () => 0), 30_000);
    assert.equal(indicatorMs(120, () => 0.5), 30_000);
    assert.equal(indicatorMs(600, () => 1), 30_000);
    // Below the cap: the note's length ±20 %.
    assert.equal(indicatorMs(20, () => 1), 24_000);
  });
});

describe(`a sender on an intermediate day of its warm-up (${STORAGE_LABEL})`, () => {
  it('the fourth day of a 5-to-15 warm-up over 7 days lets 9 notes go (rounded down), not 10', async () => {
    const fake = await startTelegramApi();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    try {
      const account = await t.createAccount({ plan: 'growth' });
      await saveRhythm(t.app.services.db.kysely, account.accountId, 'telegram', { dailyCap: 15, warmup: { start: 5, days: 7 } });
      const isVoice = (c: TelegramCall): boolean => c.method.toLowerCase() === 'sendvoice' && c.reply.status === 200;
      const send = async (i: number): Promise<string> => {
        const res = await t.send(account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: `36000000${i}` });
        assert.equal(res.statusCode, 202, res.body);
        return res.json().id;
      };
      // The first note makes the bot a sender, first seen today; it is then made three days older.
      const first = await send(0);
      assert.equal((await t.waitForStatus(account.liveKey, first, ['delivered', 'failed'])).status, 'delivered');
      const moved = await t.app.services.db.kysely.updateTable('senders').set((eb) => ({ first_day: eb('first_day', '-', 3 * DAY_MS) })).executeTakeFirst();
      assert.equal(Number(moved.numUpdatedRows), 1);
      const ids = [first];
      for (let i = 1; i < 11; i++) ids.push(await send(i));
      const seen = await eventually(async () => {
        const all = await Promise.all(ids.map(async (id) => (await t.request({ method: 'GET', url: `/api/v1/messages/${id}`, key: account.liveKey })).json()));
        const settled = all.filter((d) => d.status === 'delivered' || d.waiting_for === 'daily_cap');
        return settled.length === ids.length ? all : undefined;
      }, 'every note delivered or waiting', 30_000);
      assert.equal(seen.filter((d) => d.status === 'delivered').length, 9, 'day 4 of the warm-up: 5 + ⌊10 × 3 / 7⌋ = 9');
      assert.equal(seen.filter((d) => d.waiting_for === 'daily_cap').length, 2);
      assert.equal(fake.calls.filter(isVoice).length, 9, 'the platform saw nine notes');
    } finally {
      await t.close();
      await fake.close();
    }
  });
});
