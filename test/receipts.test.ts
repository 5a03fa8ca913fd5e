import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { Webhook } from 'standardwebhooks';
import { closeSharedAudio, FAST_WHATSAPP, startTestApp, STORAGE_LABEL, type TestApp } from './fixtures/app-harness.js';
import { linkedSession } from './fixtures/whatsapp-session.js';
import { eventually } from './fixtures/eventually.js';
import { FakeWhatsapp } from './fakes/whatsapp-network.js';
import { startWebhookReceiver, type WebhookReceiver } from './fakes/webhook-receiver.js';

/**
 * Listen receipts from a live WhatsApp session: the recipient's device reports the voice note as
 * delivered to it, read and played (`messages.update` with statuses 3, 4, 5 for the id we sent it
 * under); the message detail shows the times and voice_note.read / voice_note.played go out.
 */

const API = '/api/v1';
const RECIPIENT = '14155550100';

after(async () => {
  await closeSharedAudio();
});

/** A note of a linked session, delivered, in a new account whose endpoint (and its signing secret) posts voice_note.read and .played to `receiver`. */
async function deliveredNote(t: TestApp, world: FakeWhatsapp, receiver: WebhookReceiver): Promise<{ key: string; secret: string; sessionId: string; messageId: string; status: any }> {
  const key = (await t.createAccount()).liveKey;
  const hook = await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key, body: { url: receiver.url(), events: ['voice_note.read', 'voice_note.played'] } });
  assert.equal(hook.statusCode, 201, hook.body);
  const sessionId = await linkedSession(t, world, key);
  const sent = await t.send(key, { platform: 'whatsapp', recipient: RECIPIENT, audio_url: t.voiceUrl, session: { session_id: sessionId } });
  assert.equal(sent.statusCode, 202, sent.body);
  const messageId = sent.json().id as string;
  const status = await t.waitForStatus(key, messageId, ['delivered']);
  return { key, secret: hook.json().secret as string, sessionId, messageId, status };
}

const detail = async (t: TestApp, key: string, id: string) => (await t.request({ method: 'GET', url: `${API}/messages/${id}`, key })).json();

