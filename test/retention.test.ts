import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { SENDER_DAYS_KEEP_DAYS, utcDay } from '../src/core/rhythm.js';
import { purgeOldMessages, purgeOldSenderDays, startRetention } from '../src/housekeeping/retention.js';
import { createLogger } from '../src/logger.js';
import { eventually } from './fixtures/eventually.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, withRestartableStorage, type TestApp } from './fixtures/app-harness.js';

/* MESSAGE_RETENTION_DAYS: old settled messages go, with their detail rows; nothing unsettled, nothing recent, no usage. */

const DAY_MS = 86_400_000;

after(async () => {
  await closeSharedAudio();
});

async function sendSettled(t: TestApp, key: string, recipients: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const recipient of recipients) {
    const res = await t.send(key, { platform: 'telegram', recipient, audio_url: t.voiceUrl, session: { bot_token: TELEGRAM_TOKEN } });
    assert.equal(res.statusCode, 202, res.body);
    ids.push(res.json().id);
  }
  for (const id of ids) await t.waitForStatus(key, id, ['delivered', 'failed']);
  return ids;
}

async function age(t: TestApp, ids: string[], days: number, status?: 'queued' | 'processing'): Promise<void> {
  // A message put back in the queue is due tomorrow, one in processing is under another worker's lease: this app's worker leaves both alone.
  const unsettled = status === 'queued' ? { status, next_attempt_at: Date.now() + DAY_MS } : status === 'processing' ? { status, lease_owner: 'elsewhere', lease_expires_at: Date.now() + DAY_MS } : {};
  await t.app.services.db.kysely
    .updateTable('messages')
    .set({ created_at: Date.now() - days * DAY_MS, ...unsettled })
    .where('id', 'in', ids)
    .execute();
}

const statusCode = async (t: TestApp, key: string, id: string): Promise<number> =>
  (await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key })).statusCode;

