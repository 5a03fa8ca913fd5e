import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, FAST_WHATSAPP, startTestApp, STORAGE_LABEL, type TestApp } from './fixtures/app-harness.js';
import { linkedSession } from './fixtures/whatsapp-session.js';
import { eventually } from './fixtures/eventually.js';
import { FakeWhatsapp } from './fakes/whatsapp-network.js';
import { startWebhookReceiver } from './fakes/webhook-receiver.js';

/**
 * Replies heard by a live WhatsApp session: `messages.upsert` in the process that holds the session
 * (`notify` as they arrive, `append` for what WhatsApp held while the session was offline), from the
 * phone number the note went to or from the hidden `@lid` identity WhatsApp now uses for many private
 * chats, mapped back to the phone number.
 */

const API = '/api/v1';
const RECIPIENT = '14155550100';
const LID = '201987654321001';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

after(async () => {
  await closeSharedAudio();
});

const repliesOf = async (t: TestApp, key: string, id: string): Promise<any[]> => (await t.request({ method: 'GET', url: `${API}/messages/${id}`, key })).json().replies;

describe(`replies from a live WhatsApp session (${STORAGE_LABEL})`, () => {
  it('hears the recipient from the phone number and from a LID mapped back (key, lid-mapping.update, the mapping store); never groups, status, strangers or our own messages', async () => {
    const world = new FakeWhatsapp();
    const receiver = await startWebhookReceiver();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('one'), whatsappLive: FAST_WHATSAPP, webhooks: { pollMs: 100 } });
    try {
      const account = await t.createAccount();
      const key = account.liveKey;
      const hook = await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key, body: { url: receiver.url(), events: ['voice_note.replied'] } });
      assert.equal(hook.statusCode, 201, hook.body);
      const sessionId = await linkedSession(t, world, key);
      const sent = await t.send(key, { platform: 'whatsapp', recipient: RECIPIENT, audio_url: t.voiceUrl, session: { session_id: sessionId } });
      assert.equal(sent.statusCode, 202, sent.body);
      const messageId = sent.json().id as string;
      const status = await t.waitForStatus(key, messageId, ['delivered']);
      const socket = world.current(sessionId)!;
      const phoneJid = `${RECIPIENT}@s.whatsapp.net`;
      // Whole seconds apart, as WhatsApp stamps messages, so the order of the replies is known.
      const base = Date.now();

      // Never heard: a group the recipient writes in, a status update, someone we never wrote to, our own
      // message (from the phone, and a send echoed as Baileys does: `append`, fromMe), a LID nobody can map,
      // a protocol message (a deletion).
      socket.receive({ chat: '120363025246125486@g.us', id: 'G1', key: { participant: phoneJid }, message: { conversation: 'in a group' } });
      socket.receive({ chat: 'status@broadcast', id: 'S1', key: { participant: phoneJid }, message: { conversation: 'my status' } });
      socket.receive({ chat: '14155559999@s.whatsapp.net', id: 'X1', message: { conversation: 'a stranger' } });
      socket.receive({ chat: phoneJid, id: 'F1', fromMe: true, message: { conversation: 'sent from the phone' } });
      socket.receive({ chat: phoneJid, id: 'A1', type: 'append', fromMe: true, message: { conversation: 'our send, echoed' } });
      socket.receive({ chat: '209999999999999@lid', id: 'L0', message: { conversation: 'unknown lid' } });
      socket.receive({ chat: phoneJid, id: 'P1', message: { protocolMessage: { type: 0, key: { id: 'X' } } } });
      await sleep(500);
      assert.deepEqual(await repliesOf(t, key, messageId), []);

      // From the phone number.
      socket.receive({ chat: phoneJid, id: 'R1', at: base + 1_000, message: { conversation: 'Got it, thanks' } });
      const [event] = await receiver.waitFor(1, 'voice_note.replied');
      const body = JSON.parse(event!.body);
      const { reply, ...lookup } = body.data;
      assert.deepEqual(lookup, status);
      assert.equal(reply.type, 'text');
      assert.equal(reply.text, 'Got it, thanks');

      // From a LID: Baileys 7 puts the phone number beside it in the key (remoteJidAlt), older releases as senderPn.
      socket.receive({ chat: `${LID}@lid`, id: 'R2', at: base + 2_000, key: { remoteJidAlt: phoneJid, addressingMode: 'lid' }, message: { extendedTextMessage: { text: 'from a lid (alt)' } } });
      socket.receive({ chat: `${LID}@lid`, id: 'R3', at: base + 3_000, key: { senderPn: phoneJid }, message: { imageMessage: { caption: 'a photo', mimetype: 'image/jpeg' } } });
      // Nothing in the key: the mapping the socket announced (lid-mapping.update).
      socket.emit('lid-mapping.update', { lid: '201987654321002@lid', pn: phoneJid });
      socket.receive({ chat: '201987654321002@lid', id: 'R4', at: base + 4_000, message: { audioMessage: { ptt: true, seconds: 3 } } });
      // Nothing in the key, no event: Baileys' mapping store, which learned the LID when the note was sent to it.
      await socket.auth.keys.set({ 'lid-mapping': { [RECIPIENT]: '201987654321003', '201987654321003_reverse': RECIPIENT } });
      socket.receive({ chat: '201987654321003@lid', id: 'R5', at: base + 5_000, message: { ephemeralMessage: { message: { documentMessage: { fileName: 'cv.pdf' } } } } });

      const replies = await eventually(async () => {
        const found = await repliesOf(t, key, messageId);
        return found.length === 5 ? found : undefined;
      }, 'five replies');
      assert.deepEqual(
        replies.map((r) => [r.type, r.text]),
        [
          ['text', 'Got it, thanks'],
          ['text', 'from a lid (alt)'],
          ['image', 'a photo'],
          ['voice', null],
          ['document', null],
        ],
      );
      // One event per reply: all five arrive (webhooks go out after the replies are recorded), and no more.
      await eventually(() => (receiver.received.length >= 5 ? true : undefined), 'five voice_note.replied events');
      await sleep(300);
      assert.equal(receiver.received.length, 5);
    } finally {
      await t.close();
      await receiver.close();
    }
  });

  it('hears a reply written while the session was offline (replayed as append at reconnect), records it once, and it cancels a waiting follow-up', async () => {
    const world = new FakeWhatsapp();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('one'), whatsappLive: FAST_WHATSAPP });
    try {
      const account = await t.createAccount({ quota: 10 });
      const key = account.liveKey;
      const sessionId = await linkedSession(t, world, key);
      const first = await t.send(key, { platform: 'whatsapp', recipient: RECIPIENT, audio_url: t.voiceUrl, session: { session_id: sessionId } });
      const messageId = first.json().id as string;
      await t.waitForStatus(key, messageId, ['delivered']);
      const followUp = await t.send(key, {
        platform: 'whatsapp',
        recipient: RECIPIENT,
        audio_url: t.voiceUrl,
        session: { session_id: sessionId },
        send_at: new Date(Date.now() + 3 * 86_400_000).toISOString(),
        cancel_on_reply: true,
      });
      assert.equal(followUp.statusCode, 202, followUp.body);
      const sentAt = Date.now();

      // The connection drops; the recipient answers meanwhile. WhatsApp holds the message and delivers it
      // on the next connection as an offline message, which Baileys upserts as `append`.
      const before = world.current(sessionId)!;
      before.closeWith(428, 'Connection Closed');
      world.write(sessionId, { chat: `${RECIPIENT}@s.whatsapp.net`, id: 'OFFLINE1', at: sentAt + 1000, message: { conversation: 'are you there?' } });
      // Delivered twice (an unacknowledged offline message comes again), once from the LID WhatsApp now uses.
      world.write(sessionId, { chat: `${LID}@lid`, id: 'OFFLINE1', at: sentAt + 1000, key: { remoteJidAlt: `${RECIPIENT}@s.whatsapp.net` }, message: { conversation: 'are you there?' } });
      const after = await eventually(() => {
        const socket = world.current(sessionId);
        return socket && socket !== before && socket.opened ? socket : undefined;
      }, 'reconnected');
      assert.equal(world.heldWhileOffline.size, 0, 'the held messages went to the new socket');

      const replies = await eventually(async () => {
        const found = await repliesOf(t, key, messageId);
        return found.length > 0 ? found : undefined;
      }, 'the offline reply');
      assert.deepEqual(
        replies.map((r) => [r.type, r.text]),
        [['text', 'are you there?']],
      );
      // Heard again while connected: still one.
      after.receive({ chat: `${RECIPIENT}@s.whatsapp.net`, id: 'OFFLINE1', at: sentAt + 1000, message: { conversation: 'are you there?' } });
      await sleep(500);
      assert.equal((await repliesOf(t, key, messageId)).length, 1, 'recorded once');

      const canceled = await t.waitForStatus(key, followUp.json().id, ['canceled']);
      assert.equal(canceled.status, 'canceled');
      assert.equal((await t.request({ method: 'GET', url: `${API}/usage`, key })).json().usage.total_sent, 1);
    } finally {
      await t.close();
    }
  });

  it('a reply quoting one of the notes (contextInfo.stanzaId) is recorded on that note; one quoting nothing on the latest', async () => {
    const world = new FakeWhatsapp();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('one'), whatsappLive: FAST_WHATSAPP });
    try {
      const account = await t.createAccount();
      const key = account.liveKey;
      const sessionId = await linkedSession(t, world, key);
      const ids: string[] = [];
      for (let i = 0; i < 2; i++) {
        const sent = await t.send(key, { platform: 'whatsapp', recipient: RECIPIENT, audio_url: t.voiceUrl, session: { session_id: sessionId } });
        assert.equal(sent.statusCode, 202, sent.body);
        ids.push(sent.json().id);
        await t.waitForStatus(key, ids[i]!, ['delivered']);
      }
      const [older, latest] = ids as [string, string];
      const socket = world.current(sessionId)!;
      const phoneJid = `${RECIPIENT}@s.whatsapp.net`;
      // Swiped to reply to the first note: WhatsApp names it in the reply's contextInfo (proto ContextInfo.stanzaId).
      const quotedNote = world.sent[0]!;
      socket.receive({
        chat: phoneJid,
        id: 'Q1',
        message: { extendedTextMessage: { text: 'about your first note', contextInfo: { stanzaId: quotedNote.messageId, participant: '14155550123@s.whatsapp.net', quotedMessage: { audioMessage: { ptt: true } } } } },
      });
      socket.receive({ chat: phoneJid, id: 'Q2', message: { conversation: 'and in general' } });
      await eventually(async () => (await repliesOf(t, key, older)).length === 1, 'the quoting reply on the first note');
      assert.deepEqual((await repliesOf(t, key, older)).map((r) => r.text), ['about your first note']);
      await eventually(async () => (await repliesOf(t, key, latest)).length === 1, 'the plain reply on the latest note');
      assert.deepEqual((await repliesOf(t, key, latest)).map((r) => r.text), ['and in general']);
    } finally {
      await t.close();
    }
  });
});
