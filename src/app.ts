import type { Logger } from 'pino';
import { createAudioPipeline, resolveFfmpegPath, type AudioPipeline } from './audio/index.js';
import { CallerDirectory } from './api/caller.js';
import { connectRedis, RateLimiter } from './api/rate-limiter.js';
import type { Config } from './config.js';
import { SecretBox } from './core/secret-box.js';
import { DeliveryWorker, type AudioSource } from './delivery/worker.js';
import { createRhythmGate } from './delivery/rhythm-gate.js';
import { conversionSlotsFor } from './delivery/claim.js';
import type { Rhythm } from './core/rhythm.js';
import { createLogger } from './logger.js';
import { startMetricsListener, type MetricsListener } from './metrics/exposure.js';
import { createMetrics } from './metrics/metrics.js';
import { withAttemptMetrics } from './delivery/attempt-metrics.js';
import { createSandboxAdapter, createUnavailableAdapter } from './platforms/sandbox/adapter.js';
import type { LinkedinTuning } from './platforms/linkedin/index.js';
import type { PlatformAdapter, PlatformContext, PlatformDefinition } from './platforms/platform.js';
import { createPlatformRegistry } from './platforms/registry.js';
import { createWhatsappSessions } from './platforms/whatsapp/sessions.js';
import { createLiveWhatsapp, type LiveTuning } from './platforms/whatsapp/live.js';
import { platformConnectionProxies } from './platforms/proxy/connection-proxy.js';
import { createBaileysSocketFactory, type WhatsappSocketFactory } from './platforms/whatsapp/socket.js';
import { startRetention } from './housekeeping/retention.js';
import { startSenderEndWatch } from './delivery/sender-ends.js';
import { loadOrCreateSecretKey } from './secret-key.js';
import type { Server } from './server.js';
import type { Services } from './services.js';
import { migrate, openDb } from './store/db.js';
import { checkSecretKey } from './store/key-check.js';
import { purgeExpiredIdempotency } from './store/idempotency.js';
import { createAttemptRecorder } from './message-log/recorder.js';
import { createRecorder } from './inbound/recorder.js';
import { recordEventually } from './inbound/record-eventually.js';
import type { MessageRow } from './store/messages.js';
import { SandboxReplier } from './inbound/sandbox-replies.js';
import { startTelegramListening } from './platforms/telegram/listener.js';
import { listenTuningOf, startLinkedinListening } from './platforms/linkedin/listen-setup.js';
import { WebhookSender, type WebhookSenderOptions } from './webhooks/sender.js';
import { sweepDueSandboxSessions, sweepDueSandboxTelegramSessions } from './webhooks/session-sweep.js';
import { createLiveTelegramAccounts } from './platforms/telegram/account/live.js';
import { createTelegramSessions } from './platforms/telegram/account/sessions.js';
import { createAccountReceipts } from './platforms/telegram/account/receipts.js';
import { createAccountReplies } from './platforms/telegram/account/replies.js';
import type { TelegramClientFactory } from './platforms/telegram/account/client.js';
import { createGramjsClientFactory } from './platforms/telegram/account/gramjs-client.js';
import type { TelegramAccountTuning } from './platforms/telegram/account/context.js';

