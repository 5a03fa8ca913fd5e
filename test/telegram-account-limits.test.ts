import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, STORAGE_LABEL, type TestApp } from './fixtures/app-harness.js';
import { FakeTelegram } from './fakes/telegram-mtproto.js';
import { BOB, eventually, JANE, JOHN, linkAccount, messageDetail, sendersOf, sendFrom, telegramApp } from './fixtures/telegram-account.js';

after(closeSharedAudio);

const API = '/api/v1';

async function senderEvents(t: TestApp, accountId: string): Promise<Array<{ at: number; data: Record<string, any> }>> {
  const rows = await t.app.services.db.kysely.selectFrom('webhook_events').select(['payload', 'type', 'created_at']).where('account_id', '=', accountId).orderBy('created_at').orderBy('id').execute();
  return rows.filter((r) => r.type === 'sender.updated').map((r) => ({ at: Number(r.created_at), data: JSON.parse(r.payload).data }));
}

const subscribe = (t: TestApp, key: string) =>
  t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key, body: { url: 'https://hooks.example.com/s', events: ['sender.updated'] } });

describe(`a linked Telegram account's rests, as Telegram imposes them (${STORAGE_LABEL})`, () => {
  it('FLOOD_WAIT_30 rests the sender 30 s (GET /senders, sender.updated); its note waits without an attempt counted; another account is not held up', async () => {
    const world = new FakeTelegram();
    world.people.push(BOB);
    const t = await telegramApp(world, 'one');
    try {
      const account = await t.createAccount();
      await subscribe(t, account.liveKey);
      const jane = await linkAccount(t, world, account.liveKey, JANE);
      const john = await linkAccount(t, world, account.liveKey, JOHN);

      world.failNext.push({ className: 'messages.SendMedia', errorMessage: 'FLOOD_WAIT_30' });
      const flooded = (await sendFrom(t, account.liveKey, jane, '@bob_builder')).json().id;
      const resting = await eventually(async () => (await sendersOf(t, account.liveKey)).find((s) => s.kind === 'telegram_account' && s.status === 'resting'), 'the sender to rest', 10_000);
      const restLeft = Date.parse(resting.until) - Date.now();
      assert.ok(restLeft > 20_000 && restLeft <= 31_000, `rests for about the 30 s Telegram said: ${restLeft} ms left`);
      assert.match(resting.reason, /FLOOD_WAIT_30/);
      const waiting = await eventually(async () => {
        const detail = await messageDetail(t, account.liveKey, flooded);
        return detail.status === 'queued' ? detail : undefined;
      }, 'the note to wait in the queue');
      assert.deepEqual(waiting.attempts.map((a: any) => [a.attempt, a.outcome]), [[0, 'handed_back']], 'a rest is not an attempt: the retry window is not used up');
      assert.ok(Date.parse(waiting.next_attempt_at) >= Date.now() + 20_000, `back after the rest: ${waiting.next_attempt_at}`);
      const events = await senderEvents(t, account.accountId);
      assert.deepEqual(events.map((e) => [e.data.kind, e.data.status]), [['telegram_account', 'resting']]);

      // The other account sends at once meanwhile.
      const started = Date.now();
      const other = (await sendFrom(t, account.liveKey, john, '@bob_builder')).json().id;
      assert.equal((await t.waitForStatus(account.liveKey, other, ['delivered', 'failed'], 20_000)).status, 'delivered');
      assert.ok(Date.now() - started < 20_000, 'not held up by the other account’s wait');
      assert.equal(world.sent.at(-1)!.from, JOHN.userId);
      assert.equal((await messageDetail(t, account.liveKey, flooded)).status, 'queued', 'the rested account’s note still waits');
    } finally {
      await t.close();
    }
  });

  it('PEER_FLOOD rests the sender (GET /senders no longer says ok, sender.updated), and a repeat rests it twice as long', async () => {
    const world = new FakeTelegram();
    world.people.push(BOB);
    const t = await telegramApp(world, 'one', { platformTuning: { telegramAccount: { sendGapMs: 10, sendJitterMs: 10, actionEveryMs: 200, peerFloodRestMs: 1_500 } } });
    try {
      const account = await t.createAccount();
      await subscribe(t, account.liveKey);
      const jane = await linkAccount(t, world, account.liveKey, JANE);
      world.failNext.push({ className: 'messages.SendMedia', errorMessage: 'PEER_FLOOD' }, { className: 'messages.SendMedia', errorMessage: 'PEER_FLOOD' });
      const id = (await sendFrom(t, account.liveKey, jane, '@bob_builder')).json().id;
      const resting = await eventually(async () => (await sendersOf(t, account.liveKey)).find((s) => s.status === 'resting'), 'the sender to rest', 10_000);
      assert.match(resting.reason, /PEER_FLOOD/);
      // After two rests the note goes: it never failed.
      assert.equal((await t.waitForStatus(account.liveKey, id, ['delivered', 'failed'], 30_000)).status, 'delivered');
      const rests = (await senderEvents(t, account.accountId)).filter((e) => e.data.status === 'resting').map((e) => Date.parse(e.data.until) - e.at);
      assert.equal(rests.length, 2, `two rests: ${rests.join(', ')}`);
      assert.ok(rests[0]! > 1_000 && rests[0]! <= 1_600, `the first rest is the first length: ${rests[0]}`);
      assert.ok(rests[1]! > 2_400 && rests[1]! <= 3_100, `the repeat rests twice as long: ${rests[1]}`);
      assert.equal((await sendersOf(t, account.liveKey))[0]!.status, 'ok');
    } finally {
      await t.close();
    }
  });
});
