/**
 * R1: 2 API + 2 worker processes on PostgreSQL + Redis, REL_MESSAGES (5,000) sends to the fake
 * Telegram; `kill -9` one worker, then one API process, mid-load; both started again. Shows: accepted
 * = settled, 0 lost; duplicates at the platform, against the messages in flight at the kill.
 *   npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r1-kill9.ts
 */
import { randomBytes } from 'node:crypto';
import { createAccount, sleep } from './cluster.js';
import { duplicates, lostMessages, sendLoad, waitSettled } from './load.js';
import { query } from './postgres.js';
import { writeReliabilitySection } from './report.js';
import { withCluster } from './run.js';

const MESSAGES = Number(process.env.REL_MESSAGES ?? 5_000);
const run = randomBytes(4).toString('hex');
await withCluster({}, async ({ cluster, telegram, audio }) => {
  await cluster.start('api-1', 'api');
  await cluster.start('api-2', 'api');
  await cluster.start('worker-1', 'worker');
  await cluster.start('worker-2', 'worker');
  const { liveKey } = createAccount(cluster);

  let inFlightAtWorkerKill = -1;
  let processingAtApiKill = -1;
  const events: string[] = [];
  const t0 = Date.now();
  let killedWorker = false;
  let killedApi = false;
  const load = sendLoad({
    cluster,
    key: liveKey,
    audioUrl: audio.url,
    count: MESSAGES,
    concurrency: 16,
    run,
    onProgress: (accepted) => {
      if (!killedWorker && accepted >= MESSAGES * 0.3) {
        killedWorker = true;
        void (async () => {
          // What any worker holds right now bounds what the killed one had in hand.
          inFlightAtWorkerKill = (await query<{ n: number }>("select count(*)::int as n from messages where status = 'processing' and lease_owner is not null"))[0]!.n;
          cluster.procs.get('worker-1')!.child.kill('SIGKILL');
          events.push(`${((Date.now() - t0) / 1000).toFixed(1)} s: kill -9 worker-1 (${inFlightAtWorkerKill} messages held by workers)`);
          await sleep(2_000);
          await cluster.start('worker-1', 'worker');
          events.push(`${((Date.now() - t0) / 1000).toFixed(1)} s: worker-1 started again`);
        })();
      }
      if (!killedApi && accepted >= MESSAGES * 0.6) {
        killedApi = true;
        void (async () => {
          processingAtApiKill = (await query<{ n: number }>("select count(*)::int as n from messages where status = 'processing'"))[0]!.n;
          cluster.procs.get('api-1')!.child.kill('SIGKILL');
          events.push(`${((Date.now() - t0) / 1000).toFixed(1)} s: kill -9 api-1`);
          await sleep(2_000);
          await cluster.start('api-1', 'api');
          events.push(`${((Date.now() - t0) / 1000).toFixed(1)} s: api-1 started again`);
        })();
      }
    },
  });
  const result = await load;
  events.push(`${((Date.now() - t0) / 1000).toFixed(1)} s: all sends answered`);
  // A killed worker's leases run out after 2 minutes; then others take its messages.
  const settled = await waitSettled(6 * 60_000);
  events.push(`${((Date.now() - t0) / 1000).toFixed(1)} s: ${settled.timedOut ? 'still unsettled at the deadline' : 'every message settled'}`);
  const lost = await lostMessages(result.records);
  const dup = duplicates(await telegram.stats());
  const notAccepted = result.records.filter((r) => r.messageId === undefined).length;
  const md = `| figure | value |
|---|---|
| sends | ${MESSAGES} (16 at a time, round-robin over the running API processes; a send without an answer is retried with its Idempotency-Key) |
| accepted (202) | ${lost.accepted} |
| sends never accepted | ${notAccepted} |
| answers by status | ${Object.entries(result.statusCounts).map(([k, v]) => `${k}: ${v}`).join(', ')} |
| accepted but not in the database (lost) | **${lost.missing}** |
| accepted and still queued/processing at the end | **${lost.unsettled}** |
| settled: delivered / failed | ${settled.byStatus.delivered ?? 0} / ${settled.byStatus.failed ?? 0}${Object.keys(lost.failed).length ? ` (${Object.entries(lost.failed).map(([k, v]) => `${k}: ${v}`).join(', ')})` : ''} |
| voice notes the fake Telegram accepted | ${dup.acceptedAtPlatform} |
| messages delivered more than once at the platform | **${dup.duplicated}** (${dup.extraCopies} extra copies) |
| messages held by workers when worker-1 was killed (the bound) | ${inFlightAtWorkerKill} |
| messages processing when api-1 was killed | ${processingAtApiKill} |
| processes that exited by themselves | ${cluster.unexpectedExits.length === 0 ? 'none' : cluster.unexpectedExits.join('; ')} |
| time from the first send to all settled | ${((Date.now() - t0) / 1000).toFixed(0)} s (a killed worker's leases run out after 120 s) |

Timeline: ${events.join('; ')}.

Verdict: ${lost.missing === 0 && lost.unsettled === 0 && lost.accepted === MESSAGES - notAccepted ? '0 lost' : 'MESSAGES LOST OR UNSETTLED'}; ${dup.duplicated <= inFlightAtWorkerKill ? `duplicates (${dup.duplicated}) within the bound (${inFlightAtWorkerKill})` : `duplicates (${dup.duplicated}) ABOVE the bound (${inFlightAtWorkerKill})`}.`;
  console.log(md);
  await writeReliabilitySection('r1', 'R1 — kill -9 a worker, then an API process, mid-load', 'npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r1-kill9.ts', md);
  console.log(`logs in ${cluster.runDir}`);
});