export interface AppOptions {
  /** Run the delivery worker in this process (`serve` does unless --no-worker). */
  worker: boolean;
  /** Tests: a logger of their own, a PostgreSQL schema of their own, a Redis key prefix of their own. */
  logger?: Logger;
  pgSchema?: string;
  redisKeyPrefix?: string;
  /** Benchmarks: SQLite's busy_timeout (bench/sqlite-lock-wait.ts compares the old 5 s with the default). */
  sqliteBusyTimeoutMs?: number;
  workerPollMs?: number;
  /** Tests: how long a worker's claim on a message lasts before another worker may take it. */
  workerLeaseMs?: number;
  /** Tests: skews this process's clock for the worker (nodes whose clocks disagree). */
  workerClockOffsetMs?: number;
  /** Tests: the clock that times the sandbox (WhatsApp sessions' auto-scan and QR expiry, the answering recipients' 4 s) and that send windows are weighed on. */
  now?: () => number;
  /** Tests: where live WhatsApp sockets come from (default: Baileys, loaded on first use). */
  whatsappSocketFactory?: WhatsappSocketFactory;
  /** Tests: live WhatsApp timings (QR validity and wait, leases, reconnects, send pacing). */
  whatsappLive?: LiveTuning;
  /** Tests: where MTProto connections of Telegram accounts come from (default: GramJS), and their timings. */
  telegramClientFactory?: TelegramClientFactory;
  telegramAccounts?: TelegramAccountTuning;
  /** Tests: how long the check of a WhatsApp session's or Telegram account's proxy before each connection waits (default 10 s). */
  proxyCheckTimeoutMs?: number;
  /** Tests: webhook retry delays, receiver timeout, outbox poll, address policy. */
  webhooks?: Pick<WebhookSenderOptions, 'retryDelaysMs' | 'timeoutMs' | 'pollMs' | 'addressPolicy' | 'lookup' | 'concurrency' | 'endpointConcurrency' | 'breaker'>;
  /** Tests: how often event-loop pressure is sampled for load shedding (default 1 s). */
  pressureSampleMs?: number;
  /** Benchmarks: `per-server` compiles the routes' schemas anew for this app, as Fastify does by itself. */
  schemaCompilers?: 'shared' | 'per-server';
  /** Tests: the gap between two live LinkedIn deliveries of one account (default 3–5 s), and the per-call timeout. */
  linkedinPace?: LinkedinTuning;
  /** Tests: per-platform tuning by platform name (each platform reads its own entry). */
  platformTuning?: Readonly<Record<string, unknown>>;
  /** Tests: the platforms' default daily rhythms instead of the built-in ones (a platform left out: no cap). */
  rhythmDefaults?: Readonly<Record<string, Rhythm>>;
  /**
   * Tests only: extra platforms registered beside the built-in ones (never listed to users). The hook a
   * suite uses to prove a platform is one folder and one registry entry.
   */
  testPlatforms?: readonly PlatformDefinition[];
}

/** How a worker process is tuned; none of it comes from the environment. */
export interface WorkerTuning {
  /** Messages in hand at once; WORKER_CONCURRENCY when not given. */
  concurrency?: number;
  pollMs?: number;
  leaseMs?: number;
  clock?: () => number;
  linkedinPace?: LinkedinTuning;
  /** Benchmarks and tests: per-platform tuning by platform name (each platform reads its own entry). */
  platformTuning?: Readonly<Record<string, unknown>>;
  /** Told of each message the worker delivered (the sandbox's answering recipients). */
  onDelivered?: (message: MessageRow) => void;
  /** Tests: the clock the sandbox's answering recipients wait 4 s on. */
  sandboxClock?: () => number;
}

export interface App {
  services: Services;
  server: Server;
  worker: DeliveryWorker | undefined;
  /** Stops taking requests, finishes what is in flight, hands back leases, closes connections. */
  close(): Promise<void>;
}

const HOUSEKEEPING_INTERVAL_MS = 10 * 60_000;
const SESSION_SWEEP_INTERVAL_MS = 1_000;

interface OpenedServices {
  services: Services;
  /** Lets `wakeWorker` reach the worker once there is one. */
  attachWorker(worker: DeliveryWorker): void;
  close(): Promise<void>;
}

