import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { newMessageId } from '../src/core/ids.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, withRestartableStorage, type InjectResult } from './fixtures/app-harness.js';

/**
 * Sends that arrive together share one transaction and one disk flush on SQLite. What a caller sees
 * must not change: every 202 is committed (another process on the same storage already reads it), one
 * refused send in a batch does not take the others down with it, the quota is exact, and an
 * Idempotency-Key repeated inside one batch still makes one message.
 */
describe(`sends accepted together (${STORAGE_LABEL})`, () => {
  after(closeSharedAudio);

  it('every 202 of a burst is committed: a second app on the same storage reads each one at once', async () => {
    await withRestartableStorage(async (reuse) => {
      const first = await startTestApp({ worker: false, reuse });
      const second = await startTestApp({ worker: false, reuse });
      try {
        const a = await first.createAccount({ quota: 1_000 });
        const results = await Promise.all(
          Array.from({ length: 40 }, (_, i) => first.send(a.testKey, { ...defaultSendBody('telegram', first.voiceUrl), recipient: String(100_000 + i) })),
        );
        for (const res of results) assert.equal(res.statusCode, 202, res.body);
        const ids = results.map((res) => res.json().id as string);
        assert.equal(new Set(ids).size, 40);
        // No wait in between: the answer went out after the commit.
        for (const [i, id] of ids.entries()) {
          const seen = await second.request({ method: 'GET', url: `/api/v1/status/${id}`, key: a.testKey });
          assert.equal(seen.statusCode, 200, `message ${i} as the other app sees it: ${seen.body}`);
          assert.equal(seen.json().recipient, String(100_000 + i));
        }
        const usage = await second.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey });
        assert.equal(usage.json().usage.total_sent, 40);
      } finally {
        await second.close();
        await first.close();
      }
    });
  });

  it('a burst that crosses the quota: exactly the quota is accepted, each refusal is its own 402, the accepted ones all stand', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount({ quota: 17 });
      const results = await Promise.all(
        Array.from({ length: 45 }, (_, i) => t.send(a.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: String(200_000 + i) })),
      );
      const accepted = results.filter((res) => res.statusCode === 202);
      const refused = results.filter((res) => res.statusCode !== 202);
      assert.equal(accepted.length, 17);
      for (const res of refused) {
        assert.equal(res.statusCode, 402, res.body);
        assert.equal(res.json().error.code, 'quota_exceeded');
      }
      for (const res of accepted) {
        const status = await t.request({ method: 'GET', url: `/api/v1/status/${res.json().id}`, key: a.testKey });
        assert.equal(status.statusCode, 200, status.body);
      }
      const usage = await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey });
      assert.equal(usage.json().usage.total_sent, 17);
      assert.equal(usage.json().limits.remaining, 0);
      // The usage headers of the accepted ones count down without a gap or a repeat.
      const remaining = accepted.map((res) => Number(res.headers['x-usage-remaining'])).sort((x, y) => x - y);
      assert.deepEqual(remaining, Array.from({ length: 17 }, (_, i) => i));
    } finally {
      await t.close();
    }
  });

  it('a burst over two platforms, some sends with a key: the total and each platform count every accepted send once', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount({ quota: 1_000 });
      const results = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          t.send(a.testKey, { ...defaultSendBody(i % 3 === 0 ? 'linkedin' : 'telegram', t.voiceUrl) }, i % 5 === 0 ? { 'idempotency-key': `burst-${i}` } : {}),
        ),
      );
      for (const res of results) assert.equal(res.statusCode, 202, res.body);
      const usage = await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey });
      assert.equal(usage.json().usage.total_sent, 30);
      assert.deepEqual(usage.json().usage.by_platform, { linkedin: 10, telegram: 20, whatsapp: 0 });
      const remaining = results.map((res) => Number(res.headers['x-usage-remaining'])).sort((x, y) => x - y);
      assert.deepEqual(remaining, Array.from({ length: 30 }, (_, i) => 970 + i), 'each send its own count');
    } finally {
      await t.close();
    }
  });

  it('one Idempotency-Key repeated inside a burst, among other sends: one message for it, the others unaffected', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount({ quota: 1_000 });
      const key = randomUUID();
      const body = defaultSendBody('telegram', t.voiceUrl);
      const requests: Array<Promise<InjectResult>> = [];
      for (let i = 0; i < 30; i++) {
        requests.push(i % 3 === 0 ? t.send(a.testKey, body, { 'Idempotency-Key': key }) : t.send(a.testKey, { ...body, recipient: String(300_000 + i) }));
      }
      const results = await Promise.all(requests);
      const keyed = results.filter((_, i) => i % 3 === 0);
      const others = results.filter((_, i) => i % 3 !== 0);
      for (const res of results) assert.equal(res.statusCode, 202, res.body);
      assert.equal(new Set(keyed.map((res) => res.json().id)).size, 1, 'one message for the repeated key');
      assert.equal(keyed.filter((res) => res.headers['idempotent-replayed'] === 'true').length, keyed.length - 1);
      assert.equal(new Set(others.map((res) => res.json().id)).size, others.length);
      const usage = await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey });
      assert.equal(usage.json().usage.total_sent, others.length + 1);
    } finally {
      await t.close();
    }
  });

  it('a send that fails inside a batch fails alone: the others of its batch are accepted, counted and readable', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount({ quota: 1_000 });
      const first = await t.send(a.testKey, defaultSendBody('telegram', t.voiceUrl));
      assert.equal(first.statusCode, 202, first.body);
      const stored = await t.app.services.db.kysely.selectFrom('messages').selectAll().where('id', '=', first.json().id).executeTakeFirstOrThrow();
      // Five new messages and, in the same batch, one that reuses the first one's id (the store refuses it).
      const fresh = Array.from({ length: 5 }, (_, i) => ({ ...stored, id: newMessageId(), recipient: String(400_000 + i) }));
      const results = await Promise.allSettled(
        [...fresh.slice(0, 3), stored, ...fresh.slice(3)].map((message) => t.app.services.db.hotPath.acceptSend({ message, monthlyQuota: 1_000 })),
      );
      assert.equal(results[3]!.status, 'rejected', 'the duplicate id is refused');
      const accepted = results.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<{ kind: string }>).value.kind);
      assert.deepEqual(accepted, ['accepted', 'accepted', 'accepted', 'accepted', 'accepted']);
      for (const message of fresh) {
        const status = await t.request({ method: 'GET', url: `/api/v1/status/${message.id}`, key: a.testKey });
        assert.equal(status.statusCode, 200, status.body);
        assert.equal(status.json().recipient, message.recipient);
      }
      const usage = await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey });
      assert.equal(usage.json().usage.total_sent, 6, 'the refused one is not counted');
    } finally {
      await t.close();
    }
  });
});
