import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { sql, type Kysely } from 'kysely';
import * as processAffinity from '../src/store/migrations/006_process_affinity.js';
import * as usageByPlatform from '../src/store/migrations/006b_usage_by_platform.js';
import {
  STORAGE_LABEL,
  closeSharedAudio,
  connectedSandboxSession,
  defaultSendBody,
  startTestApp,
  withRestartableStorage,
} from './fixtures/app-harness.js';

after(async () => {
  await closeSharedAudio();
});

describe(`usage per platform as rows, process affinity (${STORAGE_LABEL})`, () => {
  it('counts kept in the per-platform columns of an older storage are what GET /usage shows after the upgrade', async () => {
    await withRestartableStorage(async (reuse) => {
      const first = await startTestApp({ reuse });
      let testKey: string;
      let before: unknown;
      try {
        const account = await first.createAccount();
        testKey = account.testKey;
        const session = await connectedSandboxSession(first, testKey);
        const sends = [
          defaultSendBody('telegram', first.voiceUrl),
          defaultSendBody('telegram', first.voiceUrl),
          defaultSendBody('whatsapp', first.voiceUrl, session),
          defaultSendBody('linkedin', first.voiceUrl),
        ];
        for (const body of sends) {
          const res = await first.send(testKey, body);
          assert.equal(res.statusCode, 202, res.body);
          await first.waitForStatus(testKey, res.json().id, ['delivered']);
        }
        const usage = await first.request({ method: 'GET', url: '/api/v1/usage', key: testKey });
        assert.equal(usage.statusCode, 200, usage.body);
        before = usage.json().usage;
        assert.deepEqual(before, {
          total_sent: 4,
          total_delivered: 4,
          total_failed: 0,
          by_platform: { linkedin: 1, telegram: 2, whatsapp: 1 },
        });
        // Back to the storage as it was before per-platform rows: one column per platform.
        const db = first.app.services.db.kysely as unknown as Kysely<unknown>;
        await usageByPlatform.down(db);
        await processAffinity.down(db);
        await sql`delete from kysely_migration where name in ('006_process_affinity', '006b_usage_by_platform')`.execute(db);
        const columns = await sql<{ linkedin: number; telegram: number; whatsapp: number }>`select linkedin, telegram, whatsapp from usage_periods`.execute(db);
        assert.deepEqual(
          columns.rows.map((r) => [Number(r.linkedin), Number(r.telegram), Number(r.whatsapp)]),
          [[1, 2, 1]],
          'the older shape holds the counts in its columns',
        );
      } finally {
        await first.close();
      }

      // The upgrade runs at start.
      const second = await startTestApp({ reuse });
      try {
        const usage = await second.request({ method: 'GET', url: '/api/v1/usage', key: testKey! });
        assert.equal(usage.statusCode, 200, usage.body);
        assert.deepEqual(usage.json().usage, before);
        const res = await second.send(testKey!, defaultSendBody('linkedin', second.voiceUrl));
        assert.equal(res.statusCode, 202, res.body);
        await second.waitForStatus(testKey!, res.json().id, ['delivered']);
        const after = await second.request({ method: 'GET', url: '/api/v1/usage', key: testKey! });
        assert.deepEqual(after.json().usage.by_platform, { linkedin: 2, telegram: 2, whatsapp: 1 });
      } finally {
        await second.close();
      }
    });
  });
});
