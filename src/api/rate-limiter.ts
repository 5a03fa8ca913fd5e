import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { RATE_WINDOW_SECONDS } from '../core/plans.js';

/** Which counter a request draws from (PRODUCT.md, "Plans and limits"). */
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

  constructor(options: { redis?: Redis; keyPrefix?: string } = {}) {
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
