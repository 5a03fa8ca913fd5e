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
 * and answers how long to wait for it. It books nothing, and answers as a negative number how long the
 * caller should wait before asking again (so it can give the work back instead of holding a worker),
 * when that moment is more than `maxWaitMs` away, or when booking it would leave one of the keys idle
 * for more than one of its intervals before it: each key keeps only its next free moment, so a send
 * booked a second ahead for its chat would also book its bot a second ahead, and the bot's other chats
 * would wait that second for nothing.
 *
 * Sends refused under one key are told to come back one interval apart, in the order they were refused.
 * Told only "when the key is next free", twenty notes for one chat would all come back together, one
 * would take the slot and nineteen would be refused again, every second: a claim and a write each time.
 * The "come back" times are not bookings (nothing is held for a send that may never return): a send
 * asks again when it returns, and whoever asks first gets the slot.
 */
export interface SlotPacer {
  reserve(rules: PaceRule[], maxWaitMs: number): Promise<number>;
}

/** Slots in this process's memory: right for one process, and the fallback when Redis is away. */
export function createMemorySlotPacer(now: () => number = Date.now): SlotPacer {
  const nextFree = new Map<string, number>();
  /** Per key, when the next send refused under it is told to come back. */
  const comeBack = new Map<string, number>();
  return {
    async reserve(rules, maxWaitMs) {
      const at0 = now();
      // Each key's own earliest moment; the send goes at the latest of them.
      const own = rules.map((rule) => Math.max(at0, nextFree.get(rule.key) ?? 0));
      const at = Math.max(at0, ...own);
      const wait = at - at0;
      if (wait > maxWaitMs || rules.some((rule, i) => at - own[i]! > rule.intervalMs)) {
        let back = at;
        for (const rule of rules) back = Math.max(back, comeBack.get(rule.key) ?? 0);
        // Only the keys that set the moment move their line on: a busy chat must not push back its bot's other chats.
        rules.forEach((rule, i) => {
          if (own[i] === at) comeBack.set(rule.key, back + rule.intervalMs);
        });
        if (comeBack.size > 10_000) for (const [key, time] of comeBack) if (time < at0) comeBack.delete(key);
        return -(back - at0);
      }
      for (const rule of rules) nextFree.set(rule.key, at + rule.intervalMs);
      // Forget keys whose slot is long past, so the map does not grow with every chat ever paced.
      if (nextFree.size > 10_000) for (const [key, free] of nextFree) if (free < at0) nextFree.delete(key);
      return wait;
    },
  };
}

// One round trip, atomic, on Redis' own clock (the processes' clocks may disagree): what the memory
// pacer does. KEYS: the n slot keys, then their n "come back" keys; ARGV: the longest wait, then the n
// intervals.
const RESERVE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS / 2
local at = now
local own = {}
for i = 1, n do
  own[i] = math.max(now, tonumber(redis.call('GET', KEYS[i]) or '0'))
  if own[i] > at then at = own[i] end
end
local refused = at - now > tonumber(ARGV[1])
for i = 1, n do
  if at - own[i] > tonumber(ARGV[i + 1]) then refused = true end
end
if refused then
  local back = at
  for i = 1, n do
    local later = tonumber(redis.call('GET', KEYS[n + i]) or '0')
    if later > back then back = later end
  end
  for i = 1, n do
    if own[i] == at then
      local interval = tonumber(ARGV[i + 1])
      redis.call('SET', KEYS[n + i], back + interval, 'PX', back - now + interval + 1000)
    end
  end
  return -(back - now)
end
for i = 1, n do
  local interval = tonumber(ARGV[i + 1])
  redis.call('SET', KEYS[i], at + interval, 'PX', at - now + interval + 1000)
end
return at - now
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
        const answer = await options.redis.eval(
          RESERVE_SCRIPT,
          keys.length * 2,
          ...keys,
          ...keys.map((k) => `${k}:back`),
          Math.round(maxWaitMs),
          ...rules.map((r) => Math.ceil(r.intervalMs)),
        );
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
