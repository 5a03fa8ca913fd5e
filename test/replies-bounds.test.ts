import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { MAX_REPLIED_EVENTS, MAX_REPLIES_SHOWN, REPLIED_EVENTS_WINDOW_MS } from '../src/store/replies.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp } from './fixtures/app-harness.js';
import { startWebhookReceiver } from './fakes/webhook-receiver.js';

/**
 * A recipient who writes 300 messages in a row: every one is kept, but voice_note.replied is announced
 * for at most MAX_REPLIED_EVENTS of one note's replies within an hour (by the replies' own times, so the
 * hour is given, not waited for); the next reply after the hour is announced again.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

after(async () => {
  await closeSharedAudio();
});

describe(`replies announced within a bound per note (${STORAGE_LABEL})`, () => {
  it(`300 messages in a minute: all kept, ${MAX_REPLIED_EVENTS} voice_note.replied; one after the hour is announced again`, async () => {
    const receiver = await startWebhookReceiver();
    const t = await startTestApp({ webhooks: { retryDelaysMs: [20], pollMs: 50 } });
    try {
      const a = await t.createAccount();
      const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: a.testKey, body: { url: receiver.url('/bound'), events: ['voice_note.replied'] } });
      assert.equal(hook.statusCode, 201, hook.body);
      const res = await t.send(a.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '1000701' });
      const id = res.json().id as string;
      await t.waitForStatus(a.testKey, id, ['delivered']);
      const { sender_key: senderKey } = await t.app.services.db.kysely.selectFrom('messages').select('sender_key').where('id', '=', id).executeTakeFirstOrThrow();

      const start = Date.now();
      for (let i = 0; i < 300; i++) {
        await t.app.services.onHeard({ kind: 'reply', platform: 'telegram', senderKey: senderKey!, from: '1000701', env: 'test', reply: { platformId: `b${i}`, type: 'text', text: `message ${i}`, at: start + i * 200 } });
      }
      await receiver.waitFor(MAX_REPLIED_EVENTS, 'voice_note.replied');
      await sleep(500);
      const announced = () => receiver.received.map((r) => JSON.parse(r.body)).filter((e) => e.type === 'voice_note.replied');
      assert.equal(announced().length, MAX_REPLIED_EVENTS);
      assert.deepEqual(announced().map((e) => e.data.reply.text).sort(), Array.from({ length: MAX_REPLIED_EVENTS }, (_, i) => `message ${i}`).sort(), 'the first ones');
      const kept = await t.app.services.db.kysely.selectFrom('message_replies').select('id').where('message_id', '=', id).execute();
      assert.equal(kept.length, 300, 'every reply kept');
      const detail = (await t.request({ method: 'GET', url: `/api/v1/messages/${id}`, key: a.testKey })).json();
      assert.equal(detail.replies.length, MAX_REPLIES_SHOWN);

      await t.app.services.onHeard({ kind: 'reply', platform: 'telegram', senderKey: senderKey!, from: '1000701', env: 'test', reply: { platformId: 'later', type: 'text', text: 'an hour later', at: start + 300 * 200 + REPLIED_EVENTS_WINDOW_MS } });
      await receiver.waitFor(MAX_REPLIED_EVENTS + 1, 'voice_note.replied');
      assert.equal(announced().at(-1)!.data.reply.text, 'an hour later');
    } finally {
      await t.close();
      await receiver.close();
    }
  });
});
