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
import { fork } from 'node:child_process';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAudioServer } from '../test/fakes/audio-server.js';
import { sharedFixtures, testFfmpegPath } from '../test/fixtures/audio-fixtures.js';
import { writeSection } from './report.js';
import { nodeFlags } from './env.js';
import { runDelivery } from './api/delivery-phase.js';
import { runHttp } from './api/http-phase.js';
import { DEFAULT_PG_URL, ONLY, type Storage, TELEGRAM_TOKEN } from './api/settings.js';
import { postgresReachable, redactUrl } from './api/storage.js';
import { deliveryReport, httpReport } from './api/tables.js';
import type { Phase, StorageResult } from './api/types.js';

const SELF = fileURLToPath(import.meta.url);

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
        ...(http.walBytes !== undefined ? { walBytesAfterSendLoad: http.walBytes } : {}),
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
