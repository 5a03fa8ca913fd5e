/**
 * LinkedIn accounts at rest: after LinkedIn refused an `li_at`'s request as automated (status 999),
 * none of that account's voice notes is tried for a while, in any process. With Redis the rest is one
 * key per account (its TTL on Redis' own clock, so processes whose clocks disagree agree on it);
 * without Redis, or while Redis does not answer, each process remembers its own.
 */

/** How long an `li_at` rests after a 999. */
export const REST_AFTER_999_MS = 15 * 60_000;

export interface AccountRest {
  /** Milliseconds of rest left for the account (0: not resting). */
  remainingMs(account: string): Promise<number>;
  /** The account rests for `ms` from now (a later 999 starts the rest again). */
  begin(account: string, ms: number): Promise<void>;
}

export function createMemoryRest(now: () => number = Date.now): AccountRest {
  const until = new Map<string, number>();
  return {
    async remainingMs(account) {
      const end = until.get(account);
      if (end === undefined) return 0;
      const left = end - now();
      if (left > 0) return left;
      until.delete(account);
      return 0;
    },
    async begin(account, ms) {
      until.set(account, now() + ms);
      // Forget rests long over, so the map does not grow with every account that ever rested.
      if (until.size > 10_000) for (const [key, end] of until) if (end <= now()) until.delete(key);
    },
  };
}

interface RedisLike {
  set(key: string, value: string, px: 'PX', ms: number): Promise<unknown>;
  pttl(key: string): Promise<number>;
}

/** Rests shared through Redis; this process's memory also keeps them, and answers alone while Redis is away. */
export function createRedisRest(options: { redis: RedisLike; keyPrefix: string; onFallback?(error: unknown): void }): AccountRest {
  const memory = createMemoryRest();
  let away = false;
  const keyOf = (account: string): string => `${options.keyPrefix}:linkedin:rest:${account}`;
  const fellBack = (error: unknown): void => {
    if (!away) options.onFallback?.(error);
    away = true;
  };
  return {
    async remainingMs(account) {
      const local = await memory.remainingMs(account);
      try {
        const ttl = await options.redis.pttl(keyOf(account));
        away = false;
        return Math.max(local, ttl > 0 ? ttl : 0);
      } catch (error) {
        fellBack(error);
        return local;
      }
    },
    async begin(account, ms) {
      await memory.begin(account, ms);
      try {
        await options.redis.set(keyOf(account), '999', 'PX', Math.max(1, Math.round(ms)));
        away = false;
      } catch (error) {
        fellBack(error);
      }
    },
  };
}
