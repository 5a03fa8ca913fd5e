/** The delivery phase: messages queued with the worker off, then delivered by the service's own worker process. */
import { randomBytes } from 'node:crypto';
import { createAudioPipeline, resolveFfmpegPath } from '../../src/audio/index.js';
import { audioTargetFor } from '../../src/platforms/registry.js';
import { procStats } from './load.js';
import { startTelegramProcess, startWorkerProcess, type FakeCounts } from './processes.js';
import { BOTS, CHATS, MESSAGES, RSS_SAMPLE_MS, SEND_INTAKE_CONCURRENCY, type Storage, WORKER_CONCURRENCY, recipientOf } from './settings.js';
import { benchAccount, buildApp, countMessages, inject, openStorage, withSearchPath } from './storage.js';

export async function runDelivery(storage: Storage, pgUrl: string | undefined, audioUrl: string) {
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
