/**
 * SQLite write-lock waits and the event loop: `node --import tsx bench/sqlite-lock-wait.ts`.
 *
 * Another process on the same database file (a CLI command, a backup, a second worker) holds the write
 * lock for long stretches: here a child process takes it with BEGIN IMMEDIATE, keeps it BENCH_LOCK_MS
 * (2,000), lets go for BENCH_GAP_MS (200), BENCH_LOCKS (3) times. Meanwhile the service (the app built
 * with createApp, worker off, SQLite) answers a steady stream of requests over loopback: POST /send and
 * GET /usage, BENCH_CLIENTS (4) clients one request after another, each pausing 10 ms between two.
 * The event loop's delay is sampled with monitorEventLoopDelay (10 ms resolution) for the whole stretch.
 *
 * Run three times in one go, on fresh data directories: with nobody else on the file (the machine's own
 * noise), with SQLite's busy_timeout at the old 5,000 ms (every wait for the lock held the event loop),
 * and with the service's setting (no busy timeout; the waits happen between tries, off the event loop:
 * src/store/sqlite-lock-wait.ts). Each run also checks that every 202 is a message row (nothing lost)
 * and no more (nothing doubled). Then times single tries for a held lock (BENCH_TRIES, 50), with the
 * service's busy timeout and with 20 ms.
 * Writes the section between <!-- bench:sqlite-lock-wait:start --> and <!-- bench:sqlite-lock-wait:end -->
 * of BENCHMARKS.md (BENCH_NO_WRITE=1: print only).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import SqliteDatabase from 'better-sqlite3';
import { SQLITE_FILE } from '../src/store/db.js';
import { isSqliteBusy, SQLITE_BUSY_TIMEOUT_MS } from '../src/store/sqlite-lock-wait.js';
import { benchAccount, buildApp, openStorage } from './api/storage.js';
import { intEnv } from './env.js';
import { botToken, startAudio } from './reliability/fakes.js';
import { commandLine, machineDescription, writeSection } from './report.js';

const LOCK_MS = intEnv('BENCH_LOCK_MS', 2_000, 1);
const GAP_MS = intEnv('BENCH_GAP_MS', 200, 0);
const LOCKS = intEnv('BENCH_LOCKS', 3, 1);
const CLIENTS = intEnv('BENCH_CLIENTS', 4, 1);
const TRIES = intEnv('BENCH_TRIES', 50, 1);
const OLD_BUSY_TIMEOUT_MS = 5_000;

interface RunResult {
  label: string;
  busyTimeoutMs: number;
  maxDelayMs: number;
  p99DelayMs: number;
  answered: number;
  reads: number;
  slowestRequestMs: number;
  accepted: number;
  rows: number;
  failed: number;
}

/** The other process: holds the write lock `LOCK_MS` at a time, `LOCKS` times, `GAP_MS` apart. */
function startLockHolder(file: string, locks = LOCKS) {
  const program = `
    const Database = require('better-sqlite3');
    const db = new Database(process.argv[1]);
    const [lockMs, gapMs, locks] = process.argv.slice(2).map(Number);
    let held = 0;
    const take = () => {
      db.exec('begin immediate');
      console.log('locked');
      setTimeout(() => {
        db.exec('commit');
        if (++held === locks) { db.close(); console.log('done'); process.exit(0); }
        setTimeout(take, gapMs);
      }, lockMs);
    };
    take();
  `;
  const child = spawn(process.execPath, ['-e', program, file, String(LOCK_MS), String(GAP_MS), String(locks)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout });
  const firstLock = once(lines, 'line');
  const exited = once(child, 'exit');
  return { firstLock, exited };
}

async function run(label: string, busyTimeoutMs: number, audioUrl: string, withHolder = true): Promise<RunResult> {
  const storage = await openStorage('sqlite', undefined);
  const app = await buildApp(storage, {}, { sqliteBusyTimeoutMs: busyTimeoutMs });
  try {
    const db = app.services.db.kysely;
    // Reads alternate between the account's two keys: one key's 1,000 reads a minute would turn the
    // readers' last requests into 429s on a quick machine.
    const { testKey: key, liveKey } = await benchAccount(app);
    const base = await app.server.app.listen({ port: 0, host: '127.0.0.1' });
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const body = JSON.stringify({ platform: 'telegram', recipient: '123456', audio_url: audioUrl, session: { bot_token: botToken('lockwait', 0) } });

    // Without a holder: the same stretch with nobody else on the file, the machine's own noise.
    const holder = withHolder ? startLockHolder(join(storage.dataDir, SQLITE_FILE)) : { firstLock: Promise.resolve(), exited: sleep(LOCKS * (LOCK_MS + GAP_MS)) };
    await holder.firstLock;
    const histogram = monitorEventLoopDelay({ resolution: 10 });
    histogram.enable();
    let stop = false;
    let answered = 0;
    let reads = 0;
    let accepted = 0;
    let failed = 0;
    let slowestRequestMs = 0;
    const clients = Array.from({ length: CLIENTS }, async (_, n) => {
      for (let i = 0; !stop; i++) {
        const started = performance.now();
        // Half the clients send, half read: reads need no write lock, so they need not wait for it.
        const send = n % 2 === 0;
        const readHeaders = { authorization: `Bearer ${i % 2 === 0 ? key : liveKey}` };
        const res = await fetch(`${base}/api/v1/${send ? 'send' : 'usage'}`, send ? { method: 'POST', headers, body } : { headers: readHeaders });
        await res.arrayBuffer();
        slowestRequestMs = Math.max(slowestRequestMs, performance.now() - started);
        answered++;
        if (!send && res.status === 200) reads++;
        if (send && res.status === 202) accepted++;
        else if (res.status >= 300) failed++;
        await sleep(10);
      }
    });
    await holder.exited;
    stop = true;
    await Promise.all(clients);
    histogram.disable();
    const rows = await db.selectFrom('messages').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    return {
      label,
      busyTimeoutMs,
      maxDelayMs: histogram.max / 1e6,
      p99DelayMs: histogram.percentile(99) / 1e6,
      answered,
      reads,
      slowestRequestMs,
      accepted,
      rows: Number(rows.n),
      failed,
    };
  } finally {
    await app.close();
    await storage.cleanup();
  }
}

