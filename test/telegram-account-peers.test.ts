import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, STORAGE_LABEL, withRestartableStorage } from './fixtures/app-harness.js';
import { FakeTelegram } from './fakes/telegram-mtproto.js';
import { BOB, CAROL, linkAccount, sendFrom, telegramApp } from './fixtures/telegram-account.js';

after(closeSharedAudio);

const LOOK_UPS = new Set(['contacts.ResolveUsername', 'contacts.ResolvePhone', 'messages.GetDialogs', 'contacts.ImportContacts']);

describe(`a linked Telegram account resolves each recipient once (${STORAGE_LABEL})`, () => {
  it('a second note to the same recipient, by username or by number, with the recording indicator, and after a restart, makes no look-up call', async () => {
    const world = new FakeTelegram();
    world.people.push(BOB, CAROL);
    const lookUps = () => world.requests.filter((r) => LOOK_UPS.has(r.className)).map((r) => r.className);
    await withRestartableStorage(async (reuse) => {
      let key: string;
      let sessionId: string;
      const one = await telegramApp(world, 'one', { reuse });
      try {
        const account = await one.createAccount();
        key = account.liveKey;
        sessionId = await linkAccount(one, world, key);
        for (const [recipient, extra] of [
          ['@bob_builder', {}],
          ['@bob_builder', { recording_indicator: true }],
          ['33612345678', { recording_indicator: true }],
          ['33612345678', {}],
        ] as const) {
          const id = (await sendFrom(one, key, sessionId, recipient, extra)).json().id;
          assert.equal((await one.waitForStatus(key, id, ['delivered', 'failed'], 30_000)).status, 'delivered');
        }
        assert.deepEqual(lookUps(), ['contacts.ResolveUsername', 'contacts.ResolvePhone'], 'one look-up per recipient');
      } finally {
        await one.close();
      }
      const two = await telegramApp(world, 'two', { reuse });
      try {
        const id = (await sendFrom(two, key, sessionId, '@bob_builder')).json().id;
        assert.equal((await two.waitForStatus(key, id, ['delivered', 'failed'], 30_000)).status, 'delivered');
        assert.equal(world.sent.at(-1)!.to, BOB.userId);
        assert.deepEqual(lookUps(), ['contacts.ResolveUsername', 'contacts.ResolvePhone'], 'kept with the session: none after a restart either');
      } finally {
        await two.close();
      }
    });
  });
});
