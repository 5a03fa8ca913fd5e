import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import {
  assertErrorEnvelope,
  closeSharedAudio,
  defaultSendBody,
  STORAGE_LABEL,
  startTestApp,
  TELEGRAM_TOKEN,
  withRestartableStorage,
  type TestApp,
} from './fixtures/app-harness.js';
import { startTelegramApi, type TelegramFake } from './fakes/telegram-api.js';
import { eventually } from './fixtures/eventually.js';
import { createDashboardAccount, csrfIn, FormClient } from './fixtures/dashboard-harness.js';

/**
 * Telegram bots listened to (`listen: true`): the bot's updates long-polled with getUpdates by one
 * process at a time, replies recorded, a block (my_chat_member "kicked") failing later notes at once,
 * a bot with a webhook left alone, and the kept token erased when the window ends.
 */

const LISTEN = { listenScanMs: 100, listenPollSeconds: 1 };
const DAY = 86_400_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

after(async () => {
  await closeSharedAudio();
});

const getUpdatesCalls = (fake: TelegramFake) => fake.calls.filter((c) => c.method.toLowerCase() === 'getupdates');
const repliesOf = async (t: TestApp, key: string, id: string): Promise<any[]> => (await t.request({ method: 'GET', url: `/api/v1/messages/${id}`, key })).json().replies;
/** A message in a private chat; `later` seconds after now (Telegram's dates are whole seconds). */
const privateMessage = (chat: number, messageId: number, content: Record<string, unknown>, later = 1) => ({
  message: { message_id: messageId, date: Math.floor(Date.now() / 1000) + later, chat: { id: chat, type: 'private' }, from: { id: chat, is_bot: false, first_name: 'Jo' }, ...content },
});

async function sendListened(t: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  const res = await t.send(key, { ...defaultSendBody('telegram', t.voiceUrl), ...body });
  assert.equal(res.statusCode, 202, res.body);
  assert.deepEqual(Object.keys(res.json()).sort(), ['created_at', 'id', 'platform', 'recipient', 'status']);
  return res.json().id as string;
}

