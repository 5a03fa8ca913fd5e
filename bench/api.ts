/**
 * HTTP API and delivery benchmark: `npm run bench` (`node --import tsx bench/api.ts`).
 *
 * For each storage (SQLite always; PostgreSQL when reachable):
 *  1. a server process of its own runs the compiled service (dist/, `npm run build` first) under plain
 *     node, with nothing of the bench in it but bench/http-server.mjs (the app built with createApp, the
 *     bare twins, the account and keys); this script loads it over loopback with autocannon, run in
 *     another process (bench/loadgen.ts) so load generator and server do not share an event loop. Each
 *     real endpoint is measured right after its bare twin: a Fastify route in the same server that takes
 *     the same JSON (same schema) and answers the same JSON, with no key, no limits and no storage. The
 *     ratio of the two is the figure.
 *  2. in another server process of its own (the app in-process with createApp, under tsx), queues BENCH_MESSAGES live Telegram messages with its worker
 *     off and the audio already converted in the cache, then starts the service's own worker process
 *     (`voicenote worker`, compiled: run `npm run build` first), which delivers them through the fake Bot
 *     API (test/fakes/telegram-api.ts, in a process of its own, with Telegram's flood limits enforced);
 *     the clock runs from its first claim until all are settled. The messages are spread
 *     over BENCH_BOTS bots, since Telegram's pacing allows one bot about 30 messages a second: with one
 *     bot the run would measure that pace, not the worker;
 *  3. samples the RSS of the measured process (the server's for HTTP, the worker's for delivery) from /proc.
 * Writes two sections of BENCHMARKS.md, each only when its part ran (BENCH_ONLY), so a partial run
 * leaves the other part's figures alone: HTTP between <!-- bench:api:start --> and <!-- bench:api:end -->,
 * delivery between <!-- bench:delivery:start --> and <!-- bench:delivery:end -->.
 *
 * Environment: BENCH_SECONDS (10), BENCH_CONNECTIONS (20), BENCH_WARMUP_SECONDS (1), BENCH_MESSAGES (3000),
 * BENCH_CHATS (1000), BENCH_BOTS (100), BENCH_WORKER_CONCURRENCY (the service default), BENCH_ONLY
 * (`http` or `delivery`), BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/test; `none` skips
 * PostgreSQL), BENCH_SERVER_NODE_OPTIONS (extra node flags for the server processes, e.g. `--cpu-prof`, and for the HTTP
 * server process `--max-semi-space-size=…`), BENCH_WORKER_NODE_OPTIONS
 * (extra node flags for the worker process).
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import pino from 'pino';
import { createAccountWithKeys } from '../src/admin/accounts.js';
import { createApp, type App } from '../src/app.js';
import { createAudioPipeline, resolveFfmpegPath } from '../src/audio/index.js';
import { loadConfig } from '../src/config.js';
import { READ_REQUESTS_PER_MINUTE } from '../src/core/plans.js';
import { updatePlan } from '../src/store/accounts.js';
import { startAudioServer } from '../test/fakes/audio-server.js';
import { sharedFixtures, testFfmpegPath } from '../test/fixtures/audio-fixtures.js';
import type { LoadRequest, LoadResult, LoadSpec } from './loadgen.js';
import { commandLine, machineDescription, writeSection } from './report.js';
import { audioTargetFor } from '../src/platforms/registry.js';

type Storage = 'sqlite' | 'postgres';

function intEnv(name: string, fallback: number, min: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min) throw new Error(`${name} must be a number ≥ ${min}, got "${raw}"`);
  return value;
}

const SECONDS = intEnv('BENCH_SECONDS', 10, 1);
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 20, 1);
const WARMUP_SECONDS = intEnv('BENCH_WARMUP_SECONDS', 1, 0);
const MESSAGES = intEnv('BENCH_MESSAGES', 3000, 1);
const CHATS = intEnv('BENCH_CHATS', 1000, 1);
// 100 bots at Telegram's ~28 sends a second each (one per 35 ms) leave room for ~2,800 messages a second.
const BOTS = intEnv('BENCH_BOTS', 100, 1);
const WORKER_CONCURRENCY = process.env.BENCH_WORKER_CONCURRENCY?.trim() ? intEnv('BENCH_WORKER_CONCURRENCY', 8, 1) : undefined;
const ONLY = process.env.BENCH_ONLY?.trim() || undefined;
if (ONLY !== undefined && ONLY !== 'http' && ONLY !== 'delivery') throw new Error(`BENCH_ONLY must be http or delivery, got "${ONLY}"`);
/** Node flags from a variable, split on blanks (unset or blank: none). */
const nodeFlags = (name: string): string[] => process.env[name]?.split(/\s+/).filter(Boolean) ?? [];
const DEFAULT_PG_URL = 'postgres://postgres@127.0.0.1:5432/test';
/** GET /status shares the fixed per-key read bucket; enough keys that this many req/s never exhausts it. */
const READ_RPS_CEILING = 20_000;
const SEND_INTAKE_CONCURRENCY = 20;
const TELEGRAM_TOKEN = '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ';
/** A well-formed token of its own for each bench bot (the fake accepts any well-formed token). */
const botToken = (bot: number): string => `${7_000_000_000 + bot}:${createHash('sha256').update(`bench bot ${bot}`).digest('base64url').slice(0, 35)}`;
/**
 * Message i goes to chat i mod CHATS through a bot that moves on by one every time the chats come round
 * again: a chat hears from several bots, never twice from one (while BOTS > MESSAGES / CHATS), so the
 * per-chat pace (one a second per bot and chat) never makes a message wait and the per-bot pace bounds
 * the run at BOTS × ~28 messages a second.
 */
