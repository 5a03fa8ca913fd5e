/**
 * Memory over a long run: `npm run bench:soak` (`node --import tsx bench/soak.ts`).
 *
 * One service process as in production with SQLite: `node bin/voicenote.js serve` (the compiled dist/:
 * `npm run build` first), its worker in the same process, live Telegram deliveries to the fake Bot API
 * (its own process), the audio on a loopback server (in this script's process, not the service's).
 * A load generator (its own process) sends a steady mix of POST /send (to many chats) and
 * GET /status at a fixed rate for BENCH_SOAK_SECONDS; the service's RSS is read from /proc every
 * BENCH_SOAK_SAMPLE_SECONDS. Writes the `soak` section of BENCHMARKS.md.
 *
 * The sends go to the chats in turn, each through one of BENCH_SOAK_BOTS bots, so that the service can
 * deliver as fast as it accepts: one bot delivers at most ~28 notes a second (Telegram's pace), and a
 * queue that grows all the time would grow the process with it, whatever its memory does otherwise.
 *
 * Environment: BENCH_SOAK_SECONDS (600), BENCH_SOAK_RATE (200 requests/s, half of them sends),
 * BENCH_SOAK_SAMPLE_SECONDS (10), BENCH_CHATS (200), BENCH_SOAK_BOTS (10), BENCH_SOAK_NODE_OPTIONS (node
 * flags for the service), BENCH_SOAK_LOG_LEVEL (the service's LOG_LEVEL, warn).
 */
import { fork, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createAccountWithKeys } from '../src/admin/accounts.js';
import { READ_REQUESTS_PER_MINUTE } from '../src/core/plans.js';
import { updatePlan } from '../src/store/accounts.js';
import { migrate, openDb } from '../src/store/db.js';
import { issueKey } from '../src/store/keys.js';
import { startAudioServer } from '../test/fakes/audio-server.js';
import { sharedFixtures, testFfmpegPath } from '../test/fixtures/audio-fixtures.js';
import type { LoadRequest, LoadResult, LoadSpec } from './loadgen.js';
import { commandLine, machineDescription, writeSection } from './report.js';

