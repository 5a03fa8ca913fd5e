/**
 * WhatsApp refusing a note after taking it: Baileys' sendMessage resolves before the server's
 * acknowledgement, and a refusal (463 and others) comes later as `messages.update` status 0 (ERROR). The
 * note, delivered by then, becomes failed (`platform_refused`, voice_note.failed, the counts taken back);
 * on a 463 the reachout lock is read and the sender restricted only when a lock is active; nothing is
 * sent again by itself.
 */
import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { startWebhookReceiver } from './fakes/webhook-receiver.js';
import { eventually } from './fixtures/eventually.js';
import { FakeWhatsapp } from './fakes/whatsapp-network.js';
import { closeSharedAudio, defaultSendBody, FAST_WHATSAPP, startTestApp, STORAGE_LABEL, type TestApp } from './fixtures/app-harness.js';
import { linkedSession } from './fixtures/whatsapp-session.js';

after(closeSharedAudio);

const API = '/api/v1';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function sendTo(t: TestApp, key: string, sessionId: string, recipient: string): Promise<string> {
  const res = await t.send(key, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient });
  assert.equal(res.statusCode, 202, res.body);
  return res.json().id;
}

const senderOf = async (t: TestApp, key: string): Promise<any> => (await t.request({ method: 'GET', url: `${API}/senders`, key })).json().data[0];
const usageOf = async (t: TestApp, key: string): Promise<any> => (await t.request({ method: 'GET', url: `${API}/usage`, key })).json().usage;

describe(`WhatsApp refusals in the acknowledgement (${STORAGE_LABEL})`, () => {
  it('a 463 with no lock active turns the delivered note into failed, gives its counts back, and leaves the sender ok; never sent again', async () => {
    const world = new FakeWhatsapp();
    // The acknowledgement comes a second after the send: the note is seen delivered first.
    world.ackDelayMs = 1_000;
    const receiver = await startWebhookReceiver();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('a'), whatsappLive: FAST_WHATSAPP, webhooks: { pollMs: 100 } });
    try {
      const account = await t.createAccount();
      const key = account.liveKey;
      await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key, body: { url: receiver.url(), events: ['voice_note.delivered', 'voice_note.failed', 'sender.updated'] } });
      const sessionId = await linkedSession(t, world, key);
      const recipient = '14155550401';
      world.refusedChats.set(`${recipient}@s.whatsapp.net`, '463');

      const id = await sendTo(t, key, sessionId, recipient);
      assert.equal((await t.waitForStatus(key, id, ['delivered', 'failed'])).status, 'delivered', 'sendMessage resolved: delivered at first');
      assert.equal((await senderOf(t, key)).sent_today, 1);
      const failed = await t.waitForStatus(key, id, ['failed']);
      assert.equal(failed.error.code, 'platform_refused');
      assert.match(failed.error.message, /463/);
      assert.equal(failed.delivered_at, null);

      const [event] = await receiver.waitFor(1, 'voice_note.failed');
      const data = JSON.parse(event!.body).data;
      assert.deepEqual([data.id, data.status, data.error.code], [id, 'failed', 'platform_refused']);
      const usage = await usageOf(t, key);
      assert.deepEqual([usage.total_sent, usage.total_delivered, usage.total_failed], [1, 0, 1]);

      // WhatsApp was asked whether the number is locked: it is not, so the sender stays ok.
      await eventually(() => world.lockReads > 1, 'the lock read after the refusal');
      const sender = await senderOf(t, key);
      assert.deepEqual([sender.status, sender.sent_today], ['ok', 0]);
      await sleep(500);
      assert.equal(receiver.received.filter((e) => JSON.parse(e.body).type === 'sender.updated').length, 0);
      assert.equal(world.refusals.length, 1, 'not sent again');
      assert.equal(world.sent.length, 0);
    } finally {
      await t.close();
      await receiver.close();
    }
  });

  it('a 463 while the reachout lock is active fails the note and restricts the sender until the lock ends', async () => {
    const world = new FakeWhatsapp();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('a'), whatsappLive: FAST_WHATSAPP });
    try {
      const account = await t.createAccount();
      const key = account.liveKey;
      const sessionId = await linkedSession(t, world, key);
      // Locked after the session read the lock at connect: the sender is ok when the note goes.
      await eventually(() => world.lockReads === 1, 'the lock read when the session connected');
      const until = new Date(Date.now() + 60 * 60_000);
      world.reachoutLock = { until };

      // The acknowledgement comes before the worker has written the delivery: the refusal waits for it.
      const refused = await sendTo(t, key, sessionId, '14155550402');
      const failed = await t.waitForStatus(key, refused, ['failed']);
      assert.equal(failed.error.code, 'platform_refused');
      const sender = await eventually(async () => {
        const found = await senderOf(t, key);
        return found?.status === 'restricted' ? found : undefined;
      }, 'the sender restricted');
      assert.equal(sender.until, until.toISOString());
      assert.equal(world.refusals.length, 1);
    } finally {
      await t.close();
    }
  });

  it('another error code in the acknowledgement fails its note the same way, without asking for the lock', async () => {
    const world = new FakeWhatsapp();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('a'), whatsappLive: FAST_WHATSAPP });
    try {
      const account = await t.createAccount();
      const key = account.liveKey;
      const sessionId = await linkedSession(t, world, key);
      world.refusedChats.set('14155550403@s.whatsapp.net', '479');
      await eventually(() => world.lockReads === 1, 'the lock read when the session connected');

      const refused = await sendTo(t, key, sessionId, '14155550403');
      const failed = await t.waitForStatus(key, refused, ['failed']);
      assert.equal(failed.error.code, 'platform_refused');
      assert.match(failed.error.message, /error 479/);
      await sleep(300);
      assert.equal(world.lockReads, 1, 'the lock is asked for on a 463 only');
      assert.equal((await senderOf(t, key)).status, 'ok');
      assert.equal(world.refusals.length, 1, 'not sent again');
    } finally {
      await t.close();
    }
  });
});
