/**
 * R8: rolling restart under load. 2 API + 2 worker processes; while REL_MESSAGES (2,000) sends
 * flow, each process in turn gets SIGTERM, is waited for, and is started again. Shows: 0 lost and
 * 0 duplicates at the fake Telegram (a graceful stop finishes or hands back what it holds).
 *   npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r8-rolling-restart.ts
 */
import { randomBytes } from 'node:crypto';
import { createAccount, sleep } from './cluster.js';
import { duplicates, lostMessages, sendLoad, waitSettled } from './load.js';
import { writeReliabilitySection } from './report.js';
import { withCluster } from './run.js';

const MESSAGES = Number(process.env.REL_MESSAGES ?? 2_000);
const run = randomBytes(4).toString('hex');
await withCluster({}, async ({ cluster, telegram, audio }) => {
  for (const [name, kind] of [['api-1', 'api'], ['api-2', 'api'], ['worker-1', 'worker'], ['worker-2', 'worker']] as const) await cluster.start(name, kind);
  const { liveKey } = createAccount(cluster);
  const t0 = Date.now();
  const events: string[] = [];
  const exits: string[] = [];
  let loadDone = false;
  const load = sendLoad({ cluster, key: liveKey, audioUrl: audio.url, count: MESSAGES, concurrency: 12, run }).finally(() => {
    loadDone = true;
  });
  const rolling = (async () => {
    await sleep(3_000);
    for (const name of ['worker-1', 'api-1', 'worker-2', 'api-2']) {
      const proc = cluster.procs.get(name)!;
      const t = Date.now();
      proc.child.kill('SIGTERM');
      const exit = await proc.exited;
      exits.push(`${name}: exit ${exit.code ?? exit.signal} after ${Date.now() - t} ms`);
      events.push(`${((Date.now() - t0) / 1000).toFixed(1)} s: ${name} stopped (SIGTERM)`);
      await cluster.start(name, proc.kind);
      events.push(`${((Date.now() - t0) / 1000).toFixed(1)} s: ${name} started again${loadDone ? ' (load already over)' : ''}`);
      await sleep(1_500);
    }
  })();
  const [result] = await Promise.all([load, rolling]);
  const settled = await waitSettled(5 * 60_000);
  const lost = await lostMessages(result.records);
  const dup = duplicates(await telegram.stats());
  const notAccepted = result.records.filter((r) => r.messageId === undefined).length;
  const md = `| figure | value |
|---|---|
| sends | ${MESSAGES} (12 at a time over the running API processes; a send without an answer, or a 503 while draining, is retried with its Idempotency-Key) |
| accepted (202) / never accepted | ${lost.accepted} / ${notAccepted} |
| answers by status | ${Object.entries(result.statusCounts).map(([k, v]) => `${k}: ${v}`).join(', ')} |
| lost (accepted, not in the database) | **${lost.missing}** |
| accepted and unsettled at the end | **${lost.unsettled}** |
| delivered / failed | ${settled.byStatus.delivered ?? 0} / ${settled.byStatus.failed ?? 0} |
| messages delivered more than once at the fake Telegram | **${dup.duplicated}** (${dup.extraCopies} extra copies) |
| how each process ended | ${exits.join('; ')} |
| processes that exited by themselves | ${cluster.unexpectedExits.length === 0 ? 'none' : cluster.unexpectedExits.join('; ')} |
| first send to all settled | ${((Date.now() - t0) / 1000).toFixed(0)} s |

Timeline: ${events.join('; ')}.

Verdict: ${lost.missing === 0 && lost.unsettled === 0 ? '0 lost' : 'MESSAGES LOST OR UNSETTLED'}; ${dup.duplicated === 0 ? '0 duplicates' : `${dup.duplicated} DUPLICATES`}.`;
  console.log(md);
  await writeReliabilitySection('r8', 'R8 — rolling restart under load', 'npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r8-rolling-restart.ts', md);
  console.log(`logs in ${cluster.runDir}`);
});
