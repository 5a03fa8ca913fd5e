/** Pacing shared by the platforms: how sends of one account, bot or session are spread out in time. */

/** More sends of one key are lined up in this process than may wait here. */
export class PacingBacklog extends Error {
  constructor(readonly ahead: number) {
    super(`${ahead} sends of this key are already in line`);
    this.name = 'PacingBacklog';
  }
}

/**
 * One piece of work at a time per key (an account, a session), each followed by a gap, so one key never
 * sends in bursts; other keys are not held up. In-process only. At most `maxWaiting` pieces wait for
 * their turn; more are refused with PacingBacklog, so one busy key cannot fill every worker slot.
 */
export class KeyedPacer {
  readonly #tails = new Map<string, Promise<void>>();
  /** Pieces of work per key that hold the turn (running or in their gap) or wait for it. */
  readonly #lined = new Map<string, number>();
  constructor(
    private readonly gapMs: () => number,
    private readonly maxWaiting = Number.POSITIVE_INFINITY,
  ) {}

  async run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const ahead = this.#lined.get(key) ?? 0;
    if (ahead > this.maxWaiting) throw new PacingBacklog(ahead);
    this.#lined.set(key, ahead + 1);
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release = (): void => undefined;
    const done = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => done);
    this.#tails.set(key, tail);
    await previous;
    try {
      return await work();
    } finally {
      setTimeout(() => {
        if (this.#tails.get(key) === tail) this.#tails.delete(key);
        const left = (this.#lined.get(key) ?? 1) - 1;
        if (left > 0) this.#lined.set(key, left);
        else this.#lined.delete(key);
        release();
      }, this.gapMs());
    }
  }
}


/** One rate a send must respect: at most one send per `intervalMs` under `key`. */
export interface PaceRule {
  key: string;
  intervalMs: number;
}

/**
 * Send slots shared by every process that asks: `reserve` books the earliest moment all the rules allow
 * and answers how long to wait for it; when that is more than `maxWaitMs` it books nothing and answers
 * the wait as a negative number, so the caller can give the work back instead of holding a worker.
 */
export interface SlotPacer {
  reserve(rules: PaceRule[], maxWaitMs: number): Promise<number>;
}

/** Slots in this process's memory: right for one process, and the fallback when Redis is away. */
export function createMemorySlotPacer(now: () => number = Date.now): SlotPacer {
  const nextFree = new Map<string, number>();
  return {
    async reserve(rules, maxWaitMs) {
      const at0 = now();
      let at = at0;
      for (const rule of rules) at = Math.max(at, nextFree.get(rule.key) ?? 0);
      const wait = at - at0;
      if (wait > maxWaitMs) return -wait;
      for (const rule of rules) nextFree.set(rule.key, at + rule.intervalMs);
      // Forget keys whose slot is long past, so the map does not grow with every chat ever paced.
      if (nextFree.size > 10_000) for (const [key, free] of nextFree) if (free < at0) nextFree.delete(key);
      return wait;
    },
  };
}

// One round trip, atomic, on Redis' own clock (the processes' clocks may disagree): the earliest moment
// every key allows, booked for all of them, unless it is further away than ARGV[1].
const RESERVE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = now
for i, key in ipairs(KEYS) do
  local free = tonumber(redis.call('GET', key) or '0')
  if free > at then at = free end
end
local wait = at - now
if wait > tonumber(ARGV[1]) then return -wait end
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[i + 1])
  redis.call('SET', key, at + interval, 'PX', wait + interval + 1000)
end
return wait
`;

interface RedisLike {
  eval(script: string, numKeys: number, ...args: Array<string | number>): Promise<unknown>;
}

/**
 * Slots in Redis, shared by every process of the deployment. When Redis does not answer, pacing goes on
 * in memory (per process) rather than stopping deliveries; `onFallback` hears of it once per outage.
 */
export function createRedisSlotPacer(options: { redis: RedisLike; keyPrefix: string; onFallback?(error: unknown): void }): SlotPacer {
  const memory = createMemorySlotPacer();
  let away = false;
  return {
    async reserve(rules, maxWaitMs) {
      try {
        const keys = rules.map((r) => `${options.keyPrefix}:pace:${r.key}`);
        const answer = await options.redis.eval(RESERVE_SCRIPT, keys.length, ...keys, Math.round(maxWaitMs), ...rules.map((r) => Math.ceil(r.intervalMs)));
        away = false;
        return Number(answer);
      } catch (error) {
        if (!away) options.onFallback?.(error);
        away = true;
        return memory.reserve(rules, maxWaitMs);
      }
    },
  };
}
