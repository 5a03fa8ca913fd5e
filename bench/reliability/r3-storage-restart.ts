/**
 * R3: PostgreSQL restarted during load, then Redis restarted. 2 API + 1 worker process under a
 * paced load of sends. Shows: 0 accepted lost; meanwhile only 503 with Retry-After (no 500, no
 * request hanging over 5 s); every process stays up and recovers without a restart of voicenote.
 * Restarts PostgreSQL and Redis, so it must hold the services lock exclusively:
 *   npm run build && flock -x -w 900 /tmp/voicenote-services.lock node --import tsx bench/reliability/r3-storage-restart.ts
 */
import { execSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { Redis } from 'ioredis';
import { createAccount, sleep } from './cluster.js';
import { duplicates, lostMessages, sendLoad, waitSettled } from './load.js';
import { query } from './postgres.js';
import { writeReliabilitySection } from './report.js';
import { withCluster } from './run.js';

const PG_VERSION = readdirSync('/etc/postgresql')[0]!;
const REDIS_START =
  'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log';

async function pgUp(): Promise<boolean> {
  try {
    await query('select 1');
    return true;
  } catch {
    return false;
  }
}
async function redisUp(): Promise<boolean> {
  const r = new Redis('redis://127.0.0.1:6379', { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}
/** Whatever happens in the run, both services are running when the script ends. */
async function ensureServices(): Promise<void> {
  if (!(await pgUp())) execSync(`pg_ctlcluster --skip-systemctl-redirect ${PG_VERSION} main start`, { stdio: 'ignore' });
  if (!(await redisUp())) execSync(REDIS_START, { stdio: 'ignore' });
}

const run = randomBytes(4).toString('hex');
// Whatever happened, PostgreSQL and Redis run again before the processes stop and after.
await withCluster({ beforeStop: ensureServices, afterStop: ensureServices }, async ({ cluster, telegram, audio }) => {
  for (const [name, kind] of [['api-1', 'api'], ['api-2', 'api'], ['worker-1', 'worker']] as const) await cluster.start(name, kind);
  const { liveKey } = createAccount(cluster);
  const t0 = Date.now();
  const marks: Record<string, number> = {};
  let stop = false;
  const load = sendLoad({ cluster, key: liveKey, audioUrl: audio.url, count: 1_000_000, concurrency: 6, gapMs: 100, run, until: () => stop });
  const faults = (async () => {
    await sleep(8_000);
    marks.pgRestart = Date.now();
    execSync(`pg_ctlcluster --skip-systemctl-redirect ${PG_VERSION} main restart -m fast`, { stdio: 'ignore' });
    marks.pgBack = Date.now();
    await sleep(20_000);
    marks.redisStop = Date.now();
    execSync('redis-cli -h 127.0.0.1 -p 6379 shutdown nosave', { stdio: 'ignore' });
    await sleep(5_000);
    execSync(REDIS_START, { stdio: 'ignore' });
    marks.redisBack = Date.now();
    await sleep(15_000);
    stop = true;
  })();
  const [result] = await Promise.all([load, faults]);
  const settled = await waitSettled(5 * 60_000);
  const lost = await lostMessages(result.records);
  const dup = duplicates(await telegram.stats());
  const tl = result.timeline;
  const during = (from: number, to: number) => tl.filter((e) => e.at >= from && e.at <= to);
  const count = (events: typeof tl) => {
    const c: Record<string, number> = {};
    for (const e of events) c[String(e.status)] = (c[String(e.status)] ?? 0) + 1;
    return Object.entries(c).map(([k, v]) => `${k}: ${v}`).join(', ') || 'none';
  };
  const pgWindow = during(marks.pgRestart!, marks.pgBack! + 10_000);
  const redisWindow = during(marks.redisStop!, marks.redisBack! + 5_000);
  const fiveHundreds = tl.filter((e) => typeof e.status === 'number' && e.status >= 500 && e.status !== 503).length;
  const unavailableWithout = tl.filter((e) => e.status === 503 && !e.retryAfter).length;
  const firstOkAfter = (t: number) => tl.find((e) => e.at > t && e.status === 202)?.at;
  const recoveryPg = firstOkAfter(marks.pgBack!);
  const recoveryRedis = firstOkAfter(marks.redisBack!);
  const maxLatency = Math.max(...result.records.map((r) => r.maxLatencyMs));
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const md = `| figure | value |
|---|---|
| load | 6 lanes, a send every 100 ms each, for ${s(result.ms)}; live Telegram sends to the fake Bot API |
| PostgreSQL restart (\`pg_ctlcluster … restart -m fast\`) | at ${s(marks.pgRestart! - t0)}, took ${s(marks.pgBack! - marks.pgRestart!)} |
| Redis stopped (\`shutdown nosave\`) and started 5 s later | at ${s(marks.redisStop! - t0)} |
| answers from the PostgreSQL restart to 10 s after | ${count(pgWindow)} |
| answers while Redis was down (and 5 s after) | ${count(redisWindow)} |
| answers over the whole run | ${count(tl)} |
| 5xx other than 503 | **${fiveHundreds}** |
| 503 without Retry-After | **${unavailableWithout}** |
| answers slower than 5 s / no answer in 10 s | **${result.slow}** / **${result.timeouts}** (slowest: ${maxLatency} ms) |
| first 202 after PostgreSQL was back / after Redis was back | ${recoveryPg ? s(recoveryPg - marks.pgBack!) : 'NONE'} / ${recoveryRedis ? s(recoveryRedis - marks.redisBack!) : 'NONE'} |
| accepted / lost / unsettled at the end | ${lost.accepted} / **${lost.missing}** / **${lost.unsettled}** |
| delivered / failed | ${settled.byStatus.delivered ?? 0} / ${settled.byStatus.failed ?? 0}${Object.keys(lost.failed).length ? ` (${Object.entries(lost.failed).map(([k, v]) => `${k}: ${v}`).join(', ')})` : ''} |
| messages delivered more than once at the fake Telegram | ${dup.duplicated} |
| processes that exited by themselves | ${cluster.unexpectedExits.length === 0 ? 'none (recovered without a restart of voicenote)' : `**${cluster.unexpectedExits.join('; ')}**`} |

Verdict: ${lost.missing === 0 && lost.unsettled === 0 ? '0 accepted lost' : 'ACCEPTED MESSAGES LOST OR UNSETTLED'}; ${fiveHundreds === 0 && unavailableWithout === 0 ? 'only 503 with Retry-After meanwhile' : 'OTHER ERRORS THAN 503 WITH RETRY-AFTER'}; ${result.slow === 0 && result.timeouts === 0 ? 'no request over 5 s' : 'REQUESTS OVER 5 S'}; ${cluster.unexpectedExits.length === 0 && recoveryPg && recoveryRedis ? 'recovered by itself' : 'DID NOT RECOVER BY ITSELF'}.`;
  console.log(md);
  await writeReliabilitySection('r3', 'R3 — PostgreSQL restarted under load, then Redis', 'npm run build && flock -x -w 900 /tmp/voicenote-services.lock node --import tsx bench/reliability/r3-storage-restart.ts', md);
  console.log(`logs in ${cluster.runDir}`);
});