describe(`Telegram bots listened to (${STORAGE_LABEL})`, () => {
  it('listen is for Telegram and LinkedIn: 422 naming listen on WhatsApp; a sandbox key keeps nothing', async () => {
    const fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, worker: false });
    try {
      const a = await t.createAccount();
      const error = assertErrorEnvelope(await t.send(a.liveKey, { ...defaultSendBody('whatsapp', t.voiceUrl, 'ws_000000000000000000000000'), listen: true }), 422, 'invalid_parameter');
      assert.equal(error.details.field, 'listen');
      // A sandbox key never reaches Telegram: nothing is kept or polled.
      assert.equal((await t.send(a.testKey, { ...defaultSendBody('telegram', t.voiceUrl), listen: true })).statusCode, 202);
      assert.equal((await t.app.services.db.kysely.selectFrom('telegram_listeners').select('sender_key').execute()).length, 0);
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('long-polls the bot, records its replies, learns a block and fails later notes to that chat at once', async () => {
    const fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, platformTuning: { telegram: LISTEN } });
    try {
      const a = await t.createAccount();
      const note = await sendListened(t, a.liveKey, { recipient: '555001', listen: true });
      await t.waitForStatus(a.liveKey, note, ['delivered']);
      // A sandbox note to the same chat with the same bot, delivered later: a real reply never lands on it.
      const sandboxNote = await sendListened(t, a.testKey, { recipient: '555001' });
      await t.waitForStatus(a.testKey, sandboxNote, ['delivered']);
      const stored = await t.app.services.db.kysely.selectFrom('telegram_listeners').select('token').executeTakeFirstOrThrow();
      assert.ok(!stored.token.includes(TELEGRAM_TOKEN.split(':')[1]!), 'the kept token is sealed');

      const [first] = await eventually(() => (getUpdatesCalls(fake).length > 0 ? getUpdatesCalls(fake) : undefined), 'getUpdates');
      assert.deepEqual(JSON.parse(first!.fields.allowed_updates!), ['message', 'my_chat_member']);
      assert.equal(first!.token, TELEGRAM_TOKEN);

      // A group message and a message from someone never written to are not recorded.
      fake.pushUpdate(TELEGRAM_TOKEN, { message: { message_id: 9, date: Math.floor(Date.now() / 1000) + 1, chat: { id: -100123, type: 'group' }, from: { id: 555001, is_bot: false }, text: 'in a group' } });
      fake.pushUpdate(TELEGRAM_TOKEN, privateMessage(555999, 10, { text: 'who are you?' }));
      const replyId = fake.pushUpdate(TELEGRAM_TOKEN, privateMessage(555001, 11, { text: 'Thanks for the note' }));
      fake.pushUpdate(TELEGRAM_TOKEN, privateMessage(555001, 12, { photo: [{ file_id: 'x' }], caption: 'me' }, 2));
      const replies = await eventually(async () => {
        const found = await repliesOf(t, a.liveKey, note);
        return found.length === 2 ? found : undefined;
      }, 'two replies');
      assert.deepEqual(replies.map((r) => [r.type, r.text]), [['text', 'Thanks for the note'], ['image', 'me']]);
      assert.deepEqual(await repliesOf(t, a.testKey, sandboxNote), []);
      // Confirmed: the next poll asks from after the last update, so none comes twice.
      await eventually(() => getUpdatesCalls(fake).some((c) => Number(c.fields.offset) > replyId + 1), 'offset confirmed');
      assert.equal((await t.app.services.db.kysely.selectFrom('message_replies').select('id').execute()).length, 2);

      // The person blocks the bot: the next note to them fails at once, without a sendVoice.
      fake.pushUpdate(TELEGRAM_TOKEN, { my_chat_member: { chat: { id: 555001, type: 'private' }, from: { id: 555001, is_bot: false }, date: 1, old_chat_member: { status: 'member' }, new_chat_member: { status: 'kicked' } } });
      await eventually(async () => (await t.app.services.db.kysely.selectFrom('blocked_chats').select('recipient').execute()).length === 1, 'block learned');
      const sendsBefore = fake.callsForChat('555001').length;
      const later = await sendListened(t, a.liveKey, { recipient: '555001' });
      const failed = await t.waitForStatus(a.liveKey, later, ['failed', 'delivered']);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error.code, 'recipient_blocked');
      assert.equal(fake.callsForChat('555001').length, sendsBefore, 'no call to Telegram');
      // Let back in (member again): notes go through again.
      fake.pushUpdate(TELEGRAM_TOKEN, { my_chat_member: { chat: { id: 555001, type: 'private' }, from: { id: 555001, is_bot: false }, date: 2, old_chat_member: { status: 'kicked' }, new_chat_member: { status: 'member' } } });
      await eventually(async () => (await t.app.services.db.kysely.selectFrom('blocked_chats').select('recipient').execute()).length === 0, 'unblocked');
      const again = await sendListened(t, a.liveKey, { recipient: '555001' });
      assert.equal((await t.waitForStatus(a.liveKey, again, ['failed', 'delivered'])).status, 'delivered');
      assert.equal(fake.pollConflicts, 0);

      // The message log says the bot is listened to; the account ends it: the token is erased, polling stops.
      const listening = (await t.request({ method: 'GET', url: `/api/v1/messages/${note}`, key: a.liveKey })).json().listening;
      assert.equal(listening.status, 'listening');
      assert.equal(listening.reason, null);
      assert.ok(Date.parse(listening.until) > Date.now() + 29 * DAY);
      const stop = await t.request({ method: 'DELETE', url: `/api/v1/messages/${note}/listening`, key: a.liveKey });
      assert.equal(stop.statusCode, 200, stop.body);
      assert.deepEqual(stop.json(), { deleted: true });
      assert.equal((await t.app.services.db.kysely.selectFrom('telegram_listeners').select('sender_key').execute()).length, 0, 'token erased');
      assertErrorEnvelope(await t.request({ method: 'DELETE', url: `/api/v1/messages/${note}/listening`, key: a.liveKey }), 404, 'not_found');
      assert.equal((await t.request({ method: 'GET', url: `/api/v1/messages/${note}`, key: a.liveKey })).json().listening, null);
      await sleep(1_500);
      const polls = getUpdatesCalls(fake).length;
      await sleep(1_500);
      assert.equal(getUpdatesCalls(fake).length, polls, 'no more getUpdates');
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('leaves the webhook of a bot that has one and stops; erases the token when the window ends', async () => {
    const fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
    fake.setWebhook(TELEGRAM_TOKEN);
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, platformTuning: { telegram: LISTEN } });
    try {
      const a = await createDashboardAccount(t);
      const note = await sendListened(t, a.liveKey, { recipient: '556001', listen: true });
      await t.waitForStatus(a.liveKey, note, ['delivered']);
      const db = t.app.services.db.kysely;
      const refused = await eventually(async () => {
        const row = await db.selectFrom('telegram_listeners').selectAll().executeTakeFirst();
        return row?.status === 'conflict' ? row : undefined;
      }, 'marked as not listenable');
      assert.match(refused.reason!, /webhook/);
      const polls = getUpdatesCalls(fake).length;
      await sleep(600);
      assert.equal(getUpdatesCalls(fake).length, polls, 'no more getUpdates');
      assert.equal(fake.calls.filter((c) => /webhook/i.test(c.method)).length, 0, 'the webhook is never touched');
      const shown = (await t.request({ method: 'GET', url: `/api/v1/messages/${note}`, key: a.liveKey })).json().listening;
      assert.equal(shown.status, 'refused');
      assert.match(shown.reason, /webhook/);
      const client = new FormClient(t, '10.9.0.8');
      assert.equal((await client.signIn(a.email, a.password)).statusCode, 303);
      const page = await client.get(`/dashboard/messages/${note}?env=live`);
      assert.match(page.body, /data-listening="refused">This bot cannot be listened to: the bot has a webhook set/);
      const forged = await client.post(`/dashboard/messages/${note}/listening/delete`, { _csrf: 'forged' });
      assert.equal(forged.statusCode, 403);
      const stopped = await client.post(`/dashboard/messages/${note}/listening/delete`, { _csrf: csrfIn(page.body) });
      assert.equal(stopped.statusCode, 303);
      assert.equal((await db.selectFrom('telegram_listeners').select('sender_key').execute()).length, 0, 'the button erases the token');
      assert.doesNotMatch((await client.get(`/dashboard/messages/${note}?env=live`)).body, /data-listening=/);
      // Asked again: kept again (and refused again, the webhook still being there).
      await sendListened(t, a.liveKey, { recipient: '556002', listen: true });
      await eventually(async () => (await db.selectFrom('telegram_listeners').select('status').executeTakeFirst())?.status === 'conflict', 'refused again');

      // Thirty days without a note: the window ends and the kept token is erased.
      await db.updateTable('messages').set({ created_at: Date.now() - 31 * DAY }).execute();
      await db.updateTable('telegram_listeners').set({ status: 'listening', listen_until: Date.now() - 1 }).execute();
      await eventually(async () => (await db.selectFrom('telegram_listeners').select('sender_key').execute()).length === 0, 'token erased');
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('two processes: one poller per bot at a time, and the other takes over when the first stops', async () => {
    await withRestartableStorage(async (reuse) => {
      const fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
      const options = { reuse, env: { TELEGRAM_API_ROOT: fake.apiRoot }, platformTuning: { telegram: LISTEN } };
      const one = await startTestApp(options);
      let two: TestApp | undefined;
      try {
        two = await startTestApp(options);
        const a = await one.createAccount();
        const note = await sendListened(one, a.liveKey, { recipient: '557001', listen: true });
        await one.waitForStatus(a.liveKey, note, ['delivered']);
        await eventually(() => getUpdatesCalls(fake).length >= 4, 'polling');
        await sleep(1_500);
        assert.equal(fake.maxConcurrentPolls, 1, 'never two getUpdates of one bot at once');
        assert.equal(fake.pollConflicts, 0);
        await one.close();
        // The other process takes the bot over once the first let go of it, and hears the reply.
        fake.pushUpdate(TELEGRAM_TOKEN, privateMessage(557001, 21, { voice: { duration: 2 } }));
        const replies = await eventually(async () => {
          const found = await repliesOf(two!, a.liveKey, note);
          return found.length === 1 ? found : undefined;
        }, 'heard by the other process');
        assert.equal(replies[0].type, 'voice');
        assert.equal(fake.pollConflicts, 0);
      } finally {
        await two?.close();
        await one.close().catch(() => undefined);
        await fake.close();
      }
    });
  });
});