const recipientOf = (i: number): { chat: string; token: string } => ({
  chat: String(100_000_000 + (i % CHATS)),
  token: botToken((i + Math.floor(i / CHATS)) % BOTS),
});
const RSS_SAMPLE_MS = 250;

const SELF = fileURLToPath(import.meta.url);
const HTTP_SERVER = fileURLToPath(new URL('./http-server.mjs', import.meta.url));
const VOICENOTE_BIN = fileURLToPath(new URL('../bin/voicenote.js', import.meta.url));
/** Linux's USER_HZ: /proc reports CPU time in these ticks. */
const CLOCK_TICKS = 100;
const LOADGEN = fileURLToPath(new URL('./loadgen.ts', import.meta.url));
const TELEGRAM_PROCESS = fileURLToPath(new URL('./telegram-process.ts', import.meta.url));

interface Endpoint {
  label: string;
  what: string;
  /** Index of the endpoint this one is compared with (its bare twin); itself for a baseline. */
  baseline: number;
  load: LoadResult;
  /** CPU time of the server process (every thread) per request, in µs. */
  cpuUsPerRequest: number;
}

type Phase = 'http' | 'delivery';

/** What one server process measured: one storage, one phase. */
interface StorageResult {
  storage: Storage;
  phase: Phase;
  endpoints: Endpoint[];
  readKeys: number;
  rowsAfterSendLoad: number;
  delivery?: {
    messages: number;
    delivered: number;
    failed: number;
    firstError: string | null;
    ms: number;
    /** From starting the worker process to its first claim (not in `ms`). */
    startupMs: number;
    concurrency: string;
    telegramCalls: number;
    /** 429s the fake's flood control answered: a send that came faster than Telegram allows. */
    floodRefusals: number;
    /** CPU time over the run's wall time, in cores: the worker process, and the fake Bot API's. */
    serverCpu: number;
    fakeCpu: number;
  };
  /** RSS at the start of the measured phase, the largest sample during it, and the process maximum. */
  rss: { start: number; max: number; peak: number };
}

// ---------------------------------------------------------------------------------------------------
// Server process: one storage.

interface BenchStorage {
  env: Record<string, string>;
  pgSchema?: string;
  dataDir: string;
  cleanup(): Promise<void>;
}

async function openStorage(storage: Storage, pgUrl: string | undefined): Promise<BenchStorage> {
  const dataDir = await mkdtemp(join(tmpdir(), 'voicenote-bench-api-'));
  const removeDir = () => rm(dataDir, { recursive: true, force: true });
  if (storage === 'sqlite') return { env: { DATA_DIR: dataDir }, dataDir, cleanup: removeDir };
  const pgSchema = `bench_${randomBytes(6).toString('hex')}`;
  return {
    env: { DATA_DIR: dataDir, DATABASE_URL: pgUrl! },
    pgSchema,
    dataDir,
    async cleanup() {
      const client = new pg.Client({ connectionString: pgUrl });
      await client.connect();
      try {
        await client.query(`drop schema if exists ${pgSchema} cascade`);
      } finally {
        await client.end();
      }
      await removeDir();
    },
  };
}

async function buildApp(storage: BenchStorage, extraEnv: Record<string, string> = {}): Promise<App> {
  const config = loadConfig({
    ...storage.env,
    LOG_LEVEL: 'silent',
    SECRET_KEY: randomBytes(32).toString('base64'),
    AUDIO_ALLOW_PRIVATE_URLS: 'true',
    SANDBOX_LATENCY_MS: '0',
    // Load shedding off: on this shared machine a start-up stall would turn the first requests into 503s.
    MAX_EVENT_LOOP_DELAY_MS: '0',
    ...(process.env.FFMPEG_PATH ? { FFMPEG_PATH: process.env.FFMPEG_PATH } : {}),
    ...extraEnv,
  });
  return createApp(config, {
    worker: false,
    logger: pino({ level: 'silent' }),
    ...(storage.pgSchema ? { pgSchema: storage.pgSchema } : {}),
  });
}

