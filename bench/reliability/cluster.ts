/**
 * What the reliability scripts share: a PostgreSQL database of their own, real `voicenote` processes
 * (`serve --no-worker` and `worker`, from bin/voicenote.js), the fake Bot API in a process of its
 * own, an audio host, a load driver with bounded loops, and RELIABILITY.md, where each script owns
 * one section.
 */
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startAudioServer, type AudioServer } from '../../test/fakes/audio-server.js';
import { sharedFixtures, testFfmpegPath } from '../../test/fixtures/audio-fixtures.js';
import { machineDescription } from '../report.js';
import type { FakeFaults, FakeStats } from './fake-telegram-process.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin/voicenote.js');
export const PG_ADMIN_URL = process.env.REL_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const PG_DB = process.env.REL_PG_DB ?? 'voicenote_rel';
export const PG_URL = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${PG_DB}`);
export const REDIS_URL = process.env.REL_REDIS_URL ?? 'redis://127.0.0.1:6379';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A fresh database for the run (dropped and created again). */
export async function freshDatabase(): Promise<void> {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL });
  await client.connect();
  try {
    await client.query(`drop database if exists ${PG_DB} with (force)`);
    await client.query(`create database ${PG_DB}`);
  } finally {
    await client.end();
  }
}

export async function query<T = Record<string, unknown>>(text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return (await client.query(text, values)).rows as T[];
  } finally {
    await client.end();
  }
}

export interface Proc {
  name: string;
  kind: 'api' | 'worker';
  port: number;
  child: ChildProcess;
  logFile: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  exitedAt?: number;
}

export interface Cluster {
  runDir: string;
  env: Record<string, string>;
  procs: Map<string, Proc>;
  start(name: string, kind: 'api' | 'worker'): Promise<Proc>;
  /** Base URLs of the API processes that are running. */
  apis(): string[];
  /** Processes that ended without being told to (name → exit code/signal). */
  unexpectedExits: string[];
  stopAll(): Promise<void>;
}

export async function startCluster(options: { telegramApiRoot: string; extraEnv?: Record<string, string> }): Promise<Cluster> {
  const runDir = await mkdtemp(join(tmpdir(), 'voicenote-rel-'));
  const env: Record<string, string> = {
    DATABASE_URL: PG_URL,
    REDIS_URL,
    SECRET_KEY: randomBytes(32).toString('base64'),
    HOST: '127.0.0.1',
    TELEGRAM_API_ROOT: options.telegramApiRoot,
    AUDIO_ALLOW_PRIVATE_URLS: 'true',
    LOG_LEVEL: 'info',
    ...options.extraEnv,
  };
  const procs = new Map<string, Proc>();
  const told = new Set<ChildProcess>();
  const unexpectedExits: string[] = [];
  const cluster: Cluster = {
    runDir,
    env,
    procs,
    unexpectedExits,
    async start(name, kind) {
      const old = procs.get(name);
      const port = old?.port ?? (await freePort());
      const dataDir = join(runDir, `data-${name}`);
      await mkdir(dataDir, { recursive: true });
      const logFile = join(runDir, `${name}.log`);
      const logFrom = (await readFile(logFile, 'utf8').catch(() => '')).length;
      const out = createWriteStream(logFile, { flags: 'a' });
      const args = kind === 'api' ? [BIN, 'serve', '--no-worker'] : [BIN, 'worker'];
      const child = spawn(process.execPath, args, { env: { ...process.env, ...env, PORT: String(port), DATA_DIR: dataDir }, stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout!.pipe(out, { end: false });
      child.stderr!.pipe(out, { end: false });
      const proc: Proc = {
        name,
        kind,
        port,
        child,
        logFile,
        exited: new Promise((resolve) =>
          child.once('exit', (code, signal) => {
            proc.exitedAt = Date.now();
            if (!told.has(child)) unexpectedExits.push(`${name} exited by itself (code ${code}, signal ${signal})`);
            resolve({ code, signal });
          }),
        ),
      };
      const originalKill = child.kill.bind(child);
      child.kill = (signal?: NodeJS.Signals | number) => {
        told.add(child);
        return originalKill(signal);
      };
      procs.set(name, proc);
      if (kind === 'api') await waitReady(`http://127.0.0.1:${port}`, 60_000);
      else await waitLog(logFile, 'voicenote worker started', 60_000, logFrom);
      return proc;
    },
    apis() {
      return [...procs.values()].filter((p) => p.kind === 'api' && p.exitedAt === undefined).map((p) => `http://127.0.0.1:${p.port}`);
    },
    async stopAll() {
      for (const p of procs.values()) if (p.exitedAt === undefined) p.child.kill('SIGTERM');
      await Promise.race([Promise.all([...procs.values()].map((p) => p.exited)), sleep(30_000)]);
      for (const p of procs.values()) if (p.exitedAt === undefined) p.child.kill('SIGKILL');
    },
  };
  return cluster;
}

async function waitReady(base: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2_000) })).status === 200) return;
    } catch {
      // not yet
    }
    await sleep(200);
  }
  throw new Error(`${base} not ready in ${timeoutMs} ms`);
}

async function waitLog(file: string, text: string, timeoutMs: number, from: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const content = await readFile(file, 'utf8').catch(() => '');
    // Only what this start wrote: the log of an earlier start of the same process is in the same file.
    if (content.slice(from).includes(text)) return;
    await sleep(200);
  }
  throw new Error(`"${text}" not in ${file} after ${timeoutMs} ms`);
}

