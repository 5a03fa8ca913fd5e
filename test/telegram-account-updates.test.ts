import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, STORAGE_LABEL, withRestartableStorage, type TestApp } from './fixtures/app-harness.js';
import { FakeTelegram } from './fakes/telegram-mtproto.js';
import { BOB, eventually, JANE, linkAccount, messageDetail, sendFrom, telegramApp } from './fixtures/telegram-account.js';

after(closeSharedAudio);

/** A note from Jane's linked account to Bob, delivered; its id and the message id Telegram gave it. */
async function delivered(t: TestApp, world: FakeTelegram, key: string, sessionId: string): Promise<{ id: string; telegramId: number }> {
  const accepted = await sendFrom(t, key, sessionId, '@bob_builder');
  assert.equal(accepted.statusCode, 202, accepted.body);
  const id = accepted.json().id;
  assert.equal((await t.waitForStatus(key, id, ['delivered', 'failed'])).status, 'delivered');
  return { id, telegramId: world.sent.at(-1)!.messageId };
}

/** While nobody listens, Bob writes back, reads the chat and plays the note; the second Telegram gives the play. */
async function bobAnswersUnheard(world: FakeTelegram, telegramId: number): Promise<number> {
  world.reply(BOB.userId, JANE.userId, 'Got it while you were away');
  world.read(BOB.userId, JANE.userId, telegramId);
  const playedAt = Math.floor(world.serverNow() / 1000) * 1000;
  world.played(JANE.userId, telegramId);
  return playedAt;
}

async function heardAll(t: TestApp, key: string, id: string): Promise<Record<string, any>> {
  return eventually(async () => {
    const detail = await messageDetail(t, key, id);
    return detail.replies?.length === 1 && detail.receipts.read_at && detail.receipts.played_at ? detail : undefined;
  }, 'the reply, the read and the play');
}

describe(`a linked Telegram account hears what happened while it was not listening (${STORAGE_LABEL})`, () => {
  it('a reply, a read and a play while the connection was down arrive after it reconnects (updates.getDifference, paged by slices); the play keeps its own time', async () => {
    const world = new FakeTelegram();
    world.people.push(BOB);
    world.differenceSliceSize = 1;
    const t = await telegramApp(world, 'one');
    try {
      const account = await t.createAccount();
      await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: account.liveKey, body: { url: 'https://hooks.example.com/t', events: ['voice_note.replied'] } });
      const sessionId = await linkAccount(t, world, account.liveKey);
      const note = await delivered(t, world, account.liveKey, sessionId);

      world.dropConnections(JANE.userId);
      const playedAt = await bobAnswersUnheard(world, note.telegramId);
      await new Promise((r) => setTimeout(r, 1_200));
      assert.deepEqual((await messageDetail(t, account.liveKey, note.id)).replies, [], 'nothing is pushed while the connection is down');
      const asked = world.requests.filter((r) => r.className === 'updates.GetDifference').length;

      world.reconnect(JANE.userId);
      const detail = await heardAll(t, account.liveKey, note.id);
      assert.deepEqual(
        detail.replies.map((r: any) => [r.type, r.text]),
        [['text', 'Got it while you were away']],
      );
      assert.equal(detail.receipts.played_at, new Date(playedAt).toISOString(), 'played when Telegram says it was, not when it was heard');
      assert.ok(world.requests.filter((r) => r.className === 'updates.GetDifference').length - asked >= 3, 'three slices of one update each');
      const replied = (await t.app.services.db.kysely.selectFrom('webhook_events').select('type').execute()).filter((e) => e.type === 'voice_note.replied');
      assert.equal(replied.length, 1, 'voice_note.replied once');
    } finally {
      await t.close();
    }
  });

  it('what happened while no process held the account arrives after a restart, from the update state kept with the session', async () => {
    const world = new FakeTelegram();
    world.people.push(BOB);
    await withRestartableStorage(async (reuse) => {
      let note: { id: string; telegramId: number };
      let key: string;
      const one = await telegramApp(world, 'one', { reuse });
      try {
        const account = await one.createAccount();
        key = account.liveKey;
        const sessionId = await linkAccount(one, world, key);
        note = await delivered(one, world, key, sessionId);
      } finally {
        await one.close();
      }
      const playedAt = await bobAnswersUnheard(world, note.telegramId);
      const two = await telegramApp(world, 'two', { reuse });
      try {
        const detail = await heardAll(two, key, note.id);
        assert.deepEqual(detail.replies.map((r: any) => r.text), ['Got it while you were away']);
        assert.equal(detail.receipts.played_at, new Date(playedAt).toISOString());
        assert.ok(world.requests.some((r) => r.instance === 'two' && r.className === 'updates.GetDifference'), 'the new holder asked for the difference');
      } finally {
        await two.close();
      }
    });
  });

  it('after 15 minutes without an update the difference is asked (Telegram can stop pushing without a word); an injected clock, no long sleep', async () => {
    const world = new FakeTelegram();
    world.people.push(BOB);
    let skew = 0;
    const t = await telegramApp(world, 'one', { now: () => Date.now() + skew, telegramAccounts: { idleCheckMs: 50 } });
    try {
      const account = await t.createAccount();
      const sessionId = await linkAccount(t, world, account.liveKey);
      const note = await delivered(t, world, account.liveKey, sessionId);
      world.silence(JANE.userId);
      await bobAnswersUnheard(world, note.telegramId);
      skew = 14 * 60_000;
      await new Promise((r) => setTimeout(r, 400));
      assert.deepEqual((await messageDetail(t, account.liveKey, note.id)).replies, [], 'not asked before 15 minutes of silence');
      skew = 15 * 60_000 + 1_000;
      await heardAll(t, account.liveKey, note.id);
    } finally {
      await t.close();
    }
  });
});