/** An enterprise account whose send rate limit and quota never get in the way. */
async function benchAccount(app: App): Promise<{ accountId: string; testKey: string; liveKey: string }> {
  const db = app.services.db.kysely;
  const created = await createAccountWithKeys(db, { name: 'bench', plan: 'enterprise' });
  await updatePlan(db, created.account.id, { plan: 'enterprise', rateLimit: 10_000_000, quota: 10_000_000 });
  return { accountId: created.account.id, testKey: created.testKey.secret, liveKey: created.liveKey.secret };
}

async function inject(app: App, method: 'GET' | 'POST', url: string, key: string | undefined, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await app.server.app.inject({
    method,
    url,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
  });
  return { status: res.statusCode, json: res.body ? JSON.parse(res.body) : undefined };
}

function runLoad(spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = fork(LOADGEN, [JSON.stringify(spec)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let result: LoadResult | undefined;
    child.on('message', (m) => {
      result = m as LoadResult;
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (result) resolve(result);
      else reject(new Error(`load generator exited with ${code} and no result`));
    });
  });
}

/** The load's figures, and the server process's CPU time (all its threads, from /proc) per request answered meanwhile. */
async function measure(pid: number, url: string, requests: LoadRequest[]): Promise<{ load: LoadResult; cpuUsPerRequest: number }> {
  if (WARMUP_SECONDS > 0) await runLoad({ url, connections: CONNECTIONS, seconds: WARMUP_SECONDS, requests });
  const before = (await procStats(pid)).cpuMs;
  const load = await runLoad({ url, connections: CONNECTIONS, seconds: SECONDS, requests });
  const cpuMs = (await procStats(pid)).cpuMs - before;
  return { load, cpuUsPerRequest: (cpuMs * 1000) / Math.max(1, load.total) };
}

async function countMessages(app: App): Promise<{ total: number; delivered: number; failed: number }> {
  const rows = await app.services.db.kysely
    .selectFrom('messages')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy('status')
    .execute();
  const by = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  return {
    total: rows.reduce((s, r) => s + Number(r.n), 0),
    delivered: by.delivered ?? 0,
    failed: by.failed ?? 0,
  };
}

/** The largest RSS of process `pid` seen between start and stop(), sampled from /proc every RSS_SAMPLE_MS. */
function rssSampler(pid: number, start: number): { stop(): Promise<number> } {
  let max = start;
  const timer = setInterval(() => {
    procStats(pid).then(
      (stats) => (max = Math.max(max, stats.rss)),
      () => undefined, // the process is gone: the run fails on its own
    );
  }, RSS_SAMPLE_MS);
  return {
    async stop() {
      clearInterval(timer);
      return Math.max(max, (await procStats(pid)).rss);
    },
  };
}

interface FakeCounts {
  answered: number;
  floodRefusals: number;
  /** The fake's process.cpuUsage(), user + system, in µs. */
  cpuMicros: number;
}

async function startTelegramProcess(): Promise<{
  apiRoot: string;
  child: ChildProcess;
  answered(): Promise<FakeCounts>;
  stop(): Promise<void>;
}> {
  const child = fork(TELEGRAM_PROCESS, ['--flood-limits'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const apiRoot = await new Promise<string>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { apiRoot: string }).apiRoot));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`fake Telegram exited with ${code}`)));
  });
  return {
    apiRoot,
    child,
    answered: () =>
      new Promise((resolve) => {
        child.once('message', (m) => resolve(m as FakeCounts));
        child.send('count');
      }),
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.disconnect();
      }),
  };
}