/** An enterprise account with limits high enough for any run; returns its keys. */
export function createAccount(cluster: Cluster, name = 'reliability'): { accountId: string; testKey: string; liveKey: string } {
  const env = { ...process.env, ...cluster.env, DATA_DIR: join(cluster.runDir, 'data-cli') };
  const created = JSON.parse(execFileSync(process.execPath, [BIN, 'accounts', 'create', '--name', name, '--plan', 'enterprise', '--json'], { env, encoding: 'utf8' })) as {
    account_id: string;
    keys: { test: { secret: string }; live: { secret: string } };
  };
  execFileSync(process.execPath, [BIN, 'accounts', 'set-plan', created.account_id, '--plan', 'enterprise', '--rate-limit', '1000000', '--quota', '1000000'], { env, encoding: 'utf8' });
  return { accountId: created.account_id, testKey: created.keys.test.secret, liveKey: created.keys.live.secret };
}

export interface FakeTelegram {
  apiRoot: string;
  stats(): Promise<FakeStats>;
  close(): Promise<void>;
}

export async function startFakeTelegram(faults: FakeFaults = {}): Promise<FakeTelegram> {
  const child = fork(fileURLToPath(new URL('./fake-telegram-process.ts', import.meta.url)), [JSON.stringify(faults)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const apiRoot = await new Promise<string>((resolve, reject) => {
    child.once('message', (m: { type: string; apiRoot: string }) => resolve(m.apiRoot));
    child.once('exit', () => reject(new Error('fake telegram exited')));
  });
  return {
    apiRoot,
    stats: () =>
      new Promise((resolve) => {
        const onMessage = (m: { type: string; stats: FakeStats }): void => {
          if (m.type !== 'stats') return;
          child.off('message', onMessage);
          resolve(m.stats);
        };
        child.on('message', onMessage);
        child.send({ type: 'stats' });
      }),
    close: async () => {
      child.send({ type: 'close' });
      await Promise.race([new Promise((r) => child.once('exit', r)), sleep(5_000)]);
      child.kill('SIGKILL');
    },
  };
}

export async function startAudio(): Promise<{ server: AudioServer; url: string }> {
  const fixtures = await sharedFixtures(await testFfmpegPath());
  const server = await startAudioServer();
  server.route('/voice.ogg', { kind: 'file', path: fixtures['voice.ogg'], contentType: 'audio/ogg' });
  return { server, url: server.url('/voice.ogg') };
}

/** A well-formed bot token of its own for message `i` of a run: the fake tells messages apart by it. */
export function botToken(run: string, i: number): string {
  return `${100000000 + i}:${`${run}${'x'.repeat(40)}`.slice(0, 20)}${String(i).padStart(16, '0')}`;
}

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

export const RELIABILITY_FILE = join(ROOT, 'RELIABILITY.md');

const HEADER = `# Reliability

What holds when things go wrong, measured. Each section below is written by the script it names
(\`bench/reliability/\`, run with \`node --import tsx\`); rerunning a script replaces only its own
section. Each script starts real \`voicenote\` processes (\`serve --no-worker\` and \`worker\` from
\`bin/voicenote.js\`, so run \`npm run build\` first) on PostgreSQL and Redis on this machine, a fake
Telegram Bot API in a process of its own that counts what it receives, and drives them over loopback
with bounded loops. Scripts that restart PostgreSQL or Redis take an exclusive lock on
\`/tmp/voicenote-services.lock\` and leave both running. The suite keeps short versions of R4–R7
(\`test/reliability-*.test.ts\`), and checks on real processes what the scenarios take for granted:
a stopping process that something holds up (a client that never finishes its request) still
aborts a delivery hanging at the platform at \`SHUTDOWN_GRACE_MS\` and hands its message back, then
ends at \`SHUTDOWN_GRACE_MS\` + \`SHUTDOWN_MARGIN_MS\` with exit code 1 and a line saying so; one with
nothing in flight exits 0; an uncaught exception or unhandled rejection in \`serve\` or \`worker\` exits 70
with the error on stderr (\`test/cli.test.ts\`); an aborted conversion leaves no ffmpeg running
(\`test/audio-convert.test.ts\`).
`;

/** Puts `markdown` into RELIABILITY.md between this script's markers (replacing an older run's). */
export async function writeReliabilitySection(name: string, title: string, command: string, markdown: string): Promise<void> {
  const start = `<!-- reliability:${name}:start -->`;
  const end = `<!-- reliability:${name}:end -->`;
  const block = `${start}\n## ${title}\n\n${machineDescription()} Run ${new Date().toISOString()}.\n\nCommand: \`${command}\`\n\n${markdown.trim()}\n${end}`;
  let current: string;
  try {
    current = await readFile(RELIABILITY_FILE, 'utf8');
  } catch {
    current = HEADER;
  }
  const from = current.indexOf(start);
  const to = from === -1 ? -1 : current.indexOf(end, from);
  const sections = from !== -1 && to !== -1 ? current.slice(0, from) + block + current.slice(to + end.length) : `${current.trimEnd()}\n\n${block}\n`;
  // Sections in R-number order, whichever ran last.
  const parts = [...sections.matchAll(/<!-- reliability:([a-z0-9-]+):start -->[\s\S]*?<!-- reliability:\1:end -->/g)].map((m) => ({ name: m[1]!, text: m[0] }));
  parts.sort((a, b) => a.name.localeCompare(b.name, undefined, { numeric: true }));
  const next = `${HEADER}\n${parts.map((p) => p.text).join('\n\n')}\n`;
  const tmp = `${RELIABILITY_FILE}.${process.pid}.tmp`;
  await writeFile(tmp, next);
  await rename(tmp, RELIABILITY_FILE);
}