/** Storage (migrated), secrets, limits and sessions: what both `serve` and `worker` stand on. */
export async function openServices(config: Config, options: Omit<AppOptions, 'worker'>): Promise<OpenedServices> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const db = await openDb({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    pgSchema: options.pgSchema,
    poolSize: config.databasePoolSize,
    onPoolError: (err) => logger.warn({ error: err.message }, 'a PostgreSQL connection broke; the pool replaces it'),
    backgroundCheckpoints: { onError: (message) => logger.warn(message) },
    ...(options.sqliteBusyTimeoutMs !== undefined ? { sqliteBusyTimeoutMs: options.sqliteBusyTimeoutMs } : {}),
  });
  await migrate(db);
  const secretBox = new SecretBox(loadOrCreateSecretKey(config.dataDir, config.secretKey));
  await checkSecretKey(db.kysely, secretBox).catch(async (error: unknown) => {
    await db.close();
    throw error;
  });
  const redis = config.redisUrl ? await connectRedis(config.redisUrl, logger) : undefined;
  const rateLimiter = new RateLimiter({ redis, keyPrefix: options.redisKeyPrefix });
  const callers = new CallerDirectory(db);
  // One recorder for everything the listeners hear (src/inbound/).
  const onHeard = createRecorder({
    db: db.kysely,
    logger,
    // Notes a reply canceled are given back to the quota: this process's usage count learns it at once.
    onCanceled: (canceled) => {
      for (const { message, sent } of canceled) {
        if (sent !== undefined) callers.noteReturned({ accountId: message.account_id, env: message.env, periodStart: Number(message.period_start) }, sent);
      }
    },
  });
  // Sockets push a message once: one that could not be recorded is tried again here until it is.
  const onPushed = recordEventually(onHeard, logger);
  // The proxies of long-lived connections (a WhatsApp socket, a Telegram account's MTProto): decided and checked before each one.
  const proxyDeps = { db: db.kysely, secretBox, log: logger, timeoutMs: options.proxyCheckTimeoutMs ?? 10_000 };
  const whatsappLive = createLiveWhatsapp({
    onHeard: onPushed,
    ...options.whatsappLive,
    db: db.kysely,
    secretBox,
    logger,
    socketFactory: options.whatsappSocketFactory ?? createBaileysSocketFactory({ webSocketUrl: config.whatsappWebSocketUrl }),
    proxies: platformConnectionProxies('whatsapp', config, proxyDeps),
    ...(options.now ? { now: options.now } : {}),
  });
  const whatsappSessions = createWhatsappSessions({
    db: db.kysely,
    autoScanSeconds: config.sandboxAutoScanSeconds,
    ...(options.now ? { now: options.now } : {}),
    live: whatsappLive,
  });

  const telegramAccounts = createLiveTelegramAccounts({
    ...options.telegramAccounts,
    db: db.kysely,
    secretBox,
    logger,
    clientFactory: options.telegramClientFactory ?? createGramjsClientFactory({ dc: config.telegramDcAddress }),
    proxies: platformConnectionProxies('telegram', config, proxyDeps),
    holderId: whatsappLive.holderId,
    ...(config.telegramApiId !== undefined && config.telegramApiHash !== undefined ? { apiId: config.telegramApiId, apiHash: config.telegramApiHash } : {}),
    ...(options.now ? { now: options.now } : {}),
  });
  telegramAccounts.onAccountUpdate(createAccountReceipts(db.kysely, logger));
  // What people write back to a linked account takes the one inbound road (replies, cancel_on_reply).
  telegramAccounts.onAccountUpdate(createAccountReplies(db.kysely, logger, onPushed));
  const telegramSessions = createTelegramSessions({
    db: db.kysely,
    secretBox,
    autoScanSeconds: config.sandboxAutoScanSeconds,
    live: telegramAccounts,
    ...(options.now ? { now: options.now } : {}),
  });

  const metrics = createMetrics({ db, logger });
  let metricsListener: MetricsListener | undefined;
  if (config.metricsPort !== undefined) {
    metricsListener = await startMetricsListener({ metrics, host: config.host, port: config.metricsPort, token: config.metricsToken }).catch(
      async (error: unknown) => {
        redis?.disconnect();
        await db.close();
        throw new Error(`METRICS_PORT: cannot listen on ${config.host}:${config.metricsPort}: ${error instanceof Error ? error.message : String(error)}`);
      },
    );
    logger.info({ address: metricsListener.address }, 'metrics listening');
  }

  let worker: DeliveryWorker | undefined;
  const services: Services = {
    config,
    db,
    secretBox,
    rateLimiter,
    redis,
    redisKeyPrefix: options.redisKeyPrefix,
    callers,
    platforms: createPlatformRegistry(options.testPlatforms),
    whatsappSessions,
    whatsappLive,
    telegramSessions,
    telegramAccounts,
    logger,
    metrics,
    onHeard,
    wakeWorker: () => worker?.wake(),
    ...(options.rhythmDefaults ? { rhythmDefaults: options.rhythmDefaults } : {}),
    ...(options.now ? { now: options.now } : {}),
  };
  const housekeeping = setInterval(() => {
    purgeExpiredIdempotency(db.kysely).catch((err: unknown) => logger.warn({ err }, 'idempotency purge failed'));
  }, HOUSEKEEPING_INTERVAL_MS);
  housekeeping.unref();
  // Every process sends the webhook outbox (leases keep them from sending one delivery twice).
  const webhookSender = new WebhookSender({
    accountSharePercent: config.workerAccountShare,
    ...options.webhooks,
    db,
    secretBox,
    logger,
    allowPrivateUrls: config.audioAllowPrivateUrls,
  });
  webhookSender.start();
  // Timed sandbox session moves happen even when nobody polls, so whatsapp_session.updated goes out on time.
  let sweeping: Promise<unknown> | undefined;
  const sessionSweep = setInterval(() => {
    sweeping ??= Promise.all([sweepDueSandboxSessions(db.kysely, whatsappSessions), sweepDueSandboxTelegramSessions(db.kysely, telegramSessions)])
      .catch((err: unknown) => logger.warn({ err }, 'sandbox session sweep failed'))
      .finally(() => (sweeping = undefined));
  }, SESSION_SWEEP_INTERVAL_MS);
  sessionSweep.unref();
  return {
    services,
    attachWorker: (w) => {
      worker = w;
    },
    async close() {
      clearInterval(housekeeping);
      clearInterval(sessionSweep);
      await sweeping;
      await webhookSender.stop();
      callers.close();
      await metricsListener?.close();
      await whatsappLive.stop();
      await telegramAccounts.stop();
      onPushed.stop();
      redis?.disconnect();
      await db.close();
    },
  };
}

