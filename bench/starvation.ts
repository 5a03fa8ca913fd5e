/**
 * Conversions beside deliveries: `npm run bench:starvation` (`node --import tsx bench/starvation.ts`).
 *
 * One worker process, the service's own (`voicenote worker`, compiled: `npm run build` first), on SQLite,
 * delivering live Telegram notes through the fake Bot API (test/fakes/telegram-api.ts, a process of its
 * own, Telegram's flood limits enforced). Each round measures two phases, in an order that alternates
 * from round to round so that drift in a shared machine's load hits both alike:
 *  - alone: BENCH_MESSAGES (1,000) notes whose audio is already converted (a one-minute note converted
 *    into the worker's audio cache before the first round) are made due at once; their rate is
 *    BENCH_MESSAGES over the time from the first attempt's start to the last one's end (the message
 *    log's attempt records, written by the worker);
 *  - during conversions: first BENCH_NOTES (50) distinct one-minute notes are made due, each a source
 *    nobody converted yet (MP3, 44.1 kHz stereo 128 kb/s, speech-like, pitch and start differing per
 *    note, and per round a different ID3 tag so their bytes are new); once an ffmpeg of the worker has
 *    run for BENCH_LEAD_MS (2 s), the same number of cached notes as alone is made due, and their rate
 *    measured the same way. The round ends when the distinct notes are delivered too.
 * Every note is queued beforehand with POST /send (send_at an hour ahead) and made due by moving its
 * due time, so the worker finds a whole batch due at once. One account sends all of them (the
 * default; BENCH_SPLIT_ACCOUNTS=1 gives the distinct notes an account of their own). Each note goes
 * to a chat of its own, the cached ones through 100 bots, the distinct ones through bots of their own.
 *
 * Reported: each phase's rate, medians and ranges, the ratio of the medians (the goal: at least
 * 80 %), and what the conversions did meanwhile: their notes delivered within the cached notes'
 * window, ffmpeg processes running (sampled from /proc every 25 ms), CPU of the worker and of its
 * conversions (its ffmpeg runs and Opus encoder processes) over the window, and when the last
 * distinct note was delivered.
 *
 * Environment: BENCH_ROUNDS (3), BENCH_MESSAGES (1000), BENCH_NOTES (50), BENCH_LEAD_MS (2000),
 * BENCH_WORKER_CONCURRENCY and BENCH_MAX_CONCURRENT_CONVERSIONS (passed to the worker as
 * WORKER_CONCURRENCY and MAX_CONCURRENT_CONVERSIONS; unset: the service's defaults),
 * BENCH_SPLIT_ACCOUNTS, BENCH_WORKER_NODE_OPTIONS, BENCH_NO_WRITE (print only). Writes its section of
 * BENCHMARKS.md between <!-- bench:starvation:start --> and <!-- bench:starvation:end -->.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAudioPipeline, resolveFfmpegPath } from '../src/audio/index.js';
import { defaultConcurrentConversions, DEFAULT_WORKER_CONCURRENCY } from '../src/config.js';
import { audioTargetFor } from '../src/platforms/registry.js';
import { startAudioServer } from '../test/fakes/audio-server.js';
import { startTelegramProcess, startWorkerProcess } from './api/processes.js';
import { botToken } from './api/settings.js';
import { benchAccount, buildApp, inject, openStorage } from './api/storage.js';
import { intEnv } from './env.js';
import { sample, type Sample } from './process-tree.js';
import { commandLine, machineDescription, writeSection } from './report.js';
import { id3Padding, makeSources } from './starvation-sources.js';

const ROUNDS = intEnv('BENCH_ROUNDS', 3, 1);
const MESSAGES = intEnv('BENCH_MESSAGES', 1000, 1);
const NOTES = intEnv('BENCH_NOTES', 50, 1);
const LEAD_MS = intEnv('BENCH_LEAD_MS', 2000, 0);
const SPLIT_ACCOUNTS = Boolean(process.env.BENCH_SPLIT_ACCOUNTS?.trim());
const WORKER_CONCURRENCY = process.env.BENCH_WORKER_CONCURRENCY?.trim() ? intEnv('BENCH_WORKER_CONCURRENCY', DEFAULT_WORKER_CONCURRENCY, 1) : undefined;
const CONVERSIONS = process.env.BENCH_MAX_CONCURRENT_CONVERSIONS?.trim() ? intEnv('BENCH_MAX_CONCURRENT_CONVERSIONS', 2, 1) : undefined;
const CACHED_BOTS = 100;
const WARM_UP = 200;
const SAMPLE_MS = 25;
const DUE_AHEAD_MS = 1500;
const INTAKE_CONCURRENCY = 20;

type Mode = 'alone' | 'during';

interface PhaseResult {
  round: number;
  mode: Mode;
  /** Notes over the time from their due time to the last one's delivery. */
  rate: number;
  windowMs: number;
  /** From their due time to the first one's attempt; and the rate from then on. */
  firstAttemptMs: number;
  runningRate: number;
  /** Cached notes in hand on average from the first attempt on, and an attempt's mean length. */
  inFlight: number;
  attemptMs: number;
  failed: number;
  /** During conversions: distinct notes delivered within the cached notes' window, and before it. */
  convertedInWindow?: number;
  convertedBefore?: number;
  /** Samples within the window with at least one ffmpeg running, in percent; their mean count. */
  ffmpegBusyPercent?: number;
  ffmpegMean?: number;
  workerCores: number;
  ffmpegCores: number;
  /** From making the distinct notes due to the last one's delivery. */
  conversionsMs?: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const range = (xs: number[], digits = 0): string => `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const startedAt = new Date();
  const ffmpegPath = resolveFfmpegPath(process.env.FFMPEG_PATH);
  const work = await mkdtemp(join(tmpdir(), 'voicenote-bench-starvation-'));
  console.error(`making ${NOTES + 1} one-minute sources`);
  const sources = await makeSources(ffmpegPath, work, NOTES + 1);
  const cachedSource = sources.pop()!;
  const audio = await startAudioServer();
  audio.route('/cached.mp3', { kind: 'bytes', body: cachedSource, contentType: 'audio/mpeg' });
  const telegram = await startTelegramProcess();
  const storage = await openStorage('sqlite', undefined);
  const secretKey = randomBytes(32).toString('base64');
  const app = await buildApp(storage, { TELEGRAM_API_ROOT: telegram.apiRoot, SECRET_KEY: secretKey });
  const db = app.services.db.kysely;
  const results: PhaseResult[] = [];
  let worker: ReturnType<typeof startWorkerProcess> | undefined;
  try {
    // The cached note is converted into the worker's cache (same data directory) before anything is timed.
    const warm = createAudioPipeline({ dataDir: storage.dataDir, ffmpegPath, allowPrivateUrls: true });
    (await warm.prepare({ url: audio.url('/cached.mp3'), target: audioTargetFor('telegram') })).release();
    await warm.close();
    const account = await benchAccount(app);
    const other = SPLIT_ACCOUNTS ? await benchAccount(app) : account;

    worker = startWorkerProcess({
      DATA_DIR: storage.dataDir,
      SECRET_KEY: secretKey,
      TELEGRAM_API_ROOT: telegram.apiRoot,
      AUDIO_ALLOW_PRIVATE_URLS: 'true',
      LOG_LEVEL: 'warn',
      ...(WORKER_CONCURRENCY !== undefined ? { WORKER_CONCURRENCY: String(WORKER_CONCURRENCY) } : {}),
      ...(CONVERSIONS !== undefined ? { MAX_CONCURRENT_CONVERSIONS: String(CONVERSIONS) } : {}),
      ...(process.env.FFMPEG_PATH ? { FFMPEG_PATH: process.env.FFMPEG_PATH } : {}),
    });
    const pid = worker.child.pid!;
    let exitCode: number | null | undefined;
    void worker.exited.then((code) => (exitCode = code));

    const later = new Date(Date.now() + 3_600_000).toISOString();
    let chat = 100_000_000;
    const queue = async (key: string, count: number, url: (i: number) => string, token: (i: number) => string): Promise<string[]> => {
      const ids: string[] = new Array(count);
      let next = 0;
      await Promise.all(Array.from({ length: INTAKE_CONCURRENCY }, async () => {
        while (next < count) {
          const i = next++;
          const body = { platform: 'telegram', recipient: String(chat + i), audio_url: url(i), session: { bot_token: token(i) }, send_at: later };
          const res = await inject(app, 'POST', '/api/v1/send', key, body);
          if (res.status !== 202) throw new Error(`POST /send answered ${res.status}: ${JSON.stringify(res.json)}`);
          ids[i] = res.json.id as string;
        }
      }));
      chat += count;
      return ids;
    };
    const makeDue = async (ids: string[], at = Date.now()): Promise<void> => {
      for (let i = 0; i < ids.length; i += 500) await db.updateTable('messages').set({ next_attempt_at: at }).where('id', 'in', ids.slice(i, i + 500)).execute();
    };
    const unsettled = async (): Promise<number> =>
      Number((await db.selectFrom('messages').select((eb) => eb.fn.countAll<number>().as('n')).where('status', 'in', ['queued', 'processing']).executeTakeFirstOrThrow()).n);
    const attempts = async (ids: string[]) => {
      const rows = [];
      for (let i = 0; i < ids.length; i += 500) {
        rows.push(...(await db.selectFrom('message_attempts').select(['message_id', 'started_at', 'ended_at', 'outcome']).where('message_id', 'in', ids.slice(i, i + 500)).execute()));
      }
      return rows;
    };
    const samples: Sample[] = [];
    /** Samples the worker until `done` says so; fails when the worker exits or time runs out. */
    const watch = async (done: () => Promise<boolean>, limitMs: number): Promise<void> => {
      const deadline = Date.now() + limitMs;
      for (;;) {
        if (exitCode !== undefined) throw new Error(`the worker exited with ${exitCode}`);
        if (Date.now() > deadline) throw new Error('the phase did not end in time');
        samples.push(await sample(pid));
        if (await done()) return;
        await sleep(SAMPLE_MS);
      }
    };

    let round = 0;
    const phase = async (mode: Mode): Promise<PhaseResult> => {
      const tag = id3Padding(16 + round * 2 + (mode === 'during' ? 1 : 0));
      const cached = await queue(account.liveKey, MESSAGES, () => audio.url('/cached.mp3'), (i) => botToken(i % CACHED_BOTS));
      let distinct: string[] = [];
      if (mode === 'during') {
        for (let i = 0; i < NOTES; i++) audio.route(`/r${round}/note-${i}.mp3`, { kind: 'bytes', body: Buffer.concat([tag, sources[i]!]), contentType: 'audio/mpeg' });
        distinct = await queue(other.liveKey, NOTES, (i) => audio.url(`/r${round}/note-${i}.mp3`), (i) => botToken(CACHED_BOTS + i));
      }
      samples.length = 0;
      let conversionsDueAt: number | undefined;
      if (mode === 'during') {
        conversionsDueAt = Date.now();
        await makeDue(distinct);
        let firstFfmpeg: number | undefined;
        await watch(async () => {
          const last = samples[samples.length - 1]!;
          if (last.ffmpegs > 0) firstFfmpeg ??= last.at;
          return firstFfmpeg !== undefined && last.at - firstFfmpeg >= LEAD_MS;
        }, 120_000);
      }
      // Due a moment ahead: an idle worker sleeps until the next due time, so it wakes for them on time.
      const dueAt = Date.now() + DUE_AHEAD_MS;
      await makeDue(cached, dueAt);
      const settled = async (ids: string[]): Promise<number> =>
        Number((await db.selectFrom('messages').select((eb) => eb.fn.countAll<number>().as('n')).where('id', 'in', ids).where('status', 'in', ['delivered', 'failed']).executeTakeFirstOrThrow()).n);
      await watch(async () => (await settled(cached)) === MESSAGES, 600_000);
      // Then the conversions' own end (the next phase must start with none running).
      await watch(async () => (await unsettled()) === 0 && samples[samples.length - 1]!.ffmpegs === 0, 900_000);
      const rows = await attempts(cached);
      const firstStart = Math.min(...rows.map((a) => Number(a.started_at)));
      const start = dueAt;
      const end = Math.max(...rows.map((a) => Number(a.ended_at)));
      const windowMs = end - start;
      const failed = rows.filter((a) => a.outcome === 'failed').length;
      const inWindow = samples.filter((s) => s.at >= start && s.at <= end);
      const first = samples.filter((s) => s.at <= start).at(-1) ?? inWindow[0]!;
      const last = samples.find((s) => s.at >= end) ?? samples.at(-1)!;
      const span = Math.max(1, last.at - first.at);
      const result: PhaseResult = {
        round: round + 1,
        mode,
        rate: (MESSAGES * 1000) / windowMs,
        windowMs,
        firstAttemptMs: firstStart - dueAt,
        inFlight: rows.reduce((n, a) => n + Number(a.ended_at) - Number(a.started_at), 0) / (end - firstStart),
        attemptMs: rows.reduce((n, a) => n + Number(a.ended_at) - Number(a.started_at), 0) / rows.length,
        runningRate: (MESSAGES * 1000) / (end - firstStart),
        failed,
        workerCores: (last.workerCpuMs - first.workerCpuMs) / span,
        ffmpegCores: (last.ffmpegCpuMs - first.ffmpegCpuMs) / span,
      };
      if (mode === 'during') {
        const conv = await attempts(distinct);
        const delivered = conv.filter((a) => a.outcome === 'delivered').map((a) => Number(a.ended_at));
        result.convertedBefore = delivered.filter((t) => t < start).length;
        result.convertedInWindow = delivered.filter((t) => t >= start && t <= end).length;
        result.ffmpegBusyPercent = inWindow.length ? (100 * inWindow.filter((s) => s.ffmpegs > 0).length) / inWindow.length : 0;
        result.ffmpegMean = inWindow.length ? inWindow.reduce((n, s) => n + s.ffmpegs, 0) / inWindow.length : 0;
        result.conversionsMs = Math.max(...delivered) - conversionsDueAt!;
        result.failed += conv.filter((a) => a.outcome === 'failed').length;
      }
      console.error(
        `round ${result.round} ${mode}: ${result.rate.toFixed(0)} notes/s over ${windowMs} ms (first attempt after ${result.firstAttemptMs} ms, then ${result.runningRate.toFixed(0)}/s, ${result.inFlight.toFixed(1)} in hand, ${result.attemptMs.toFixed(0)} ms each)` +
          (mode === 'during' ? `; conversions: ${result.convertedBefore} before, ${result.convertedInWindow} within, ffmpeg running ${result.ffmpegBusyPercent!.toFixed(0)} % of the window (mean ${result.ffmpegMean!.toFixed(2)}), all ${NOTES} in ${(result.conversionsMs! / 1000).toFixed(1)} s` : '') +
          `; CPU worker ${result.workerCores.toFixed(2)}, conversions ${result.ffmpegCores.toFixed(2)} cores`,
      );
      return result;
    };

    // Not measured: the worker's code warmed up, and the cached note's URL known to it.
    const warmUp = await queue(account.liveKey, WARM_UP, () => audio.url('/cached.mp3'), (i) => botToken(i % CACHED_BOTS));
    await makeDue(warmUp);
    await watch(async () => (await unsettled()) === 0, 300_000);

    for (round = 0; round < ROUNDS; round++) {
      const order: Mode[] = round % 2 === 0 ? ['alone', 'during'] : ['during', 'alone'];
      for (const mode of order) results.push(await phase(mode));
    }
  } finally {
    if (worker) {
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
    await app.close();
    await storage.cleanup();
    await telegram.stop();
    await audio.close();
    await rm(work, { recursive: true, force: true });
  }
  const report = reportOf(results, startedAt);
  console.log(report);
  if (process.env.BENCH_NO_WRITE) return;
  await writeSection('starvation', report);
  console.error('wrote the starvation section of BENCHMARKS.md');
}

function reportOf(results: PhaseResult[], startedAt: Date): string {
  const alone = results.filter((r) => r.mode === 'alone').map((r) => r.rate);
  const during = results.filter((r) => r.mode === 'during');
  const duringRates = during.map((r) => r.rate);
  const pairs = during.map((d) => d.rate / results.find((r) => r.mode === 'alone' && r.round === d.round)!.rate);
  const ratio = median(duringRates) / median(alone);
  const concurrency = WORKER_CONCURRENCY ?? DEFAULT_WORKER_CONCURRENCY;
  const conversions = CONVERSIONS ?? defaultConcurrentConversions();
  const rows = results.map((r) =>
    `| ${r.round} | ${r.mode === 'alone' ? 'alone' : `during ${NOTES} conversions`} | ${r.rate.toFixed(0)} | ${(r.windowMs / 1000).toFixed(2)} s | ${(r.firstAttemptMs / 1000).toFixed(2)} s | ${r.runningRate.toFixed(0)} | ${r.failed} | ` +
    (r.mode === 'during' ? `${r.convertedBefore} / ${r.convertedInWindow} | ${r.ffmpegBusyPercent!.toFixed(0)} % (${r.ffmpegMean!.toFixed(2)}) | ${(r.conversionsMs! / 1000).toFixed(1)} s` : '– | – | –') +
    ` | ${r.workerCores.toFixed(2)} / ${r.ffmpegCores.toFixed(2)} |`,
  );
  return `## Deliveries while distinct notes convert