/** The HTTP phase's server process (bench/http-server.mjs: the compiled service, no tsx), once it listens. */
async function startHttpServer(
  storage: BenchStorage,
  sendBody: Record<string, unknown>,
  readKeys: number,
): Promise<{ child: ChildProcess; url: string; messageId: string; readKeys: string[]; sendKey: string; request(command: 'count'): Promise<{ count: number }>; close(): Promise<void> }> {
  const child = fork(HTTP_SERVER, [], {
    execArgv: nodeFlags('BENCH_SERVER_NODE_OPTIONS'),
    env: {
      PATH: process.env.PATH ?? '',
      ...storage.env,
      ...(storage.pgSchema ? { BENCH_PG_SCHEMA: storage.pgSchema } : {}),
      BENCH_SEND_BODY: JSON.stringify(sendBody),
      BENCH_READ_KEYS: String(readKeys),
      ...(process.env.FFMPEG_PATH ? { FFMPEG_PATH: process.env.FFMPEG_PATH } : {}),
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = await new Promise<{ url: string; messageId: string; readKeys: string[]; sendKey: string }>((resolve, reject) => {
    child.once('message', (m) => resolve(m as { url: string; messageId: string; readKeys: string[]; sendKey: string }));
    void exited.then((code) => reject(new Error(`the HTTP server process exited with ${code} before it listened`)));
  });
  return {
    child,
    ...ready,
    request: (command) =>
      new Promise((resolve) => {
        child.once('message', (m) => resolve(m as { count: number }));
        child.send(command);
      }),
    async close() {
      child.send('close');
      await exited;
    },
  };
}

async function runHttp(storage: Storage, pgUrl: string | undefined, sendBody: Record<string, unknown>) {
  const httpStorage = await openStorage(storage, pgUrl);
  try {
    // The read bucket is READ_REQUESTS_PER_MINUTE per key whatever the plan: spread GET /status over
    // enough keys of the same account (all see the message) that 429s never happen.
    const keyCount = Math.max(1, Math.ceil(((SECONDS + WARMUP_SECONDS) * READ_RPS_CEILING) / (READ_REQUESTS_PER_MINUTE * 0.9)));
    const server = await startHttpServer(httpStorage, sendBody, keyCount);
    try {
      const { url, messageId, readKeys, sendKey } = server;
      const pid = server.child.pid!;
      const httpStart = (await procStats(pid)).rss;
      const rss = rssSampler(pid, httpStart);

      const auth = (key: string) => ({ authorization: `Bearer ${key}` });
      const json = { 'content-type': 'application/json' };
      const sendRequest = (path: string, headers: Record<string, string>): LoadRequest => ({ method: 'POST', path, headers: { ...headers, ...json }, body: JSON.stringify(sendBody) });
      const endpoints: Endpoint[] = [];
      const run = async (label: string, what: string, baseline: number, requests: LoadRequest[]) => {
        console.error(`[${storage}] ${label}`);
        endpoints.push({ label, what, baseline, ...(await measure(pid, url, requests)) });
      };
      await run('GET /healthz', 'framework floor: no body, no schema', 0, [{ method: 'GET', path: '/healthz' }]);
      await run('GET /bench/bare/status/:id', 'baseline: same params and response schema, no auth, no storage', 1, [
        { method: 'GET', path: `/bench/bare/status/${messageId}` },
      ]);
      await run(
        'GET /api/v1/status/:id',
        'auth + rate limit + usage headers + one read',
        1,
        readKeys.map((key) => ({ method: 'GET', path: `/api/v1/status/${messageId}`, headers: auth(key) })),
      );
      await run('POST /bench/bare/send', 'baseline: same body and response schema, no auth, no storage', 3, [sendRequest('/bench/bare/send', {})]);
      await run('POST /api/v1/send', 'auth + rate limit + validation + sealed credentials + durable write', 3, [
        sendRequest('/api/v1/send', auth(sendKey)),
      ]);
      const httpMax = await rss.stop();
      const peak = (await procStats(pid)).hwm;
      const rowsAfterSendLoad = (await server.request('count')).count;
      return { endpoints, readKeys: readKeys.length, rowsAfterSendLoad, httpStart, httpMax, peak };
    } finally {
      await server.close();
    }
  } finally {
    await httpStorage.cleanup();
  }
}

/** A process's resident set now and at its largest (VmRSS, VmHWM), and its CPU time so far, from /proc. */
async function procStats(pid: number): Promise<{ rss: number; hwm: number; cpuMs: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  // Fields 14 and 15 of /proc/PID/stat (after the command name in parentheses): user and system time in ticks.
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const [utime, stime] = stat.slice(stat.lastIndexOf(')') + 2).split(' ').slice(11, 13).map(Number);
  return { rss: kib('VmRSS'), hwm: kib('VmHWM'), cpuMs: ((utime ?? 0) + (stime ?? 0)) * (1000 / CLOCK_TICKS) };
}

/** The service's own `voicenote worker` (bin/voicenote.js, from dist/), as it runs in production. */
function startWorkerProcess(env: Record<string, string>): { child: ChildProcess; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [...nodeFlags('BENCH_WORKER_NODE_OPTIONS'), VOICENOTE_BIN, 'worker'], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited };
}

async function runDelivery(storage: Storage, pgUrl: string | undefined, audioUrl: string) {
  const telegram = await startTelegramProcess();
  const deliveryStorage = await openStorage(storage, pgUrl);
  const secretKey = randomBytes(32).toString('base64');
  try {
    const app = await buildApp(deliveryStorage, { TELEGRAM_API_ROOT: telegram.apiRoot, SECRET_KEY: secretKey });
    try {
      const { config, logger } = app.services;
      // The conversion is cached (on disk, keyed by content) before the clock starts.
      const warm = createAudioPipeline({ dataDir: config.dataDir, ffmpegPath: resolveFfmpegPath(config.ffmpegPath), allowPrivateUrls: true, logger });
      (await warm.prepare({ url: audioUrl, target: audioTargetFor('telegram') })).release();
      await warm.close();

      const account = await benchAccount(app);
      console.error(`[${storage}] queueing ${MESSAGES} live Telegram sends to ${CHATS} chats through ${BOTS} bots`);
      let next = 0;
      await Promise.all(
        Array.from({ length: SEND_INTAKE_CONCURRENCY }, async () => {
          while (next < MESSAGES) {
            const { chat, token } = recipientOf(next);
            next++;
            const body = { platform: 'telegram', recipient: chat, audio_url: audioUrl, session: { bot_token: token } };
            const res = await inject(app, 'POST', '/api/v1/send', account.liveKey, body);
            if (res.status !== 202) throw new Error(`POST /send answered ${res.status}: ${JSON.stringify(res.json)}`);
          }
        }),
      );

      // The poll counts through the index the worker claims by (a count of the whole table every 20 ms
      // would cost the database more than some of what it measures).
      const db = app.services.db.kysely;
      const countWhere = async (statuses: string[]): Promise<number> =>
        Number((await db.selectFrom('messages').select((eb) => eb.fn.countAll<number>().as('n')).where('status', 'in', statuses).executeTakeFirstOrThrow()).n);
      const concurrency = String(WORKER_CONCURRENCY ?? 'default');
      console.error(`[${storage}] delivering`);
      const spawnedAt = performance.now();
      const worker = startWorkerProcess({
        DATA_DIR: deliveryStorage.dataDir,
        ...(deliveryStorage.pgSchema ? { DATABASE_URL: withSearchPath(pgUrl!, deliveryStorage.pgSchema) } : {}),
        SECRET_KEY: secretKey,
        TELEGRAM_API_ROOT: telegram.apiRoot,
        AUDIO_ALLOW_PRIVATE_URLS: 'true',
        LOG_LEVEL: 'warn',
        ...(WORKER_CONCURRENCY !== undefined ? { WORKER_CONCURRENCY: String(WORKER_CONCURRENCY) } : {}),
        ...(process.env.FFMPEG_PATH ? { FFMPEG_PATH: process.env.FFMPEG_PATH } : {}),
      });
      const pid = worker.child.pid!;
      const deadline = Date.now() + Math.max(120_000, MESSAGES * 100);
      let exitCode: number | null | undefined;
      void worker.exited.then((code) => (exitCode = code));
      const alive = (): void => {
        if (exitCode !== undefined) throw new Error(`the worker process exited with ${exitCode} before the run ended`);
        if (Date.now() > deadline) throw new Error(`messages still unsettled after the deadline`);
      };
      let rssMax = 0;
      let first: { at: number; rss: number; cpuMs: number; fake: FakeCounts };
      let last: { at: number; cpuMs: number; hwm: number };
      try {
        // The clock starts at the worker's first claim: its start-up (loading the code, opening storage) is not delivery.
        while ((await countWhere(['queued'])) === MESSAGES) {
          alive();
          await new Promise((r) => setTimeout(r, 5));
        }
        const at = performance.now();
        const stats = await procStats(pid);
        first = { at, rss: stats.rss, cpuMs: stats.cpuMs, fake: await telegram.answered() };
        rssMax = stats.rss;
        let lastSample = at;
        for (;;) {
          const left = await countWhere(['queued', 'processing']);
          const now = performance.now();
          if (left === 0) {
            const end = await procStats(pid);
            last = { at: now, cpuMs: end.cpuMs, hwm: end.hwm };
            rssMax = Math.max(rssMax, end.rss);
            break;
          }
          alive();
          if (now - lastSample >= RSS_SAMPLE_MS) {
            rssMax = Math.max(rssMax, (await procStats(pid)).rss);
            lastSample = now;
          }
          await new Promise((r) => setTimeout(r, 20));
        }
      } finally {
        worker.child.kill('SIGTERM');
        await worker.exited;
      }
      const ms = last.at - first.at;
      const counts = await countMessages(app);
      const fake = await telegram.answered();
      const failedRow = counts.failed
        ? await db.selectFrom('messages').select(['error_code', 'error_message']).where('status', '=', 'failed').executeTakeFirst()
        : undefined;
      return {
        delivery: {
          messages: MESSAGES,
          delivered: counts.delivered,
          failed: counts.failed,
          firstError: failedRow ? `${failedRow.error_code}: ${failedRow.error_message}` : null,
          ms,
          startupMs: first.at - spawnedAt,
          concurrency,
          telegramCalls: fake.answered,
          floodRefusals: fake.floodRefusals,
          serverCpu: (last.cpuMs - first.cpuMs) / ms,
          fakeCpu: (fake.cpuMicros - first.fake.cpuMicros) / 1000 / ms,
        },
        deliveryStart: first.rss,
        deliveryMax: rssMax,
        peak: last.hwm,
      };
    } finally {
      await app.close();
    }
  } finally {
    await deliveryStorage.cleanup();
    await telegram.stop();
  }
}

/** A PostgreSQL URL whose connections use this schema (the worker process has no other way to be told). */
function withSearchPath(url: string, schema: string): string {
  return `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
}

async function runStorage(storage: Storage, phase: Phase, pgUrl: string | undefined): Promise<StorageResult> {
  const fixtures = await sharedFixtures(await testFfmpegPath());
  const audio = await startAudioServer();
  audio.route('/voice.ogg', { kind: 'file', path: fixtures['voice.ogg'], contentType: 'audio/ogg' });
  const sendBody = { platform: 'telegram', recipient: '123456789', audio_url: audio.url('/voice.ogg'), session: { bot_token: TELEGRAM_TOKEN } };
  try {
    if (phase === 'http') {
      const http = await runHttp(storage, pgUrl, sendBody);
      return {
        storage,
        phase,
        endpoints: http.endpoints,
        readKeys: http.readKeys,
        rowsAfterSendLoad: http.rowsAfterSendLoad,
        rss: { start: http.httpStart, max: http.httpMax, peak: http.peak },
      };
    }
    const delivery = await runDelivery(storage, pgUrl, audio.url('/voice.ogg'));
    return {
      storage,
      phase,
      endpoints: [],
      readKeys: 0,
      rowsAfterSendLoad: 0,
      delivery: delivery.delivery,
      rss: { start: delivery.deliveryStart, max: delivery.deliveryMax, peak: delivery.peak },
    };
  } finally {
    await audio.close();
  }
}

// ---------------------------------------------------------------------------------------------------
// Orchestrator: one server process per storage and phase, then the report.

function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]+):[^@/]*@/i, '$1:***@');
}

async function postgresReachable(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  try {
    await client.connect();
    await client.query('select 1');
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    await client.end().catch(() => undefined);
  }
}

function runStorageProcess(storage: Storage, phase: Phase, pgUrl: string | undefined): Promise<StorageResult> {
  return new Promise((resolve, reject) => {
    const child = fork(SELF, [`--storage=${storage}`, `--phase=${phase}`], {
      // For HTTP this process only drives the run: the flags go to the server process it starts (runHttp).
      execArgv: [...(phase === 'delivery' ? nodeFlags('BENCH_SERVER_NODE_OPTIONS') : []), '--import', 'tsx'],
      env: { ...process.env, ...(pgUrl ? { BENCH_PG_URL_RESOLVED: pgUrl } : {}) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let result: StorageResult | undefined;
    child.on('message', (m) => {
      result = m as StorageResult;
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (result) resolve(result);
      else reject(new Error(`${storage} ${phase} server process exited with ${code} and no result`));
    });
  });
}

const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const mib = (bytes: number): string => (bytes > 0 ? `${fmt(bytes / 1024 ** 2, 0)} MiB` : '–');

function memoryTable(lines: string[], results: StorageResult[], title: string, description: string): void {
  lines.push(`### Memory (${title})`, '');
  lines.push(description, '');
  lines.push('| storage | start | max | peak |');
  lines.push('|---|---|---|---|');
  for (const r of results) lines.push(`| ${r.storage} | ${mib(r.rss.start)} | ${mib(r.rss.max)} | ${mib(r.rss.peak)} |`);
}

function header(lines: string[], title: string, notes: string[], startedAt: Date): void {
  lines.push(title, '');
  lines.push(`Measured ${startedAt.toISOString()} with \`${commandLine('node --import tsx bench/api.ts')}\` (source: \`bench/api.ts\`).`, '');
  lines.push(machineDescription(), '');
  lines.push(
    `Each storage runs in a server process of its own: the app built with \`createApp\` (logging silent), ` +
      `load shedding off (\`MAX_EVENT_LOOP_DELAY_MS=0\`), one enterprise account with rate limit and quota set to 10,000,000.`,
    '',
  );
  for (const note of notes) lines.push(`> ${note}`, '');
}

function httpReport(results: StorageResult[], notes: string[], startedAt: Date): string {
  const lines: string[] = [];
  header(lines, '## HTTP API', notes, startedAt);
  lines.push(
    `The app listens on 127.0.0.1 with its worker off. Load comes from autocannon in a separate process: ` +
      `${CONNECTIONS} connections, ${SECONDS} s per endpoint after ${WARMUP_SECONDS} s of warm-up, endpoints one after another, ` +
      `each real endpoint right after its bare twin. "% of bare" is the endpoint's req/s over its bare twin's in the same run: ` +
      `a route in the same Fastify server that takes the same JSON through the same schema and answers the same JSON, ` +
      `with no key, no limits and no storage. "Server CPU per request" is the server process's CPU time over the run ` +
      `(every thread: the event loop, libuv's pool that flushes the WAL, SQLite's checkpoint thread) divided by the requests answered; ` +
      `the load generator shares the same two cores, so a route's req/s follows its CPU per request.`,
    '',
  );
  lines.push('| storage | endpoint | measures | req/s (mean) | % of bare | p50 | p99 | server CPU per request | requests | non-2xx | errors |');
  lines.push('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    r.endpoints.forEach((e, i) => {
      const l = e.load;
      const base = r.endpoints[e.baseline]!.load.rps;
      const ratio = e.baseline === i ? 'baseline' : `${fmt((l.rps / base) * 100, 1)} %`;
      lines.push(
        `| ${r.storage} | \`${e.label}\` | ${e.what} | ${fmt(l.rps)} | ${ratio} | ${l.p50} ms | ${l.p99} ms | ${fmt(e.cpuUsPerRequest)} µs | ${fmt(l.total)} | ${fmt(l.non2xx)} | ${fmt(l.errors + l.timeouts)} |`,
      );
    });
  }
  for (const r of results) {
    for (const e of r.endpoints) {
      const bad = e.load.non2xx + e.load.errors + e.load.timeouts;
      if (bad > 0) lines.push('', `> Warning: ${r.storage} \`${e.label}\` had ${fmt(bad)} non-2xx answers or errors; its numbers do not measure the success path alone.`);
    }
  }
  lines.push('');
  lines.push(
    `\`GET /status\` reads one message, rotating over ${results.map((r) => `${r.readKeys} keys (${r.storage})`).join(', ')} of the account: ` +
      `the read bucket is ${READ_REQUESTS_PER_MINUTE} requests per key per minute whatever the plan, so one key would measure 429s. ` +
      `\`POST /send\` is a valid Telegram sandbox body with no Idempotency-Key; the queue grows during the run ` +
      `(${results.map((r) => `${fmt(r.rowsAfterSendLoad)} rows (${r.storage})`).join(', ')} at the end, warm-up included).`,
    '',
  );
  memoryTable(
    lines,
    results,
    'server process RSS, HTTP runs',
    'The HTTP server process runs the compiled service (dist/) under plain node, with nothing of the bench in it but the module that builds the app, ' +
      'adds the bare twins and creates the account and keys (`bench/http-server.mjs`): no tsx, no audio server, no load generator. ' +
      `From \`/proc\`: "start" once it listens with the account and keys made, "max" the largest of samples taken every ${RSS_SAMPLE_MS} ms during the measured phase, ` +
      `"peak" its VmHWM (set-up included).`,
  );
  return lines.join('\n') + '\n';
}