/** A running delivery worker with its own audio pipeline. */
export interface RunningWorker {
  worker: DeliveryWorker;
  stop(): Promise<void>;
}

export function startWorker(services: Services, tuning: WorkerTuning = {}): RunningWorker {
  const { config, logger } = services;
  const audio: AudioPipeline = createAudioPipeline({
    dataDir: config.dataDir,
    ffmpegPath: resolveFfmpegPath(config.ffmpegPath),
    allowPrivateUrls: config.audioAllowPrivateUrls,
    maxConcurrentConversions: config.maxConcurrentConversions,
    logger,
    metrics: services.metrics,
  });
  // The sandbox's recipients that answer, answering notes this worker delivered.
  const replierRecords = recordEventually(services.onHeard, logger);
  const replier = new SandboxReplier(replierRecords, tuning.sandboxClock ? { now: tuning.sandboxClock } : {});
  // Telegram bots that asked to be listened to: one poller per bot across all processes (a lease).
  const telegramListener = startTelegramListening(services, (tuning.platformTuning?.telegram ?? {}) as { listenScanMs?: number; listenPollSeconds?: number });
  // LinkedIn senders that asked to be listened to: their conversations read at growing intervals.
  const linkedinListener = startLinkedinListening(services, listenTuningOf(tuning.platformTuning));
  const { sandboxClock: _sandboxClock, ...workerTuning } = tuning;
  const worker = createWorker(services, audio, { ...workerTuning, onDelivered: (message) => replier.delivered(message) });
  worker.start();
  // Housekeeping of the worker's process, beside the delivery loop rather than in it.
  const retention = startRetention(services.db.kysely, config.messageRetentionDays, logger);
  const senderEnds = startSenderEndWatch(services.db.kysely, logger);
  return {
    worker,
    async stop() {
      await retention.stop();
      await senderEnds.stop();
      await worker.stop(config.shutdownGraceMs);
      replier.stop();
      replierRecords.stop();
      await telegramListener.stop();
      await linkedinListener.stop();
      await audio.close();
    },
  };
}

