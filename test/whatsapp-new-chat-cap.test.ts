/**
 * WhatsApp's new-chat message cap (Baileys 7: fetchNewChatMessageCap, message-capping.update): shown in
 * GET /senders, the session's sends spaced further apart at its warnings, notes to new chats held while
 * it is CAPPED (existing chats go on), released when it eases.
 */
import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { eventually } from './fixtures/eventually.js';
import { FakeWhatsapp } from './fakes/whatsapp-network.js';
import { closeSharedAudio, defaultSendBody, FAST_WHATSAPP, startTestApp, STORAGE_LABEL, type TestApp } from './fixtures/app-harness.js';
import { linkedSession } from './fixtures/whatsapp-session.js';

after(closeSharedAudio);

const API = '/api/v1';
const GAP_MS = 1_000;

async function sendTo(t: TestApp, key: string, sessionId: string, recipient: string): Promise<string> {
  const res = await t.send(key, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient });
  assert.equal(res.statusCode, 202, res.body);
  return res.json().id;
}

const senderOf = async (t: TestApp, key: string): Promise<any> => (await t.request({ method: 'GET', url: `${API}/senders`, key })).json().data[0];

describe(`WhatsApp's new-chat message cap (${STORAGE_LABEL})`, () => {
  it('is shown in GET /senders; its warnings space the sends further apart; CAPPED holds notes to new chats until it eases', async () => {
    const world = new FakeWhatsapp();
    const cycleEnds = new Date(Math.floor(Date.now() / 1000 + 3_600) * 1000);
    world.newChatCap = { capping_status: 'NONE', used_quota: 12, total_quota: 100, cycle_end_timestamp: String(cycleEnds.getTime() / 1000) };
    const t = await startTestApp({ whatsappSocketFactory: world.factory('a'), whatsappLive: { ...FAST_WHATSAPP, sendGapMs: GAP_MS, sendJitterMs: 0 } });
    try {
      const account = await t.createAccount();
      const key = account.liveKey;
      const sessionId = await linkedSession(t, world, key);
      // Read when the session connects: shown before any note was sent.
      const first = await eventually(async () => (await senderOf(t, key))?.new_chat_cap ?? undefined, 'the cap read at connect');
      assert.deepEqual(first, { status: 'NONE', used: 12, total: 100, cycle_ends_at: cycleEnds.toISOString() });

      // The first warning: announced by WhatsApp, shown, and the session's sends twice as far apart.
      world.newChatCap = { ...world.newChatCap, capping_status: 'FIRST_WARNING', used_quota: 80 };
      world.announceNewChatCap(sessionId);
      await eventually(async () => (await senderOf(t, key)).new_chat_cap.status === 'FIRST_WARNING', 'the first warning shown');
      const known = '14155550501';
      const notes = [await sendTo(t, key, sessionId, known), await sendTo(t, key, sessionId, known)];
      for (const id of notes) assert.equal((await t.waitForStatus(key, id, ['delivered', 'failed'])).status, 'delivered');
      const [a, b] = world.sent.map((s) => s.at);
      assert.ok(b! - a! >= 2 * GAP_MS - 20, `sends ${b! - a!} ms apart at the first warning, not ${2 * GAP_MS}`);

      // Capped: the sender is restricted until the cycle ends; a note to someone new waits, an existing chat goes on.
      world.newChatCap = { ...world.newChatCap, capping_status: 'CAPPED', used_quota: 100 };
      world.announceNewChatCap(sessionId);
      const capped = await eventually(async () => {
        const sender = await senderOf(t, key);
        return sender.status === 'restricted' ? sender : undefined;
      }, 'the sender restricted');
      assert.equal(capped.until, cycleEnds.toISOString());
      assert.equal(capped.new_chat_cap.status, 'CAPPED');
      const waiting = await sendTo(t, key, sessionId, '14155550502');
      await eventually(async () => (await t.request({ method: 'GET', url: `${API}/messages/${waiting}`, key })).json().waiting_for === 'sender_restricted', 'the note to a new chat to wait');
      assert.equal((await t.waitForStatus(key, await sendTo(t, key, sessionId, known), ['delivered', 'failed'])).status, 'delivered');
      assert.ok(!world.sent.some((s) => s.jid === '14155550502@s.whatsapp.net'), 'nothing went to the new chat');

      // Eased: ok again (a new cycle), and the held note goes.
      world.newChatCap = { ...world.newChatCap, capping_status: 'NONE', used_quota: 0 };
      world.announceNewChatCap(sessionId);
      await eventually(async () => (await senderOf(t, key)).status === 'ok', 'the sender ok again');
      assert.equal((await t.waitForStatus(key, waiting, ['delivered', 'failed'], 30_000)).status, 'delivered');
    } finally {
      await t.close();
    }
  });
});