function deliveryReport(results: StorageResult[], notes: string[], startedAt: Date): string {
  const lines: string[] = [];
  header(lines, '## Delivery (one worker, fake Telegram Bot API, audio cached)', notes, startedAt);
  lines.push(
    `${fmt(MESSAGES)} live Telegram sends to ${fmt(CHATS)} chats through ${fmt(BOTS)} bots are queued (\`POST /send\` in the bench's server process, its worker off); ` +
      `then the service's own worker process starts (\`node bin/voicenote.js worker\`, the compiled dist/, \`LOG_LEVEL=warn\`) on the same storage, ` +
      `and the clock runs from its first claim (its start-up is the "start-up" column) until every message is delivered or failed (the database polled every 20 ms). ` +
      `Message i goes to chat i mod ${fmt(CHATS)} through a bot that moves on by one each time the chats come round again, so no chat hears twice from one bot ` +
      `and the service's pacing (about 28 sends a second per bot, one a second per bot and chat) allows up to about ${fmt(BOTS * 28)} messages a second: ` +
      `the run measures the worker, not the pace of one bot. ` +
      `The Bot API is the strict fake of the suite (\`test/fakes/telegram-api.ts\`) in a process of its own, with Telegram's flood limits enforced ` +
      `(429 to a send less than 900 ms after the last one to the same chat from the same bot, or beyond 30 a second from one bot): ` +
      `"429s" counts the sends that came faster than Telegram allows. Every delivery is a real multipart \`sendVoice\` upload over loopback. ` +
      `The audio is an OGG Opus mono file on a loopback HTTP server whose conversion is already in the audio cache before the clock starts. ` +
      `"CPU" is each process's CPU time over the run's wall time (the machine has ${availableParallelism()} cores).`,
    '',
  );
  lines.push('| storage | worker concurrency | messages | delivered | failed | sendVoice calls answered | 429s | start-up | time | messages/s | CPU: worker / fake Bot API |');
  lines.push('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const d = r.delivery!;
    lines.push(
      `| ${r.storage} | ${d.concurrency} | ${fmt(d.messages)} | ${fmt(d.delivered)} | ${fmt(d.failed)} | ${fmt(d.telegramCalls)} | ${fmt(d.floodRefusals)} | ${fmt(d.startupMs / 1000, 2)} s | ${fmt(d.ms / 1000, 2)} s | ${fmt((d.messages / d.ms) * 1000, 0)} | ${fmt(d.serverCpu, 2)} / ${fmt(d.fakeCpu, 2)} cores |`,
    );
  }
  for (const r of results) if (r.delivery!.firstError) lines.push('', `${r.storage}: first failure: \`${r.delivery!.firstError}\``);
  lines.push('');
  memoryTable(
    lines,
    results,
    'worker process RSS',
    'The worker process alone (`voicenote worker`, nothing else in it), from `/proc`: "start" at its first claim, ' +
      `"max" the largest of samples taken every ${RSS_SAMPLE_MS} ms until every message is settled, "peak" its VmHWM (start-up included).`,
  );
  return lines.join('\n') + '\n';
}