describe(`listen receipts from a live WhatsApp session (${STORAGE_LABEL})`, () => {
  it('records delivered-to-device, read and played from the sending session and sends voice_note.read / voice_note.played', async () => {
    const world = new FakeWhatsapp();
    const receiver = await startWebhookReceiver();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('one'), whatsappLive: FAST_WHATSAPP, webhooks: { pollMs: 100 } });
    try {
      const { key, secret, sessionId, messageId, status } = await deliveredNote(t, world, receiver);

      const before = await detail(t, key, messageId);
      assert.deepEqual(before.receipts, { supported: true, reason: null, delivered_to_device_at: null, read_at: null, played_at: null });

      const note = world.sent.at(-1)!;
      const socket = world.current(sessionId)!;
      const update = (status: number) => [{ key: { id: note.messageId, remoteJid: note.jid, fromMe: true }, update: { status } }];
      // A message the phone received, and one sent from the phone itself: neither is ours.
      socket.emit('messages.update', [{ key: { id: note.messageId, remoteJid: note.jid, fromMe: false }, update: { status: 5 } }]);
      socket.emit('messages.update', [{ key: { id: '3EB0FFFFFFFFFFFFFFFFFF', remoteJid: note.jid, fromMe: true }, update: { status: 4 } }]);
      socket.emit('messages.update', update(2));
      socket.emit('messages.update', update(3));
      const delivered = await eventually(async () => (await detail(t, key, messageId)).receipts.delivered_to_device_at, 'delivered to the device');
      assert.equal((await detail(t, key, messageId)).receipts.read_at, null);

      socket.emit('messages.update', update(4));
      const read = await eventually(async () => (await detail(t, key, messageId)).receipts.read_at, 'read');
      socket.emit('messages.update', update(5));
      socket.emit('messages.update', update(5));
      const played = await eventually(async () => (await detail(t, key, messageId)).receipts.played_at, 'played');
      assert.ok(Date.parse(delivered) <= Date.parse(read) && Date.parse(read) <= Date.parse(played));

      const [readHook] = await receiver.waitFor(1, 'voice_note.read');
      const [playedHook] = await receiver.waitFor(1, 'voice_note.played');
      const readEvent = new Webhook(secret).verify(readHook!.body, readHook!.headers as Record<string, string>) as any;
      const playedEvent = new Webhook(secret).verify(playedHook!.body, playedHook!.headers as Record<string, string>) as any;
      assert.deepEqual(readEvent.data, status);
      assert.equal(readEvent.timestamp, read);
      assert.equal(playedEvent.timestamp, played);
      // A repeated report changes nothing and is not announced twice.
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(receiver.received.filter((r) => JSON.parse(r.body).type === 'voice_note.played').length, 1);
    } finally {
      await t.close();
      await receiver.close();
    }
  });

  it('fills in the earlier stages when the device reports played first', async () => {
    const world = new FakeWhatsapp();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('one'), whatsappLive: FAST_WHATSAPP });
    try {
      const account = await t.createAccount();
      const sessionId = await linkedSession(t, world, account.liveKey);
      const sent = await t.send(account.liveKey, { platform: 'whatsapp', recipient: RECIPIENT, audio_url: t.voiceUrl, session: { session_id: sessionId } });
      const messageId = sent.json().id as string;
      await t.waitForStatus(account.liveKey, messageId, ['delivered']);
      const note = world.sent.at(-1)!;
      world.current(sessionId)!.emit('messages.update', [{ key: { id: note.messageId, remoteJid: note.jid, fromMe: true }, update: { status: 5 } }]);
      const receipts = await eventually(async () => {
        const r = (await detail(t, account.liveKey, messageId)).receipts;
        return r.played_at ? r : undefined;
      }, 'played');
      assert.equal(receipts.read_at, receipts.played_at);
      assert.equal(receipts.delivered_to_device_at, receipts.played_at);
    } finally {
      await t.close();
    }
  });

  it('a read and a play reported while the session was offline arrive when it reconnects, as Baileys replays them, each announced once, at the times the device reported them', async () => {
    const world = new FakeWhatsapp();
    const receiver = await startWebhookReceiver();
    // The service's clock: moved an hour on while the session is offline.
    let ahead = 0;
    const t = await startTestApp({ whatsappSocketFactory: world.factory('one'), whatsappLive: FAST_WHATSAPP, webhooks: { pollMs: 100 }, now: () => Date.now() + ahead });
    try {
      const { key, sessionId, messageId } = await deliveredNote(t, world, receiver);
      const note = world.sent.at(-1)!;
      const receipt = (status: number) => ({ key: { id: note.messageId, remoteJid: note.jid, fromMe: true }, update: { status } });

      // The connection drops; the recipient listens meanwhile. WhatsApp holds the receipts for the next connection.
      const before = world.current(sessionId)!;
      before.closeWith(428, 'Connection Closed');
      const reportedAt = Date.now();
      world.report(sessionId, receipt(4));
      world.report(sessionId, receipt(5));
      ahead = 3_600_000;
      await eventually(() => {
        const socket = world.current(sessionId);
        return socket && socket !== before && socket.opened;
      }, 'reconnected');
      assert.equal(world.receiptsHeldWhileOffline.size, 0, 'the held receipts went to the new socket');

      const receipts = await eventually(async () => {
        const r = (await detail(t, key, messageId)).receipts;
        return r.read_at && r.played_at ? r : undefined;
      }, 'read and played after the reconnect');
      assert.ok(Date.parse(receipts.read_at) <= Date.parse(receipts.played_at));
      // When the device reported them (to the end of their whole second), not an hour later when they arrived.
      for (const at of [receipts.read_at, receipts.played_at]) {
        assert.ok(Math.abs(Date.parse(at) - reportedAt) < 2_000, `${at}: not the time it was reported (${new Date(reportedAt).toISOString()})`);
      }
      await receiver.waitFor(1, 'voice_note.read');
      await receiver.waitFor(1, 'voice_note.played');
      await new Promise((r) => setTimeout(r, 300));
      const types = receiver.received.map((r) => JSON.parse(r.body).type as string).sort();
      assert.deepEqual(types, ['voice_note.played', 'voice_note.read']);
    } finally {
      await t.close();
      await receiver.close();
    }
  });
});