function intEnv(name: string, fallback: number, min: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be a whole number ≥ ${min}, got "${raw}"`);
  return value;
}

const SECONDS = intEnv('BENCH_SOAK_SECONDS', 600, 10);
const RATE = intEnv('BENCH_SOAK_RATE', 200, 2);
const SAMPLE_SECONDS = intEnv('BENCH_SOAK_SAMPLE_SECONDS', 10, 1);
// The request list travels to the load generator on its command line: a few hundred entries at most.
const CHATS = intEnv('BENCH_CHATS', 200, 1);
const BOTS = intEnv('BENCH_SOAK_BOTS', 10, 1);
const LOG_LEVEL = process.env.BENCH_SOAK_LOG_LEVEL?.trim() || 'warn';
const CONNECTIONS = 20;
const TELEGRAM_TOKENS = Array.from({ length: BOTS }, (_, i) => `${123456789 + i}:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ`);
const LOADGEN = fileURLToPath(new URL('./loadgen.ts', import.meta.url));
const TELEGRAM_PROCESS = fileURLToPath(new URL('./telegram-process.ts', import.meta.url));
const VOICENOTE_BIN = fileURLToPath(new URL('../bin/voicenote.js', import.meta.url));
const MiB = 1024 * 1024;

/** A process's resident set now (VmRSS), from /proc. */
async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024;
}

/** A port free on loopback right now (the service is told to listen on it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function runLoad(spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = fork(LOADGEN, [JSON.stringify(spec)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let result: LoadResult | undefined;
    child.on('message', (m) => (result = m as LoadResult));
    child.on('error', reject);
    child.on('exit', (code) => (result ? resolve(result) : reject(new Error(`load generator exited with ${code} and no result`))));
  });
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const telegram = fork(TELEGRAM_PROCESS, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const apiRoot = await new Promise<string>((resolve, reject) => {
    telegram.once('message', (m) => resolve((m as { apiRoot: string }).apiRoot));
    telegram.once('exit', (code) => reject(new Error(`fake Telegram exited with ${code}`)));
  });
  const fixtures = await sharedFixtures(await testFfmpegPath());
  const audio = await startAudioServer();
  audio.route('/voice.ogg', { kind: 'file', path: fixtures['voice.ogg'], contentType: 'audio/ogg' });
  const dataDir = await mkdtemp(join(tmpdir(), 'voicenote-bench-soak-'));
  const samples: Array<{ second: number; rss: number }> = [];
  let load: LoadResult;
  let counts: Record<string, number>;
  let heapUsed = 0;
  try {
    // The account and its keys are written before the service starts, as an operator's commands would.
    const setup = await openDb({ databaseUrl: undefined, dataDir });
    let created: Awaited<ReturnType<typeof createAccountWithKeys>>;
    const readKeys: string[] = [];
    try {
      await migrate(setup);
      created = await createAccountWithKeys(setup.kysely, { name: 'soak', plan: 'enterprise' });
      await updatePlan(setup.kysely, created.account.id, { plan: 'enterprise', rateLimit: 10_000_000, quota: 10_000_000 });
      // Reads draw from a per-key bucket: enough keys of the account that the status reads never meet a 429.
      readKeys.push(created.liveKey.secret);
      const readsPerMinute = (RATE / 2) * 60;
      while (readKeys.length < Math.ceil(readsPerMinute / (READ_REQUESTS_PER_MINUTE * 0.8))) readKeys.push((await issueKey(setup.kysely, created.account.id, 'live')).secret);
    } finally {
      await setup.close();
    }

    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const metricsToken = randomBytes(16).toString('hex');
    const service = spawn(process.execPath, [...(process.env.BENCH_SOAK_NODE_OPTIONS?.split(/\s+/).filter(Boolean) ?? []), VOICENOTE_BIN, 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        DATA_DIR: dataDir,
        HOST: '127.0.0.1',
        PORT: String(port),
        SECRET_KEY: randomBytes(32).toString('base64'),
        LOG_LEVEL,
        AUDIO_ALLOW_PRIVATE_URLS: 'true',
        TELEGRAM_API_ROOT: apiRoot,
        // Load shedding off: on this shared machine a stall caused by other work would turn requests into 503s.
        MAX_EVENT_LOOP_DELAY_MS: '0',
        // The heap in use at the end, from the service's own metrics.
        METRICS_TOKEN: metricsToken,
        ...(process.env.FFMPEG_PATH ? { FFMPEG_PATH: process.env.FFMPEG_PATH } : {}),
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const exited = new Promise<number | null>((resolve) => service.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 30_000;
      for (;;) {
        if ((await fetch(`${url}/healthz`).then((r) => r.ok, () => false))) break;
        if (service.exitCode !== null || Date.now() > deadline) throw new Error(`the service did not come up (exit code ${service.exitCode})`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const body = (i: number) =>
        JSON.stringify({
          platform: 'telegram',
          recipient: String(100_000_000 + (i % CHATS)),
          audio_url: audio.url('/voice.ogg'),
          session: { bot_token: TELEGRAM_TOKENS[i % BOTS] },
        });
      const first = await fetch(`${url}/api/v1/send`, {
        method: 'POST',
        headers: { authorization: `Bearer ${created.liveKey.secret}`, 'content-type': 'application/json' },
        body: body(0),
      });
      if (first.status !== 202) throw new Error(`POST /send answered ${first.status}: ${await first.text()}`);
      const messageId = ((await first.json()) as { id: string }).id;
      // One send, one status read, alternately; the sends spread over CHATS chats and BOTS bots.
      const requests: LoadRequest[] = [];
      const cycle = Math.max(CHATS, BOTS, readKeys.length);
      for (let i = 0; i < cycle; i++) {
        requests.push({ method: 'POST', path: '/api/v1/send', headers: { authorization: `Bearer ${created.liveKey.secret}`, 'content-type': 'application/json' }, body: body(i) });
        requests.push({ method: 'GET', path: `/api/v1/status/${messageId}`, headers: { authorization: `Bearer ${readKeys[i % readKeys.length]}` } });
      }
      const started = performance.now();
      const sample = async () => samples.push({ second: Math.round((performance.now() - started) / 1000), rss: await rssOf(service.pid!) });
      await sample();
      const timer = setInterval(() => void sample().catch(() => undefined), SAMPLE_SECONDS * 1000);
      console.error(`soak: ${RATE} requests/s for ${SECONDS} s`);
      try {
        // One cycle shared by the connections: chat after chat, as a bulk send queues them. Each connection
        // going through the list on its own sent every chat one note per connection at once, a line of 20
        // that Telegram's one a second per chat takes 20 s to deliver.
        load = await runLoad({ url, connections: CONNECTIONS, seconds: SECONDS, requests, rate: RATE, shareCycle: true });
      } finally {
        clearInterval(timer);
        await sample();
      }
      const metrics = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } })).text();
      heapUsed = Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(metrics)?.[1] ?? 0);
    } finally {
      service.kill('SIGTERM');
      await exited;
    }
    const db = await openDb({ databaseUrl: undefined, dataDir });
    try {
      const rows = await db.kysely.selectFrom('messages').select(['status', (eb) => eb.fn.countAll<number>().as('n')]).groupBy('status').execute();
      counts = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
    } finally {
      await db.close();
    }
  } finally {
    await audio.close();
    await rm(dataDir, { recursive: true, force: true });
    telegram.disconnect();
  }

  const mib = (n: number) => `${(n / MiB).toFixed(0)} MiB`;
  const window = Math.max(1, Math.round(60 / SAMPLE_SECONDS));
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const rss = samples.map((s) => s.rss);
  const firstMinute = mean(rss.slice(1, 1 + window));
  const lastMinute = mean(rss.slice(-window));
  // The first minute includes the warm-up (V8's young generation growing to its size, code compiled):
  // the second half shows whether the process still grows once warm.
  const middle = Math.floor(rss.length / 2);
  const middleMinute = mean(rss.slice(Math.max(1, middle - Math.floor(window / 2)), middle - Math.floor(window / 2) + window));
  const lines: string[] = [];
  lines.push('## Memory over a long run (soak)', '');
  lines.push(`Measured ${startedAt.toISOString()} with \`${commandLine('node --import tsx bench/soak.ts')}\` (source: \`bench/soak.ts\`).`, '');
  lines.push(machineDescription(), '');
  lines.push(
    `One service process on SQLite, \`node bin/voicenote.js serve\` (compiled, its worker in the same process, default \`WORKER_CONCURRENCY\`, ` +
      `load shedding off, \`LOG_LEVEL=${LOG_LEVEL}\`), delivering live Telegram ` +
      `messages to the fake Bot API (its own process) with audio from a loopback server (in the bench's process). The load generator (its own process) ` +
      `sends ${RATE} requests/s over ${CONNECTIONS} connections for ${SECONDS} s, alternating \`POST /send\` (to ${CHATS} chats in turn, through ${BOTS} bots) ` +
      `and \`GET /status\`. RSS of the service process read from \`/proc\` every ${SAMPLE_SECONDS} s; the heap in use at the end from its \`/metrics\`.`,
    '',
  );
  lines.push('| requests | req/s | p50 | p99 | non-2xx | errors | messages delivered / failed / waiting |');
  lines.push('|---|---|---|---|---|---|---|');
  lines.push(
    `| ${load.total.toLocaleString('en-US')} | ${load.rps.toFixed(0)} | ${load.p50} ms | ${load.p99} ms | ${load.non2xx} | ${load.errors + load.timeouts} | ` +
      `${counts.delivered ?? 0} / ${counts.failed ?? 0} / ${(counts.queued ?? 0) + (counts.processing ?? 0)} |`,
    '',
  );
  const change = (from: number, to: number) => `${((to - from) / MiB).toFixed(1)} MiB`;
  lines.push('| RSS at start | max | mean of the first minute | of the middle minute | of the last minute | change, first to last minute | change, middle to last minute | heap used at the end |');
  lines.push('|---|---|---|---|---|---|---|---|');
  lines.push(
    `| ${mib(rss[0]!)} | ${mib(Math.max(...rss))} | ${mib(firstMinute)} | ${mib(middleMinute)} | ${mib(lastMinute)} | ${change(firstMinute, lastMinute)} | ${change(middleMinute, lastMinute)} | ${mib(heapUsed)} |`,
    '',
  );
  const perMinute = samples.filter((_, i) => i % window === 0).map((s) => `${Math.round(s.second / 60)} min: ${mib(s.rss)}`);
  lines.push(`RSS by minute: ${perMinute.join(', ')}.`);
  const markdown = lines.join('\n') + '\n';
  console.log(markdown);
  if (!process.env.BENCH_NO_WRITE) await writeSection('soak', markdown);
}

await main();