/** Both phases measure the compiled service (the HTTP server, the delivery worker): dist/ must not be older than src/. */
async function assertBuilt(): Promise<void> {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const newest = async (dir: string, ext: string): Promise<number> => {
    let max = 0;
    for (const entry of await readdir(join(root, dir), { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && entry.name.endsWith(ext)) max = Math.max(max, (await stat(join(entry.parentPath, entry.name))).mtimeMs);
    }
    return max;
  };
  const [source, built] = await Promise.all([newest('src', '.ts'), newest('dist', '.js').catch(() => 0)]);
  if (built < source) throw new Error('dist/ is older than src/: run `npm run build` first (the bench measures the compiled service)');
}

async function orchestrate(): Promise<void> {
  const startedAt = new Date();
  const notes: string[] = [];
  const storages: Array<{ storage: Storage; pgUrl?: string }> = [{ storage: 'sqlite' }];
  const pgUrl = process.env.BENCH_DATABASE_URL?.trim() || DEFAULT_PG_URL;
  if (pgUrl === 'none') {
    notes.push('PostgreSQL skipped: `BENCH_DATABASE_URL=none`.');
  } else {
    const problem = await postgresReachable(pgUrl);
    if (problem) {
      notes.push(`PostgreSQL skipped: \`${redactUrl(pgUrl)}\` is not reachable (${problem}). Set \`BENCH_DATABASE_URL\` to include it.`);
      console.error(`PostgreSQL at ${redactUrl(pgUrl)} is not reachable (${problem}); running SQLite only`);
    } else {
      storages.push({ storage: 'postgres', pgUrl });
    }
  }

  const phases: Phase[] = ONLY === 'http' ? ['http'] : ONLY === 'delivery' ? ['delivery'] : ['http', 'delivery'];
  await assertBuilt();
  const sections: Array<{ name: string; markdown: string }> = [];
  for (const phase of phases) {
    const results: StorageResult[] = [];
    for (const { storage, pgUrl: url } of storages) results.push(await runStorageProcess(storage, phase, url));
    const markdown = phase === 'http' ? httpReport(results, notes, startedAt) : deliveryReport(results, notes, startedAt);
    console.log(markdown);
    sections.push({ name: phase === 'http' ? 'api' : 'delivery', markdown });
  }
  if (process.env.BENCH_NO_WRITE) return;
  for (const { name, markdown } of sections) {
    await writeSection(name, markdown);
    console.error(`wrote the ${name} section of BENCHMARKS.md`);
  }
}

const storageArg = process.argv.find((a) => a.startsWith('--storage='))?.slice('--storage='.length);
const phaseArg = process.argv.find((a) => a.startsWith('--phase='))?.slice('--phase='.length);
if ((storageArg === 'sqlite' || storageArg === 'postgres') && (phaseArg === 'http' || phaseArg === 'delivery')) {
  try {
    const result = await runStorage(storageArg, phaseArg, process.env.BENCH_PG_URL_RESOLVED);
    process.send!(result, () => process.exit(0));
  } catch (err) {
    console.error(err);
    process.exit(1);
  }
} else if (storageArg !== undefined) {
  throw new Error(`unknown --storage=${storageArg} --phase=${phaseArg}`);
} else {
  await orchestrate();
}