describe(`message retention (${STORAGE_LABEL})`, () => {
  test('deletes settled messages older than the retention, in batches, with their attempts, audio and receipts; keeps the rest and the usage', async () => {
    // The worker's own purge is off here (0 keeps everything): on a slow machine it would run before the
    // purge this test calls and take some of the four messages first.
    const t = await startTestApp({ worker: true, env: { MESSAGE_RETENTION_DAYS: '0' } });
    try {
      const { testKey: key } = await t.createAccount({ plan: 'scale' });
      // 10000000002 fails (recipient_not_found): failed messages are settled too.
      const ids = await sendSettled(t, key, ['100000001', '100000002', '100000003', '10000000002', '100000005', '100000006', '100000007']);
      const [oldA, oldB, oldC, oldFailed, oldQueued, oldProcessing, recent] = ids as [string, string, string, string, string, string, string];
      await age(t, [oldA, oldB, oldC, oldFailed], 91);
      await age(t, [oldQueued], 200, 'queued');
      await age(t, [oldProcessing], 200, 'processing');
      await age(t, [recent], 89);
      const db = t.app.services.db.kysely;
      // Detail rows of a message to be purged and of one to be kept (whatever the worker recorded already, plus these).
      for (const id of [oldA, recent]) {
        await db.insertInto('message_receipts').values({ message_id: id, kind: 'read', at: Date.now(), source: 'sandbox' }).onConflict((oc) => oc.doNothing()).execute();
        await db.insertInto('message_attempts').values({ id: `att_${id}`, message_id: id, attempt: 99, started_at: 1, ended_at: 2, outcome: 'delivered', error_code: null, error_message: null, next_attempt_at: null }).execute();
      }
      const usageBefore = (await t.request({ method: 'GET', url: '/api/v1/usage', key })).json();

      assert.equal(await purgeOldMessages(db, { days: 0 }), 0, '0 keeps everything');
      const purged = await purgeOldMessages(db, { days: 90, batchSize: 2, pauseMs: 0 });
      assert.equal(purged, 4, 'the four settled messages past 90 days, over several batches');

      for (const id of [oldA, oldB, oldC, oldFailed]) assert.equal(await statusCode(t, key, id), 404, `${id} is gone`);
      for (const id of [oldQueued, oldProcessing, recent]) assert.equal(await statusCode(t, key, id), 200, `${id} is kept`);
      for (const table of ['message_attempts', 'message_receipts', 'message_audio'] as const) {
        const left = await db.selectFrom(table).select('message_id').where('message_id', 'in', [oldA, oldB, oldC, oldFailed]).execute();
        assert.deepEqual(left, [], `no ${table} rows of purged messages`);
      }
      const kept = await db.selectFrom('message_attempts').select('id').where('message_id', '=', recent).execute();
      assert.ok(kept.some((row) => row.id === `att_${recent}`), 'detail rows of kept messages stay');
      const usageAfter = (await t.request({ method: 'GET', url: '/api/v1/usage', key })).json();
      assert.deepEqual(usageAfter, usageBefore, 'usage counters are kept');
      assert.equal(await purgeOldMessages(db, { days: 90 }), 0, 'a second run finds nothing');
    } finally {
      await t.close();
    }
  });

  test('the worker process runs it by itself, with MESSAGE_RETENTION_DAYS', async () => {
    await withRestartableStorage(async (reuse) => {
      let key: string;
      let ids: string[];
      {
        const t = await startTestApp({ worker: true, reuse });
        try {
          ({ testKey: key } = await t.createAccount({ plan: 'scale' }));
          ids = await sendSettled(t, key, ['200000001', '200000002']);
          await age(t, [ids[0]!], 8);
          await age(t, [ids[1]!], 6);
        } finally {
          await t.close();
        }
      }
      const t = await startTestApp({ worker: true, reuse, env: { MESSAGE_RETENTION_DAYS: '7' } });
      try {
        const deadline = Date.now() + 30_000;
        while ((await statusCode(t, key!, ids![0]!)) !== 404 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
        assert.equal(await statusCode(t, key!, ids![0]!), 404, 'the 8-day-old message is purged by the worker\'s housekeeping');
        assert.equal(await statusCode(t, key!, ids![1]!), 200, 'the 6-day-old one is kept');
      } finally {
        await t.close();
      }
    });
  });

  test("senders' daily counts older than 40 days go, the recent ones and the senders' first days stay, with retention off too", async () => {
    // The worker's own housekeeping is not started here: this test runs it when it wants.
    const t = await startTestApp({ worker: false });
    try {
      const db = t.app.services.db.kysely;
      const today = utcDay(Date.now());
      const daysAgo = (n: number): number => today - n * DAY_MS;
      await db.insertInto('senders').values({ sender_key: 'acct:live:telegram:bot', first_day: daysAgo(400) }).execute();
      await db
        .insertInto('sender_days')
        .values([41, 300, SENDER_DAYS_KEEP_DAYS, 1, 0].map((n) => ({ sender_key: 'acct:live:telegram:bot', day: daysAgo(n), sent: 3 })))
        .execute();
      const days = async (): Promise<number[]> =>
        (await db.selectFrom('sender_days').select('day').orderBy('day', 'desc').execute()).map((r) => Math.round((today - Number(r.day)) / DAY_MS));

      assert.equal(await purgeOldSenderDays(db, { pauseMs: 0 }), 2, 'the days 41 and 300 days ago');
      assert.deepEqual(await days(), [0, 1, SENDER_DAYS_KEEP_DAYS], 'today, yesterday and the 40th day stay');
      const sender = await db.selectFrom('senders').select('first_day').executeTakeFirstOrThrow();
      assert.equal(Number(sender.first_day), daysAgo(400), "the warm-up's first day is kept");
      assert.equal(await purgeOldSenderDays(db), 0, 'a second run finds nothing');

      // The worker's periodic housekeeping does it, even with MESSAGE_RETENTION_DAYS=0 (messages kept).
      await db.insertInto('sender_days').values({ sender_key: 'acct:live:telegram:bot', day: daysAgo(50), sent: 1 }).execute();
      const retention = startRetention(db, 0, createLogger('silent'), { firstRunMs: 0 });
      try {
        await eventually(async () => !(await days()).includes(50), 'the housekeeping run');
      } finally {
        await retention.stop();
      }
      assert.deepEqual(await days(), [0, 1, SENDER_DAYS_KEEP_DAYS]);
    } finally {
      await t.close();
    }
  });
});