/** The HTTP service, with the worker in the same process unless told otherwise. */
export async function createApp(config: Config, options: AppOptions): Promise<App> {
  const opened = await openServices(config, options);
  const { services } = opened;
  const running = options.worker
    ? startWorker(services, {
        ...(options.workerPollMs !== undefined ? { pollMs: options.workerPollMs } : {}),
        ...(options.workerLeaseMs !== undefined ? { leaseMs: options.workerLeaseMs } : {}),
        ...(options.workerClockOffsetMs !== undefined ? { clock: () => Date.now() + options.workerClockOffsetMs! } : {}),
        ...(options.linkedinPace !== undefined ? { linkedinPace: options.linkedinPace } : {}),
        ...(options.platformTuning !== undefined ? { platformTuning: options.platformTuning } : {}),
        ...(options.now ? { sandboxClock: options.now } : {}),
      })
    : undefined;
  if (running) opened.attachWorker(running.worker);
  // Loaded here, not at the top: a `voicenote worker` process never builds the HTTP server, and loading
  // Fastify, the routes and their schemas was most of its start-up.
  const { buildServer } = await import('./server.js');
  const server = await buildServer(services, {
    ...(options.pressureSampleMs !== undefined ? { pressureSampleMs: options.pressureSampleMs } : {}),
    ...(options.schemaCompilers ? { schemaCompilers: options.schemaCompilers } : {}),
  });

  let closing: Promise<void> | undefined;
  return {
    services,
    server,
    worker: running?.worker,
    close() {
      closing ??= (async () => {
        server.startDraining();
        // Side by side: the worker stops claiming and its grace starts now, not once the last HTTP request
        // has ended (a client that never finishes its request would otherwise keep deliveries in hand
        // from being aborted before the hard deadline).
        const stopped = await Promise.allSettled([server.app.close(), running?.stop()]);
        await opened.close();
        for (const result of stopped) if (result.status === 'rejected') throw result.reason;
      })();
      return closing;
    },
  };
}

/** A worker for `voicenote worker`: no HTTP, same storage and platforms. */
export function createWorker(services: Services, audio: AudioSource, tuning: WorkerTuning = {}): DeliveryWorker {
  const { linkedinPace, platformTuning, ...workerTuning } = tuning;
  const { config, db } = services;
  const context: PlatformContext = { services, tuning: { ...platformTuning, ...(linkedinPace ? { linkedin: linkedinPace } : {}) } };
  const platforms = services.platforms.all();
  const sandbox = createSandboxAdapter({
    latencyMs: config.sandboxLatencyMs,
    checkFor: (name) => {
      const check = services.platforms.get(name)?.sandboxCheck;
      return check ? (job) => check(job, context) : undefined;
    },
  });
  const live = new Map<string, PlatformAdapter>(platforms.map((p) => [p.name, p.createLiveAdapter(context)]));
  return new DeliveryWorker({
    db,
    secretBox: services.secretBox,
    audio,
    adapterFor: (env, platform) => (env === 'test' ? sandbox : (live.get(platform) ?? createUnavailableAdapter(platform))),
    audioTargetFor: (platform) => services.platforms.get(platform)?.audio,
    logger: services.logger,
    // This process holds its platform resources (live WhatsApp sessions' sockets) under this id: their messages come here.
    affinityHolder: services.whatsappLive.holderId,
    recorder: withAttemptMetrics(createAttemptRecorder(db, services.logger), services.metrics),
    concurrency: config.workerConcurrency,
    conversionSlots: conversionSlotsFor(workerTuning.concurrency ?? config.workerConcurrency, config.maxConcurrentConversions),
    accountSharePercent: config.workerAccountShare,
    senderKind: (platform, senderKey) => services.platforms.get(platform)?.senderKind?.(senderKey) ?? platform,
    ...(services.config.outboundProxy !== undefined ? { outboundProxy: services.config.outboundProxy } : {}),
    allowPrivateProxies: services.config.audioAllowPrivateUrls,
    gate: createRhythmGate({ db: db.kysely, platforms: services.platforms, logger: services.logger, ...(services.rhythmDefaults ? { defaults: services.rhythmDefaults } : {}) }),
    ...(services.now ? { windowClock: services.now } : {}),
    ...workerTuning,
  });
}
