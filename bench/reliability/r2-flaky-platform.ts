/**
 * R2: a flaky platform. The fake Bot API answers 30 % of calls with a 5xx, 10 % with 429 and a
 * retry_after of 3 s, and never answers 5 %. 2 API + 2 worker processes, REL_MESSAGES (300) sends.
 * Shows: 100 % delivered; no attempt before its retry_after; the backoff schedule as observed.
 *   npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r2-flaky-platform.ts
 */
import { randomBytes } from 'node:crypto';
import { createAccount } from './cluster.js';
import { duplicates, lostMessages, sendLoad, waitSettled } from './load.js';
import { writeReliabilitySection } from './report.js';
import { withCluster } from './run.js';

const MESSAGES = Number(process.env.REL_MESSAGES ?? 300);
const RETRY_AFTER_S = 3;
const run = randomBytes(4).toString('hex');
await withCluster({ faults: { serverError: 0.3, rateLimited: 0.1, retryAfterSeconds: RETRY_AFTER_S, hang: 0.05 } }, async ({ cluster, telegram, audio }) => {
  for (const [name, kind] of [['api-1', 'api'], ['api-2', 'api'], ['worker-1', 'worker'], ['worker-2', 'worker']] as const) await cluster.start(name, kind);
  const { liveKey } = createAccount(cluster);
  const t0 = Date.now();
  const result = await sendLoad({ cluster, key: liveKey, audioUrl: audio.url, count: MESSAGES, concurrency: 8, run });
  const settled = await waitSettled(8 * 60_000);
  const lost = await lostMessages(result.records);
  const stats = await telegram.stats();
  const dup = duplicates(stats);

  const byToken = new Map<string, typeof stats.calls>();
  for (const c of stats.calls) byToken.set(c.token, [...(byToken.get(c.token) ?? []), c]);
  let earlyAfter429 = 0;
  let checked429 = 0;
  let minMarginMs = Infinity;
  const gapsAfterFailure: number[][] = [];
  const replies: Record<string, number> = {};
  for (const calls of byToken.values()) {
    calls.sort((a, b) => a.at - b.at);
    for (let k = 0; k < calls.length; k++) {
      const c = calls[k]!;
      const label = c.status === 0 ? 'no answer' : String(c.status);
      replies[label] = (replies[label] ?? 0) + 1;
      const nextCall = calls[k + 1];
      if (!nextCall) continue;
      const gap = nextCall.at - c.at;
      if (c.status === 429 && c.retryAfter !== undefined) {
        checked429++;
        const margin = gap - c.retryAfter * 1000;
        minMarginMs = Math.min(minMarginMs, margin);
        if (margin < 0) earlyAfter429++;
      } else if (c.status >= 500 || c.status === 0) {
        (gapsAfterFailure[k] ??= []).push(gap);
      }
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  const schedule = gapsAfterFailure
    .map((gaps, k) => (gaps && gaps.length ? `| ${k + 1} → ${k + 2} | ${gaps.length} | ${(median(gaps) / 1000).toFixed(1)} s | ${(Math.min(...gaps) / 1000).toFixed(1)}–${(Math.max(...gaps) / 1000).toFixed(1)} s |` : null))
    .filter(Boolean)
    .join('\n');
  const attempts = [...byToken.values()].map((c) => c.length);
  const md = `| figure | value |
|---|---|
| sends (live, one bot token and chat each) | ${MESSAGES}; accepted ${lost.accepted} |
| fake Bot API faults | 30 % 5xx, 10 % 429 with \`retry_after: ${RETRY_AFTER_S}\`, 5 % never answered |
| calls received, by answer | ${Object.entries(replies).map(([k, v]) => `${k}: ${v}`).join(', ')} |
| attempts per message | mean ${(attempts.reduce((a, b) => a + b, 0) / Math.max(1, attempts.length)).toFixed(2)}, max ${Math.max(...attempts)} |
| delivered / failed / unsettled | **${settled.byStatus.delivered ?? 0}** / ${settled.byStatus.failed ?? 0}${Object.keys(lost.failed).length ? ` (${Object.entries(lost.failed).map(([k, v]) => `${k}: ${v}`).join(', ')})` : ''} / ${lost.unsettled} |
| delivered share | **${((100 * (settled.byStatus.delivered ?? 0)) / Math.max(1, lost.accepted)).toFixed(1)} %** |
| attempts after a 429 checked / made before its retry_after | ${checked429} / **${earlyAfter429}** (smallest margin ${Number.isFinite(minMarginMs) ? `${(minMarginMs / 1000).toFixed(2)} s` : 'n/a'}) |
| messages the fake accepted more than once | ${dup.duplicated} (a call never answered may have been stored: the documented rare double) |
| first send to all settled | ${((Date.now() - t0) / 1000).toFixed(0)} s${settled.timedOut ? ' (DEADLINE REACHED)' : ''} |

Backoff observed after a 5xx or an unanswered call (time between one call's arrival and the next, which includes
the timeout of an unanswered call and the audio preparation):

| attempt | retries seen | median gap | range |
|---|---|---|---|
${schedule}

Verdict: ${(settled.byStatus.delivered ?? 0) === lost.accepted ? '100 % delivered' : 'NOT ALL DELIVERED'}; ${earlyAfter429 === 0 ? 'no attempt before its retry_after' : `${earlyAfter429} ATTEMPTS BEFORE retry_after`}.`;
  console.log(md);
  await writeReliabilitySection('r2', 'R2 — a flaky platform', 'npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r2-flaky-platform.ts', md);
  console.log(`logs in ${cluster.runDir}`);
});
