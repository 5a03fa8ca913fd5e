/**
 * HTTP API and delivery benchmark: `npm run bench` (`node --import tsx bench/api.ts`).
 *
 * For each storage (SQLite always; PostgreSQL when reachable) a server process of its own builds the
 * app in-process with createApp and:
 *  1. loads it over loopback with autocannon, run in another process (bench/loadgen.ts) so load
 *     generator and server do not share an event loop: GET /healthz (the framework floor, the
 *     baseline), GET /api/v1/status/:id and POST /api/v1/send, each as a % of the baseline;
 *  2. queues BENCH_MESSAGES sandbox sends, then starts the worker and times until all are settled;
 *  3. records its RSS along the way.
 * Writes its section of BENCHMARKS.md (between <!-- bench:api:start --> and <!-- bench:api:end -->).
 *
 * Environment: BENCH_SECONDS (10), BENCH_CONNECTIONS (20), BENCH_WARMUP_SECONDS (1), BENCH_MESSAGES (500),
 * BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/test; `none` skips PostgreSQL).
 */
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import pino from 'pino';
import { createAccountWithKeys } from '../src/admin/accounts.js';
import { createApp, startWorker, type App } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { READ_REQUESTS_PER_MINUTE } from '../src/core/plans.js';
import { updatePlan } from '../src/store/accounts.js';
import { issueKey } from '../src/store/keys.js';
import { startAudioServer } from '../test/fakes/audio-server.js';
import { sharedFixtures, testFfmpegPath } from '../test/fixtures/audio-fixtures.js';
import type { LoadRequest, LoadResult, LoadSpec } from './loadgen.js';
import { commandLine, machineDescription, writeSection } from './report.js';

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
const MESSAGES = intEnv('BENCH_MESSAGES', 500, 1);
const DEFAULT_PG_URL = 'postgres://postgres@127.0.0.1:5432/test';
/** GET /status shares the fixed per-key read bucket; enough keys that this many req/s never exhausts it. */
const READ_RPS_CEILING = 20_000;
const SEND_INTAKE_CONCURRENCY = 20;
/** The worker's default (DeliveryWorker `concurrency`); startWorker does not take another. */
const WORKER_CONCURRENCY = 8;
const TELEGRAM_TOKEN = '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ';

const SELF = fileURLToPath(import.meta.url);
const LOADGEN = fileURLToPath(new URL('./loadgen.ts', import.meta.url));

interface Endpoint {
  label: string;
  what: string;
  load: LoadResult;
}

interface Rss {
  afterStart: number;
  afterHttp: number;
  beforeDelivery: number;
  afterDelivery: number;
  peak: number;
}

interface StorageResult {
  storage: Storage;
  endpoints: Endpoint[];
  readKeys: number;
  rowsAfterSendLoad: number;
  delivery: { messages: number; delivered: number; failed: number; firstError: string | null; ms: number };
  rss: Rss;
}

// ---------------------------------------------------------------------------------------------------
// Server process: one storage.

interface BenchStorage {
  env: Record<string, string>;
  pgSchema?: string;
  cleanup(): Promise<void>;
}

