import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { RATE_WINDOW_SECONDS } from '../core/plans.js';

/** Longest a rate-limit command may wait on Redis before the in-memory count stands in. */
const REDIS_COMMAND_TIMEOUT_MS = 500;

/**
 * The shared counters' connection. No request ever waits on Redis: with the offline queue off, a
 * command while Redis is away fails at once (and one that hangs fails after 500 ms), and the
 * per-process counter stands in; once Redis answers again its counts are used again. One warning
 * when Redis goes away, one line when it is back: reconnect attempts are not logged one by one.
 */
export function connectRedis(url: string, logger: Logger): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: 2_000,
    lazyConnect: false,
  });
  let state: 'starting' | 'up' | 'down' = 'starting';
  redis.on('ready', () => {
    if (state === 'down') logger.info('Redis answers again; rate limits are shared across processes again');
    state = 'up';
  });
  const wentAway = (why: string): void => {
    if (state === 'down') return;
    state = 'down';
    // The reason only: a stack trace per reconnect attempt says nothing new.
    logger.warn({ error: why }, 'Redis is not reachable; rate limits are counted per process until it returns');
  };
  redis.on('error', (err: Error) => wentAway(err.message));
  // Emitted only when the connection dropped by itself (not at our own disconnect).
  redis.on('reconnecting', () => wentAway('connection lost'));
  return redis;
}

/** Which counter a request draws from (README, "Limits"). */
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

/**
 * Fixed one-minute windows per (bucket, key). In memory for one process, in Redis when several share
 * the limits; if Redis stops answering, an in-memory counter stands in rather than failing requests.
 */
export class RateLimiter {
  readonly #counters: Record<Bucket, RateLimiterAbstract>;
  readonly #redis: Redis | undefined;

  constructor(options: { redis?: Redis; keyPrefix?: string } = {}) {
    this.#redis = options.redis;
    const prefix = options.keyPrefix ?? 'voicenote:rl';
    const make = (bucket: Bucket): RateLimiterAbstract => {
      const memory = new RateLimiterMemory({ points: UNBOUNDED, duration: RATE_WINDOW_SECONDS, keyPrefix: `${prefix}:${bucket}` });
      if (!options.redis) return memory;
      return new RateLimiterRedis({
        storeClient: options.redis,
        points: UNBOUNDED,
        duration: RATE_WINDOW_SECONDS,
        keyPrefix: `${prefix}:${bucket}`,
        insuranceLimiter: memory,
      });
    };
    this.#counters = { send: make('send'), read: make('read'), ip: make('ip') };
  }

  /** Counts are shared through Redis right now (false: per process, or no Redis configured). */
  get shared(): boolean {
    return this.#redis?.status === 'ready';
  }

  async consume(bucket: Bucket, key: string, limit: number, now = Date.now()): Promise<RateDecision> {
    const result = await this.#counters[bucket].consume(key, 1);
    const msLeft = Math.max(0, result.msBeforeNext);
    return {
      allowed: result.consumedPoints <= limit,
      limit,
      remaining: Math.max(0, limit - result.consumedPoints),
      resetAt: Math.ceil((now + msLeft) / 1000),
      retryAfter: Math.max(1, Math.ceil(msLeft / 1000)),
    };
  }
}