Measured ${startedAt.toISOString()} with \`${commandLine('node --import tsx bench/starvation.ts')}\` (source: \`bench/starvation.ts\`).

${machineDescription()}

One \`voicenote worker\` process (the compiled dist/, \`LOG_LEVEL=warn\`, \`WORKER_CONCURRENCY=${concurrency}\`,
\`MAX_CONCURRENT_CONVERSIONS=${conversions}\`${CONVERSIONS === undefined ? ' (the default)' : ''}) on SQLite delivers live Telegram notes through the fake Bot API
(a process of its own, flood limits enforced). "Alone": ${MESSAGES.toLocaleString('en')} notes whose audio (a one-minute note) is already
in the worker's audio cache are made due at once. "During": first ${NOTES} distinct one-minute notes that need converting
(MP3 44.1 kHz stereo 128 kb/s, speech-like, new bytes every round) are made due; ${LEAD_MS / 1000} s after the worker's first
ffmpeg started, the same ${MESSAGES.toLocaleString('en')} cached notes are. ${SPLIT_ACCOUNTS ? 'The distinct notes come from an account of their own.' : 'One account sends both.'}
Rate = notes over the time from their due time to the last one's delivery (the end of its attempt in the message
log): the wait for the first claim counts. "First attempt" = from the due time to the first attempt's start, "then" =
the rate from that start on. Each batch is made due ${DUE_AHEAD_MS / 1000} s ahead, so that an idle worker, which sleeps until the next due
time, wakes for it on time. The two phases alternate in each round (alone first in odd rounds). "Converted before / within" = distinct
notes delivered before and during the cached notes' window; "ffmpeg running" = share of /proc samples (every
${SAMPLE_MS} ms) in that window with an ffmpeg of the worker (or of its encoder processes) running (their mean count); "all converted" = from making the
${NOTES} due to the last one's delivery. CPU in cores over the window: the worker process / its conversions (ffmpeg runs and Opus encoder processes).

| round | phase | notes/s | window | first attempt | then, notes/s | failed | converted before / within | ffmpeg running | all converted | CPU: worker / conversions |
|---|---|---|---|---|---|---|---|---|---|---|
${rows.join('\n')}

Alone: median ${median(alone).toFixed(0)} notes/s (range ${range(alone)}). During conversions: median ${median(duringRates).toFixed(0)} notes/s
(range ${range(duringRates)}). Ratio of the medians: **${(ratio * 100).toFixed(0)} %** (goal: at least 80 %); round by round
${pairs.map((p) => `${(p * 100).toFixed(0)} %`).join(', ')}.
`;
}

await main();
