import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type * as RateLimiterFlexible from 'rate-limiter-flexible';
import { RATE_WINDOW_SECONDS } from '../core/plans.js';

// The shared counters' library, loaded only when Redis is configured: without REDIS_URL the counts are
// in memory, and a worker or a CLI command never loads it (`serve` still does, for the dashboard's
// sign-in limiter).
let rateLimiterFlexible: typeof RateLimiterFlexible | undefined;
const loadRateLimiterFlexible = (): typeof RateLimiterFlexible =>
  (rateLimiterFlexible ??= createRequire(import.meta.url)('rate-limiter-flexible') as typeof RateLimiterFlexible);

/** Longest a rate-limit command may wait on Redis before the in-memory count stands in. */
const REDIS_COMMAND_TIMEOUT_MS = 500;
/** How long the first connection may take to be ready before a failure on the way is worth a warning. */
export const REDIS_START_GRACE_MS = 5_000;
const CONNECTION_LOST = 'connection lost';

/**
 * The shared counters' connection. No request ever waits on Redis: with the offline queue off, a
 * command while Redis is away fails at once (and one that hangs fails after 500 ms), and the
 * per-process counter stands in; once Redis answers again its counts are used again. One warning
 * when Redis goes away, one line when it is back: reconnect attempts are not logged one by one.
 * The client library is loaded here, not at start-up: a process without REDIS_URL never needs it.
 */
export async function connectRedis(url: string, logger: Logger): Promise<Redis> {
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: 2_000,
    lazyConnect: false,
  });
  let state: 'starting' | 'up' | 'down' = 'starting';
  // While the first connection is being opened (a busy start can make its ready check outlast the
  // 500 ms command timeout, and ioredis then reconnects at once), a failure is no alarm yet: only a
  // Redis still not ready after the grace is reported, with the last reason seen.
  let startProblem: string | undefined;
  const startGrace = setTimeout(() => {
    if (state === 'starting') wentAway(startProblem ?? 'no answer yet', true);
  }, REDIS_START_GRACE_MS);
  startGrace.unref();
  redis.on('ready', () => {
    clearTimeout(startGrace);
    if (state === 'down') logger.info('Redis answers again; rate limits are shared across processes again');
    state = 'up';
  });
  const wentAway = (why: string, graceOver = false): void => {
    if (state === 'starting' && !graceOver) {
      // A socket's own error says more than the reconnect that follows it.
      if (why !== CONNECTION_LOST || startProblem === undefined) startProblem = why;
      return;
    }
    if (state === 'down') return;
    state = 'down';
    // The reason only: a stack trace per reconnect attempt says nothing new.
    logger.warn({ error: why }, 'Redis is not reachable; rate limits are counted per process until it returns');
  };
  redis.on('error', (err: Error) => wentAway(err.message));
  // Emitted only when the connection dropped by itself (not at our own disconnect).
  redis.on('reconnecting', () => wentAway(CONNECTION_LOST));
  redis.on('end', () => clearTimeout(startGrace));
  return redis;
}

/** Which counter a request draws from (docs/api.md, "Limits"). */
export type Bucket = 'send' | 'read' | 'ip';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix seconds at which the window resets. */
  resetAt: number;
  /** Whole seconds until then, at least 1. */
  retryAfter: number;
}

// Counters never refuse by themselves: the limit is compared here, so one counter per key serves any
// plan, and a plan change takes effect in the current window without resetting it.
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

const WINDOW_MS = RATE_WINDOW_SECONDS * 1000;

/**
 * One process's fixed windows, counted synchronously: a window starts at a key's first request and
 * lasts RATE_WINDOW_SECONDS. (What RateLimiterMemory counts, without a promise per request and a timer
 * per key: every API request draws from a bucket.) Ended windows are dropped once a window's length.
 */
class MemoryWindows {
  readonly #windows = new Map<string, { count: number; endsAt: number }>();
  #sweepAt = 0;

  consume(key: string, now: number): { consumed: number; msLeft: number } {
    let window = this.#windows.get(key);
    if (!window || window.endsAt <= now) {
      if (now >= this.#sweepAt) this.#sweep(now);
      window = { count: 0, endsAt: now + WINDOW_MS };
      this.#windows.set(key, window);
    }
    window.count++;
    return { consumed: window.count, msLeft: window.endsAt - now };
  }

  #sweep(now: number): void {
    for (const [key, window] of this.#windows) if (window.endsAt <= now) this.#windows.delete(key);
    this.#sweepAt = now + WINDOW_MS;
  }
}

function decide(consumed: number, msBeforeNext: number, limit: number, now: number): RateDecision {
  const msLeft = Math.max(0, msBeforeNext);
  return {
    allowed: consumed <= limit,
    limit,
    remaining: Math.max(0, limit - consumed),
    resetAt: Math.ceil((now + msLeft) / 1000),
    retryAfter: Math.max(1, Math.ceil(msLeft / 1000)),
  };
}

/**
 * Fixed one-minute windows per (bucket, key). In memory for one process, in Redis when several share
 * the limits; if Redis stops answering, an in-memory counter stands in rather than failing requests.
 */
export class RateLimiter {
  /** This process's own counts (no Redis configured), or the ones shared through Redis. */
  readonly #local: Record<Bucket, MemoryWindows> | undefined;
  readonly #shared: Record<Bucket, RateLimiterFlexible.RateLimiterAbstract> | undefined;
  readonly #redis: Redis | undefined;

  constructor(options: { redis?: Redis; keyPrefix?: string } = {}) {
    const { redis } = options;
    this.#redis = redis;
    if (!redis) {
      this.#local = { send: new MemoryWindows(), read: new MemoryWindows(), ip: new MemoryWindows() };
      return;
    }
    const prefix = options.keyPrefix ?? 'voicenote:rl';
    const { RateLimiterRedis, RateLimiterMemory } = loadRateLimiterFlexible();
    const make = (bucket: Bucket): RateLimiterFlexible.RateLimiterAbstract =>
      new RateLimiterRedis({
        storeClient: redis,
        points: UNBOUNDED,
        duration: RATE_WINDOW_SECONDS,
        keyPrefix: `${prefix}:${bucket}`,
        insuranceLimiter: new RateLimiterMemory({ points: UNBOUNDED, duration: RATE_WINDOW_SECONDS, keyPrefix: `${prefix}:${bucket}` }),
      });
    this.#shared = { send: make('send'), read: make('read'), ip: make('ip') };
  }

  /** Counts are shared through Redis right now (false: per process, or no Redis configured). */
  get shared(): boolean {
    return this.#redis?.status === 'ready';
  }

  /** Counts one request; the decision comes at once when this process counts alone, else from Redis. */
  consume(bucket: Bucket, key: string, limit: number, now = Date.now()): RateDecision | Promise<RateDecision> {
    if (this.#local) {
      const { consumed, msLeft } = this.#local[bucket].consume(key, now);
      return decide(consumed, msLeft, limit, now);
    }
    return this.#shared![bucket].consume(key, 1).then((result) => decide(result.consumedPoints, result.msBeforeNext, limit, now));
  }
}
