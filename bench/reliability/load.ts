/** The load driver (bounded loops) and what is counted after it: messages lost, unsettled, delivered twice. */
import type { FakeStats } from './fake-telegram-process.js';
import { sleep, type Cluster } from './cluster.js';
import { botToken } from './fakes.js';
import { query } from './postgres.js';

export interface SendRecord {
  i: number;
  token: string;
  messageId?: string;
  statuses: number[];
  networkErrors: number;
  maxLatencyMs: number;
}

export interface LoadResult {
  records: SendRecord[];
  statusCounts: Record<string, number>;
  /** Answers slower than 5 s, and requests that never got one within 10 s. */
  slow: number;
  timeouts: number;
  ms: number;
  /** Every answer (or failure) in order, with whether it carried Retry-After. */
  timeline: { at: number; status: number | string; retryAfter: boolean }[];
}

/**
 * Sends `count` voice notes to the fake Telegram (live key, a bot token and chat id of their own
 * each), `concurrency` at a time, round-robin over the running API processes. A send that gets no
 * answer or a 503 is retried with the same Idempotency-Key on the next process (as a careful client
 * does), at most 40 times; `onProgress` runs after each accepted send.
 */
export async function sendLoad(options: {
  cluster: Cluster;
  key: string;
  audioUrl: string;
  count: number;
  concurrency: number;
  run: string;
  onProgress?: (accepted: number) => void;
  /** Pause between two sends of one lane (paced load). */
  gapMs?: number;
  /** Stop taking new sends once this says so (time-bounded load). */
  until?: () => boolean;
}): Promise<LoadResult> {
  const timeline: { at: number; status: number | string; retryAfter: boolean }[] = [];
  const records: SendRecord[] = [];
  const statusCounts: Record<string, number> = {};
  let slow = 0;
  let timeouts = 0;
  let next = 0;
  let accepted = 0;
  let rr = 0;
  const started = Date.now();
  async function lane(): Promise<void> {
    for (;;) {
      const i = next++;
      if (i >= options.count || options.until?.()) return;
      const token = botToken(options.run, i);
      const rec: SendRecord = { i, token, statuses: [], networkErrors: 0, maxLatencyMs: 0 };
      records.push(rec);
      const body = JSON.stringify({ platform: 'telegram', recipient: String(700000000 + i), audio_url: options.audioUrl, session: { bot_token: token } });
      for (let attempt = 0; attempt < 40 && rec.messageId === undefined; attempt++) {
        const apis = options.cluster.apis();
        if (apis.length === 0) {
          await sleep(250);
          continue;
        }
        const base = apis[rr++ % apis.length]!;
        const t0 = Date.now();
        try {
          const res = await fetch(`${base}/api/v1/send`, {
            method: 'POST',
            headers: { authorization: `Bearer ${options.key}`, 'content-type': 'application/json', 'idempotency-key': `${options.run}-${i}` },
            body,
            signal: AbortSignal.timeout(10_000),
          });
          const text = await res.text();
          const ms = Date.now() - t0;
          rec.maxLatencyMs = Math.max(rec.maxLatencyMs, ms);
          if (ms > 5_000) slow++;
          rec.statuses.push(res.status);
          timeline.push({ at: Date.now(), status: res.status, retryAfter: res.headers.get('retry-after') !== null });
          statusCounts[res.status] = (statusCounts[res.status] ?? 0) + 1;
          if (res.status === 202) {
            rec.messageId = (JSON.parse(text) as { id: string }).id;
            accepted++;
            options.onProgress?.(accepted);
          } else if (res.status === 503 || res.status === 429) {
            await sleep(Math.min(5_000, 1_000 * Number(res.headers.get('retry-after') ?? 1)));
          } else {
            break;
          }
        } catch (err) {
          const ms = Date.now() - t0;
          rec.maxLatencyMs = Math.max(rec.maxLatencyMs, ms);
          if ((err as Error).name === 'TimeoutError') timeouts++;
          rec.networkErrors++;
          timeline.push({ at: Date.now(), status: (err as Error).name === 'TimeoutError' ? 'timeout' : 'network_error', retryAfter: false });
          statusCounts.network_error = (statusCounts.network_error ?? 0) + 1;
          await sleep(200);
        }
      }
      if (options.gapMs) await sleep(options.gapMs);
    }
  }
  await Promise.all(Array.from({ length: options.concurrency }, () => lane()));
  return { records, statusCounts, slow, timeouts, ms: Date.now() - started, timeline };
}

/** Polls the database until no message is queued or processing (or the deadline); returns counts by status. */
export async function waitSettled(timeoutMs: number): Promise<{ byStatus: Record<string, number>; settledInMs: number; timedOut: boolean }> {
  const started = Date.now();
  for (;;) {
    let rows: { status: string; n: number }[] = [];
    try {
      rows = await query<{ status: string; n: number }>('select status, count(*)::int as n from messages group by status');
    } catch {
      // storage away for a moment
    }
    const byStatus = Object.fromEntries(rows.map((r) => [r.status, r.n]));
    const open = (byStatus.queued ?? 0) + (byStatus.processing ?? 0);
    if (rows.length > 0 && open === 0) return { byStatus, settledInMs: Date.now() - started, timedOut: false };
    if (Date.now() - started > timeoutMs) return { byStatus, settledInMs: Date.now() - started, timedOut: true };
    await sleep(1_000);
  }
}

/** Accepted ids against the database: every 202 must have a row, and every row must be settled. */
export async function lostMessages(records: SendRecord[]): Promise<{ accepted: number; missing: number; unsettled: number; failed: Record<string, number> }> {
  const ids = records.map((r) => r.messageId).filter((id): id is string => id !== undefined);
  const rows = await query<{ id: string; status: string; error_code: string | null }>('select id, status, error_code from messages');
  const byId = new Map(rows.map((r) => [r.id, r]));
  let missing = 0;
  let unsettled = 0;
  const failed: Record<string, number> = {};
  for (const id of ids) {
    const row = byId.get(id);
    if (!row) missing++;
    else if (row.status !== 'delivered' && row.status !== 'failed') unsettled++;
    else if (row.status === 'failed') failed[row.error_code ?? 'unknown'] = (failed[row.error_code ?? 'unknown'] ?? 0) + 1;
  }
  return { accepted: ids.length, missing, unsettled, failed };
}

/** Per message (bot token): how many times the fake accepted it (200). More than one is a duplicate at the platform. */
export function duplicates(stats: FakeStats): { acceptedAtPlatform: number; duplicated: number; extraCopies: number } {
  const ok = new Map<string, number>();
  for (const c of stats.calls) if (c.status === 200) ok.set(c.token, (ok.get(c.token) ?? 0) + 1);
  let duplicated = 0;
  let extraCopies = 0;
  for (const n of ok.values()) {
    if (n > 1) {
      duplicated++;
      extraCopies += n - 1;
    }
  }
  return { acceptedAtPlatform: ok.size, duplicated, extraCopies };
}