/**
 * How long one try for a held lock blocks the thread that makes it (the busy handler sleeps that long),
 * apart from whatever else the loaded machine does: BENCH_TRIES tries while the other process holds it.
 */
async function blockPerTry(busyTimeoutMs: number): Promise<{ tries: number; maxMs: number }> {
  const storage = await openStorage('sqlite', undefined);
  const file = join(storage.dataDir, SQLITE_FILE);
  const setup = new SqliteDatabase(file);
  setup.pragma('journal_mode = WAL');
  setup.close();
  const holder = startLockHolder(file, 1);
  await holder.firstLock;
  const db = new SqliteDatabase(file);
  db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  let maxMs = 0;
  let tries = 0;
  try {
    for (; tries < TRIES; tries++) {
      const started = performance.now();
      try {
        db.exec('begin immediate');
        db.exec('rollback');
        break; // the lock was let go meanwhile
      } catch (error) {
        if (!isSqliteBusy(error)) throw error;
      }
      maxMs = Math.max(maxMs, performance.now() - started);
      await sleep(5);
    }
  } finally {
    db.close();
    await holder.exited;
    await storage.cleanup();
  }
  return { tries, maxMs };
}

const audio = await startAudio();
const results: RunResult[] = [];
try {
  const audioUrl = audio.url;
  results.push(await run('nobody else holds the lock (the machine’s noise)', SQLITE_BUSY_TIMEOUT_MS, audioUrl, false));
  results.push(await run('before: busy_timeout 5,000 ms, waits on the event loop', OLD_BUSY_TIMEOUT_MS, audioUrl));
  results.push(await run(`now: busy_timeout ${SQLITE_BUSY_TIMEOUT_MS} ms, waits between tries off the event loop`, SQLITE_BUSY_TIMEOUT_MS, audioUrl));
} finally {
  await audio.server.close();
}
const perTry = await blockPerTry(SQLITE_BUSY_TIMEOUT_MS);
const perTry20 = await blockPerTry(20);

const ms = (value: number): string => value.toFixed(1);
const table = [
  '| setting | max event-loop delay | p99 event-loop delay | requests answered | of which reads (200) | slowest request | 202s | message rows | refused |',
  '|---|---|---|---|---|---|---|---|---|',
  ...results.map(
    (r) => `| ${r.label} | ${ms(r.maxDelayMs)} ms | ${ms(r.p99DelayMs)} ms | ${r.answered} | ${r.reads} | ${ms(r.slowestRequestMs)} ms | ${r.accepted} | ${r.rows} | ${r.failed} |`,
  ),
].join('\n');
const section = `## SQLite write-lock waits

${machineDescription()} Load average (1 min) at the end: ${loadavg()[0]!.toFixed(1)}, from other work on the machine.
Date: ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC. Command: \`${commandLine('node --import tsx bench/sqlite-lock-wait.ts')}\`.

Another process holds SQLite's write lock ${LOCKS} times for ${LOCK_MS} ms, ${GAP_MS} ms apart, while ${CLIENTS} clients
send over loopback (half POST /send, half GET /usage), one request after another (10 ms apart). The event loop's delay is
sampled with \`monitorEventLoopDelay\` (10 ms resolution) over the whole stretch; all rows in the same run,
each on a fresh database, the first with nobody else on the file (what the machine's load alone adds). Every 202
must be a message row, and no more.

${table}

One try for the held lock blocks its thread at most ${ms(perTry.maxMs)} ms with the service's busy timeout of ${SQLITE_BUSY_TIMEOUT_MS} ms, and at most
${ms(perTry20.maxMs)} ms with a busy timeout of 20 ms (${perTry.tries} and ${perTry20.tries} tries while the other process held the lock: SQLite's
busy handler sleeps out the busy timeout in a few short sleeps, each of which can wake late on a loaded machine; then the
try fails and the next comes after a pause off the event loop). With the old setting one try blocked until the lock was
let go, up to 5 s.
`;
console.log(section);
for (const r of results) if (r.accepted !== r.rows) console.error(`!! ${r.label}: ${r.accepted} sends accepted but ${r.rows} message rows`);
if (!process.env.BENCH_NO_WRITE) await writeSection('sqlite-lock-wait', section);