async function openStorage(storage: Storage, pgUrl: string | undefined): Promise<BenchStorage> {
  const dataDir = await mkdtemp(join(tmpdir(), 'voicenote-bench-api-'));
  const removeDir = () => rm(dataDir, { recursive: true, force: true });
  if (storage === 'sqlite') return { env: { DATA_DIR: dataDir }, cleanup: removeDir };
  const pgSchema = `bench_${randomBytes(6).toString('hex')}`;
  return {
    env: { DATA_DIR: dataDir, DATABASE_URL: pgUrl! },
    pgSchema,
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

async function buildApp(storage: BenchStorage): Promise<App> {
  const config = loadConfig({
    ...storage.env,
    LOG_LEVEL: 'silent',
    SECRET_KEY: randomBytes(32).toString('base64'),
    AUDIO_ALLOW_PRIVATE_URLS: 'true',
    SANDBOX_LATENCY_MS: '0',
    ...(process.env.FFMPEG_PATH ? { FFMPEG_PATH: process.env.FFMPEG_PATH } : {}),
  });
  return createApp(config, {
    worker: false,
    logger: pino({ level: 'silent' }),
    ...(storage.pgSchema ? { pgSchema: storage.pgSchema } : {}),
  });
}

/** An enterprise account whose send rate limit and quota never get in the way. */
async function benchAccount(app: App): Promise<{ accountId: string; testKey: string }> {
  const db = app.services.db.kysely;
  const created = await createAccountWithKeys(db, { name: 'bench', plan: 'enterprise' });
  await updatePlan(db, created.account.id, { plan: 'enterprise', rateLimit: 10_000_000, quota: 10_000_000 });
  return { accountId: created.account.id, testKey: created.testKey.secret };
}

async function inject(app: App, method: 'GET' | 'POST', url: string, key: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await app.server.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
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

async function measure(url: string, requests: LoadRequest[]): Promise<LoadResult> {
  if (WARMUP_SECONDS > 0) await runLoad({ url, connections: CONNECTIONS, seconds: WARMUP_SECONDS, requests });
  return runLoad({ url, connections: CONNECTIONS, seconds: SECONDS, requests });
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

const rssNow = (): number => process.memoryUsage().rss;

async function runStorage(storage: Storage, pgUrl: string | undefined): Promise<StorageResult> {
  const fixtures = await sharedFixtures(await testFfmpegPath());
  const audio = await startAudioServer();
  audio.route('/voice.ogg', { kind: 'file', path: fixtures['voice.ogg'], contentType: 'audio/ogg' });
  const sendBody = { platform: 'telegram', recipient: '123456789', audio_url: audio.url('/voice.ogg'), session: { bot_token: TELEGRAM_TOKEN } };

  try {
    // --- 1. HTTP, worker off.
    const httpStorage = await openStorage(storage, pgUrl);
    let endpoints: Endpoint[];
    let readKeys: string[];
    let rowsAfterSendLoad: number;
    let afterStart: number;
    let afterHttp: number;
    try {
      const app = await buildApp(httpStorage);
      try {
        await app.server.app.listen({ port: 0, host: '127.0.0.1' });
        const { port } = app.server.app.server.address() as AddressInfo;
        const url = `http://127.0.0.1:${port}`;
        const account = await benchAccount(app);

        const sent = await inject(app, 'POST', '/api/v1/send', account.testKey, sendBody);
        if (sent.status !== 202) throw new Error(`POST /send answered ${sent.status}: ${JSON.stringify(sent.json)}`);
        const messageId = sent.json.id as string;

        // The read bucket is READ_REQUESTS_PER_MINUTE per key whatever the plan: spread GET /status over
        // enough keys of the same account (all see the message) that 429s never happen.
        const keyCount = Math.max(1, Math.ceil(((SECONDS + WARMUP_SECONDS) * READ_RPS_CEILING) / (READ_REQUESTS_PER_MINUTE * 0.9)));
        readKeys = [account.testKey];
        while (readKeys.length < keyCount) readKeys.push((await issueKey(app.services.db.kysely, account.accountId, 'test')).secret);
        // One request per key first: it records the key's last use, a write that would otherwise land in the run.
        for (const key of readKeys) {
          const res = await inject(app, 'GET', `/api/v1/status/${messageId}`, key);
          if (res.status !== 200) throw new Error(`GET /status answered ${res.status}: ${JSON.stringify(res.json)}`);
        }
        await inject(app, 'POST', '/api/v1/send', account.testKey, sendBody); // and the send key's
        afterStart = rssNow();

        const auth = (key: string) => ({ authorization: `Bearer ${key}` });
        console.error(`[${storage}] GET /healthz`);
        const health = await measure(url, [{ method: 'GET', path: '/healthz' }]);
        console.error(`[${storage}] GET /api/v1/status/:id over ${readKeys.length} keys`);
        const status = await measure(
          url,
          readKeys.map((key) => ({ method: 'GET', path: `/api/v1/status/${messageId}`, headers: auth(key) })),
        );
        console.error(`[${storage}] POST /api/v1/send`);
        const send = await measure(url, [
          {
            method: 'POST',
            path: '/api/v1/send',
            headers: { ...auth(account.testKey), 'content-type': 'application/json' },
            body: JSON.stringify(sendBody),
          },
        ]);
        afterHttp = rssNow();
        rowsAfterSendLoad = (await countMessages(app)).total;
        endpoints = [
          { label: 'GET /healthz', what: 'baseline: no auth, no storage', load: health },
          { label: 'GET /api/v1/status/:id', what: 'auth + rate limit + usage + one read', load: status },
          { label: 'POST /api/v1/send', what: 'auth + validation + one write transaction', load: send },
        ];
      } finally {
        await app.close();
      }
    } finally {
      await httpStorage.cleanup();
    }

    // --- 2. Delivery: queue N sends with the worker off, then start it and time until all settle.
    const deliveryStorage = await openStorage(storage, pgUrl);
    let delivery: StorageResult['delivery'];
    let beforeDelivery: number;
    let afterDelivery: number;
    try {
      const app = await buildApp(deliveryStorage);
      try {
        const account = await benchAccount(app);
        console.error(`[${storage}] queueing ${MESSAGES} sandbox sends`);
        let next = 0;
        await Promise.all(
          Array.from({ length: SEND_INTAKE_CONCURRENCY }, async () => {
            while (next < MESSAGES) {
              next++;
              const res = await inject(app, 'POST', '/api/v1/send', account.testKey, sendBody);
              if (res.status !== 202) throw new Error(`POST /send answered ${res.status}: ${JSON.stringify(res.json)}`);
            }
          }),
        );
        beforeDelivery = rssNow();
        console.error(`[${storage}] delivering`);
        const started = performance.now();
        const running = startWorker(app.services, { pollMs: 50 });
        const deadline = Date.now() + Math.max(120_000, MESSAGES * 500);
        let counts = await countMessages(app);
        try {
          while (counts.delivered + counts.failed < MESSAGES) {
            if (Date.now() > deadline) throw new Error(`only ${counts.delivered + counts.failed} of ${MESSAGES} messages settled in time`);
            await new Promise((r) => setTimeout(r, 20));
            counts = await countMessages(app);
          }
        } finally {
          await running.stop();
        }
        const ms = performance.now() - started;
        afterDelivery = rssNow();
        const failedRow = counts.failed
          ? await app.services.db.kysely.selectFrom('messages').select(['error_code', 'error_message']).where('status', '=', 'failed').executeTakeFirst()
          : undefined;
        delivery = {
          messages: MESSAGES,
          delivered: counts.delivered,
          failed: counts.failed,
          firstError: failedRow ? `${failedRow.error_code}: ${failedRow.error_message}` : null,
          ms,
        };
      } finally {
        await app.close();
      }
    } finally {
      await deliveryStorage.cleanup();
    }

    return {
      storage,
      endpoints,
      readKeys: readKeys.length,
      rowsAfterSendLoad,
      delivery,
      rss: { afterStart, afterHttp, beforeDelivery, afterDelivery, peak: process.resourceUsage().maxRSS * 1024 },
    };
  } finally {
    await audio.close();
  }
}

// ---------------------------------------------------------------------------------------------------
// Orchestrator: one server process per storage, then the report.

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

function runStorageProcess(storage: Storage, pgUrl: string | undefined): Promise<StorageResult> {
  return new Promise((resolve, reject) => {
    const child = fork(SELF, [`--storage=${storage}`], {
      execArgv: ['--import', 'tsx'],
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
      else reject(new Error(`${storage} server process exited with ${code} and no result`));
    });
  });
}

const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const mib = (bytes: number): string => `${fmt(bytes / 1024 ** 2, 0)} MiB`;

function report(results: StorageResult[], notes: string[], startedAt: Date): string {
  const lines: string[] = [];
  lines.push('## HTTP API and delivery', '');
  lines.push(`Measured ${startedAt.toISOString()} with \`${commandLine('node --import tsx bench/api.ts')}\` (source: \`bench/api.ts\`).`, '');
  lines.push(machineDescription(), '');
  lines.push(
    `Each storage runs in a server process of its own: the app built with \`createApp\` (logging silent), listening on 127.0.0.1, ` +
      `one enterprise account with rate limit and quota set to 10,000,000. Load comes from autocannon in a separate process: ` +
      `${CONNECTIONS} connections, ${SECONDS} s per endpoint after ${WARMUP_SECONDS} s of warm-up, endpoints one after another. ` +
      `"% of baseline" is the endpoint's req/s over \`GET /healthz\` on the same storage in the same run.`,
    '',
  );
  for (const note of notes) lines.push(`> ${note}`, '');

  lines.push('### HTTP (worker off)', '');
  lines.push('| storage | endpoint | measures | req/s (mean) | % of baseline | p50 | p99 | requests | non-2xx | errors |');
  lines.push('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const base = r.endpoints[0]!.load.rps;
    for (const e of r.endpoints) {
      const l = e.load;
      lines.push(
        `| ${r.storage} | \`${e.label}\` | ${e.what} | ${fmt(l.rps)} | ${fmt((l.rps / base) * 100, 1)} % | ${l.p50} ms | ${l.p99} ms | ${fmt(l.total)} | ${fmt(l.non2xx)} | ${fmt(l.errors + l.timeouts)} |`,
      );
    }
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

  lines.push('### Delivery (worker on, sandbox)', '');
  lines.push(
    `${fmt(MESSAGES)} sandbox Telegram sends are queued with the worker off; then one worker starts (concurrency ${WORKER_CONCURRENCY}, ` +
      `\`SANDBOX_LATENCY_MS=0\`) and the clock runs until every message is delivered or failed (the database polled every 20 ms). ` +
      `The audio is an OGG Opus mono file on a loopback HTTP server, already in Telegram's format: every delivery downloads and hashes ` +
      `it, and the audio cache (keyed by content) means it is prepared once, not once per message.`,
    '',
  );
  lines.push('| storage | messages | delivered | failed | time | messages/s |');
  lines.push('|---|---|---|---|---|---|');
  for (const r of results) {
    const d = r.delivery;
    lines.push(`| ${r.storage} | ${fmt(d.messages)} | ${fmt(d.delivered)} | ${fmt(d.failed)} | ${fmt(d.ms / 1000, 2)} s | ${fmt((d.messages / d.ms) * 1000, 0)} |`);
  }
  for (const r of results) if (r.delivery.firstError) lines.push('', `${r.storage}: first failure: \`${r.delivery.firstError}\``);
  lines.push('');

  lines.push('### Memory (server process RSS)', '');
  lines.push(
    'The server process also holds the loopback audio server and this script; the load generator is not in it. ' +
      '"Start" is after the app is built and the keys are warmed, "peak" is the process maximum (`getrusage`).',
    '',
  );
  lines.push('| storage | start | after HTTP load | before delivery | after delivery | peak |');
  lines.push('|---|---|---|---|---|---|');
  for (const r of results) {
    const m = r.rss;
    lines.push(`| ${r.storage} | ${mib(m.afterStart)} | ${mib(m.afterHttp)} | ${mib(m.beforeDelivery)} | ${mib(m.afterDelivery)} | ${mib(m.peak)} |`);
  }
  return lines.join('\n') + '\n';
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

  const results: StorageResult[] = [];
  for (const { storage, pgUrl: url } of storages) results.push(await runStorageProcess(storage, url));

  const markdown = report(results, notes, startedAt);
  console.log(markdown);
  await writeSection('api', markdown);
  console.error('wrote the api section of BENCHMARKS.md');
}

const storageArg = process.argv.find((a) => a.startsWith('--storage='))?.slice('--storage='.length);
if (storageArg === 'sqlite' || storageArg === 'postgres') {
  try {
    const result = await runStorage(storageArg, process.env.BENCH_PG_URL_RESOLVED);
    process.send!(result, () => process.exit(0));
  } catch (err) {
    console.error(err);
    process.exit(1);
  }
} else if (storageArg !== undefined) {
  throw new Error(`unknown --storage=${storageArg}`);
} else {
  await orchestrate();
}
