import type { Redis } from 'ioredis';
import type { Rhythm } from './core/rhythm.js';
import type { Logger } from 'pino';
import type { CallerDirectory } from './api/caller.js';
import type { RateLimiter } from './api/rate-limiter.js';
import type { Config } from './config.js';
import type { SecretBox } from './core/secret-box.js';
import type { PlatformRegistry } from './platforms/registry.js';
import type { Db } from './store/db.js';
import type { Metrics } from './metrics/metrics.js';
import type { WhatsappSessions } from './platforms/whatsapp/sessions.js';
import type { LiveWhatsapp } from './platforms/whatsapp/live.js';
import type { OnHeard } from './inbound/recorder.js';
import type { TelegramSessions } from './platforms/telegram/account/sessions.js';
import type { LiveTelegramAccounts } from './platforms/telegram/account/live.js';

/** What routes and the worker share: built once by `createApp`, passed down explicitly. */
export interface Services {
  config: Config;
  db: Db;
  secretBox: SecretBox;
  rateLimiter: RateLimiter;
  /** The shared Redis, when REDIS_URL is set (limits that span processes). */
  redis: Redis | undefined;
  /** The key prefix every Redis counter of this app carries. */
  redisKeyPrefix: string | undefined;
  /** Callers by API key and usage counts, cached briefly (src/api/caller.ts). */
  callers: CallerDirectory;
  /** The platforms of this app (src/platforms/registry.ts). */
  platforms: PlatformRegistry;
  whatsappSessions: WhatsappSessions;
  /** Live WhatsApp sockets held by this process (pairing here; delivery in worker processes). */
  whatsappLive: LiveWhatsapp;
  /** Telegram accounts linked by QR code (`ts_…`), and their live connections held by this process. */
  telegramSessions: TelegramSessions;
  telegramAccounts: LiveTelegramAccounts;
  logger: Logger;
  /** Prometheus metrics of this process. */
  metrics: Metrics;
  /** The recorder of what listeners hear (replies): it finds the note, writes the reply and its effects. */
  onHeard: OnHeard;
  /** Tells a worker in this process that a message is waiting (others find it by polling). */
  wakeWorker(): void;
  /** Tests only: the platforms' default daily rhythms instead of the built-in ones (src/core/rhythm.ts). */
  rhythmDefaults?: Readonly<Record<string, Rhythm>>;
  /** Tests only: the clock send windows are weighed on, at acceptance and delivery (default Date.now). */
  now?: () => number;
}
