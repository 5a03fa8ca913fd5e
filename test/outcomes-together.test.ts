import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { startWebhookReceiver, type WebhookReceiver } from './fakes/webhook-receiver.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, type TestAccount, type TestApp } from './fixtures/app-harness.js';

/**
 * A burst of notes settled by one worker: their outcomes are written together (one transaction; on
 * PostgreSQL one statement per kind for all of them). What each caller sees must be exactly what it
 * would be one by one: its own status, one webhook event, one attempt and one audio record, and the
 * usage counting each outcome once.
 */

after(async () => {
  await closeSharedAudio();
});

describe(`outcomes settled together (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  let receiver: WebhookReceiver;

  before(async () => {
    receiver = await startWebhookReceiver();
    t = await startTestApp({ webhooks: { retryDelaysMs: [20, 20, 20], pollMs: 100 } });
    account = await t.createAccount();
  });
  after(async () => {
    await t.close();
    await receiver.close();
  });

  it('each note of a burst gets its own status, one webhook event, its attempt and audio records; the usage counts each once', async () => {
    const created = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: account.testKey, body: { url: receiver.url(), events: ['voice_note.delivered', 'voice_note.failed'] } });
    assert.equal(created.statusCode, 201, created.body);
    // 24 chats that take the note (ending in 1: not the sandbox's answering 6 nor its missing 7), and
    // two that refuse it for good (sandbox recipients).
    const recipients = [...Array.from({ length: 24 }, (_, i) => String(300_000_001 + i * 10)), '10000000002', '10000000001'];
    const sent = await Promise.all(recipients.map((recipient) => t.send(account.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient })));
    const ids = sent.map((res) => {
      assert.equal(res.statusCode, 202, res.body);
      return res.json().id as string;
    });
    const statuses = await Promise.all(ids.map((id) => t.waitForStatus(account.testKey, id, ['delivered', 'failed'], 30_000)));
    assert.deepEqual(
      statuses.map((s) => s.status),
      recipients.map((_, i) => (i < 24 ? 'delivered' : 'failed')),
    );
    assert.deepEqual(
      statuses.slice(24).map((s) => s.error.code),
      ['recipient_not_found', 'session_expired'],
    );

    // One event per note, of its own outcome, carrying its own status lookup.
    const delivered = await receiver.waitFor(24, 'voice_note.delivered', 30_000);
    const failed = await receiver.waitFor(2, 'voice_note.failed', 30_000);
    await new Promise((r) => setTimeout(r, 300)); // a doubled event would arrive meanwhile
    const byMessage = new Map<string, any[]>();
    for (const hook of receiver.received) {
      const event = JSON.parse(hook.body);
      byMessage.set(event.data.id, [...(byMessage.get(event.data.id) ?? []), event]);
    }
    assert.equal(delivered.length + failed.length, 26);
    assert.deepEqual([...byMessage.keys()].sort(), [...ids].sort());
    ids.forEach((id, i) => {
      const events = byMessage.get(id)!;
      assert.equal(events.length, 1, `one event for ${id}`);
      assert.equal(events[0].type, i < 24 ? 'voice_note.delivered' : 'voice_note.failed');
      assert.deepEqual(events[0].data, statuses[i]);
    });

    // The message log: one attempt each, of its outcome, and the audio it used.
    for (const [i, id] of ids.entries()) {
      const res = await t.request({ method: 'GET', url: `/api/v1/messages/${id}`, key: account.testKey });
      assert.equal(res.statusCode, 200, res.body);
      const detail = res.json();
      assert.deepEqual(
        detail.attempts.map((a: any) => a.outcome),
        [i < 24 ? 'delivered' : 'failed'],
      );
      assert.equal(detail.audio?.converted?.format, 'ogg_opus', `audio record of ${id}`);
    }

    const usage = (await t.request({ method: 'GET', url: '/api/v1/usage', key: account.testKey })).json();
    assert.equal(usage.usage.total_sent, 26);
    assert.equal(usage.usage.total_delivered, 24);
    assert.equal(usage.usage.total_failed, 2);

    // Every note went through one bot: one sender record, counting each delivered note once (on
    // PostgreSQL the burst's notes are counted by one statement that meets the same record many times).
    const senders = (await t.request({ method: 'GET', url: '/api/v1/senders', key: account.testKey })).json();
    assert.equal(senders.data.length, 1, JSON.stringify(senders));
    assert.deepEqual([senders.data[0].kind, senders.data[0].status, senders.data[0].sent_today], ['telegram_bot', 'ok', 24]);
    const lastDelivery = Math.max(...statuses.slice(0, 24).map((s) => Date.parse(s.delivered_at)));
    assert.ok(Number.isFinite(lastDelivery), JSON.stringify(statuses[0]));
    assert.equal(Date.parse(senders.data[0].last_sent_at), lastDelivery);
  });
});
