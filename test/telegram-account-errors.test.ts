import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, STORAGE_LABEL } from './fixtures/app-harness.js';
import { FakeTelegram } from './fakes/telegram-mtproto.js';
import { BOB, eventually, JANE, linkAccount, messageDetail, sendersOf, sendFrom, telegramApp } from './fixtures/telegram-account.js';

after(closeSharedAudio);

const API = '/api/v1';

describe(`Telegram answers that would loop for an hour end at once (${STORAGE_LABEL})`, () => {
  it('ALLOW_PAYMENT_REQUIRED is recipient_blocked, PREMIUM_ACCOUNT_REQUIRED a permanent failure: each sent once, not retried', async () => {
    const world = new FakeTelegram();
    world.people.push(BOB);
    const t = await telegramApp(world, 'one');
    try {
      const account = await t.createAccount();
      const session = await linkAccount(t, world, account.liveKey);
      const sends = () => world.requests.filter((r) => r.className === 'messages.SendMedia').length;

      world.failNext.push({ className: 'messages.SendMedia', errorMessage: 'ALLOW_PAYMENT_REQUIRED_250' });
      const paid = await t.waitForStatus(account.liveKey, (await sendFrom(t, account.liveKey, session, '@bob_builder')).json().id, ['delivered', 'failed']);
      assert.equal(paid.status, 'failed');
      assert.equal(paid.error.code, 'recipient_blocked');
      assert.match(paid.error.message, /ALLOW_PAYMENT_REQUIRED_250.*250 Stars/);
      assert.equal(sends(), 1, 'sent once');

      world.failNext.push({ className: 'messages.SendMedia', errorMessage: 'PREMIUM_ACCOUNT_REQUIRED' });
      const premium = await t.waitForStatus(account.liveKey, (await sendFrom(t, account.liveKey, session, '@bob_builder')).json().id, ['delivered', 'failed']);
      assert.equal(premium.status, 'failed');
      assert.match(premium.error.message, /PREMIUM_ACCOUNT_REQUIRED.*Premium/);
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(sends(), 2, 'each sent once, never again');
    } finally {
      await t.close();
    }
  });

  it('a send whose answer was lost is not sent twice: the retry carries the same random_id, and RANDOM_ID_DUPLICATE means it was delivered', async () => {
    const world = new FakeTelegram();
    world.people.push(BOB);
    const t = await telegramApp(world, 'one');
    try {
      const account = await t.createAccount();
      const session = await linkAccount(t, world, account.liveKey);
      world.loseAnswerOf.push('messages.SendMedia');
      const done = await t.waitForStatus(account.liveKey, (await sendFrom(t, account.liveKey, session, '@bob_builder')).json().id, ['delivered', 'failed'], 30_000);
      assert.equal(done.status, 'delivered');
      const sends = world.requests.filter((r) => r.className === 'messages.SendMedia').map((r) => String((r.request as unknown as { randomId: unknown }).randomId));
      assert.equal(sends.length, 2, 'tried again after the lost answer');
      assert.equal(sends[0], sends[1], 'with the same random_id');
      assert.equal(world.sent.length, 1, 'Bob got one voice note');
    } finally {
      await t.close();
    }
  });

  it('FROZEN_METHOD_INVALID restricts the sender and holds its notes without calling Telegram again; AUTH_KEY_DUPLICATED disconnects the session', async () => {
    const world = new FakeTelegram();
    world.people.push(BOB);
    const t = await telegramApp(world, 'one');
    try {
      const account = await t.createAccount();
      const session = await linkAccount(t, world, account.liveKey);
      const first = (await sendFrom(t, account.liveKey, session, '@bob_builder')).json().id;
      assert.equal((await t.waitForStatus(account.liveKey, first, ['delivered', 'failed'])).status, 'delivered');

      world.frozen.add(JANE.userId);
      const frozen = (await sendFrom(t, account.liveKey, session, '@bob_builder')).json().id;
      const restricted = await eventually(async () => (await sendersOf(t, account.liveKey)).find((s) => s.status === 'restricted'), 'the sender to be restricted');
      assert.match(restricted.reason, /FROZEN_METHOD_INVALID/);
      const calls = world.requests.length;
      // Another note to a chat the account already has: held too, without an upload or a send.
      const next = (await sendFrom(t, account.liveKey, session, '@bob_builder')).json().id;
      const held = await eventually(async () => {
        const detail = await messageDetail(t, account.liveKey, next);
        return detail.status === 'queued' && detail.waiting_for === 'sender_restricted' ? detail : undefined;
      }, 'the next note to be held');
      assert.ok(held);
      assert.equal((await messageDetail(t, account.liveKey, frozen)).status, 'queued', 'the refused note is held, not failed');
      assert.deepEqual(world.requests.slice(calls).map((r) => r.className), [], 'Telegram is not called again while the account is frozen');
    } finally {
      await t.close();
    }

    world.frozen.clear();
    const again = await telegramApp(world, 'two');
    try {
      const account = await again.createAccount();
      const session = await linkAccount(again, world, account.liveKey);
      world.failNext.push({ className: 'messages.SendMedia', errorMessage: 'AUTH_KEY_DUPLICATED' });
      const failed = await again.waitForStatus(account.liveKey, (await sendFrom(again, account.liveKey, session, '@bob_builder')).json().id, ['delivered', 'failed']);
      assert.equal(failed.error.code, 'session_expired');
      assert.equal((await again.request({ method: 'GET', url: `${API}/telegram/sessions/${session}`, key: account.liveKey })).json().status, 'disconnected');
    } finally {
      await again.close();
    }
  });
});
