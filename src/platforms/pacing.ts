/** Pacing shared by the platforms: how sends of one account, bot or session are spread out in time. */

import { setTimeout as sleep } from 'node:timers/promises';

/** Sleeps `ms` (the wait for a booked slot); false, at once, when `signal` aborts first. */
export async function waitForSlot(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return false;
  if (ms <= 0) return true;
  try {
    await sleep(ms, undefined, signal ? { signal } : {});
    return true;
  } catch (error) {
    if (signal?.aborted) return false;
    throw error;
  }
}

/** The key is sending or in its gap: come back in `retryAfterMs` (this send's place in the key's line). */
export class PacingBusy extends Error {
  constructor(readonly retryAfterMs: number) {
    super(`this key's turn is ${retryAfterMs} ms away`);
    this.name = 'PacingBusy';
  }
}

/**
 * One piece of work at a time per key (an account, a session), each followed by a gap, so one key never
 * sends in bursts; other keys are not held up. In-process only.
 *
 * Nothing waits here: work that finds its key busy (running, or within its gap) is refused with
 * PacingBusy, which says when to come back, so the caller gives its worker slot back (the message returns
 * to the queue with that due time) instead of sleeping in it while other keys' notes wait. Refused work
 * is told to come back one gap apart, in the order it was refused: told only "when the key is next free",
 * all of a key's notes would come back together, one would run and the rest be refused again.
 */
export class KeyedPacer {
  readonly #keys = new Map<string, { running: boolean; freeAt: number; comeBack: number }>();
  /**
   * @param gapMs the gap after each piece of work of a key, drawn anew each time
   * @param lineGapMs how far apart refused work is told to come back (the longest gap: never too early)
   */
  constructor(
    private readonly gapMs: (key: string) => number,
    private readonly lineGapMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  async run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const at = this.now();
    let state = this.#keys.get(key);
    if (state && (state.running || state.freeAt > at)) {
      // While the work runs its end is unknown: about one gap after now is the first moment worth asking.
      const free = state.running ? at + this.lineGapMs : state.freeAt;
      const back = Math.max(free, state.comeBack);
      state.comeBack = back + this.lineGapMs;
      if (!state.running) this.#forgetLater(key, state);
      throw new PacingBusy(Math.max(1, Math.ceil(back - at)));
    }
    if (!state) this.#keys.set(key, (state = { running: true, freeAt: at, comeBack: 0 }));
    state.running = true;
    try {
      return await work();
    } finally {
      state.running = false;
      state.freeAt = this.now() + this.gapMs(key);
      this.#forgetLater(key, state);
    }
  }

  /** Forgets the key once its gap and its line are over, so the map does not grow with every key ever paced. */
  #forgetLater(key: string, state: { running: boolean; freeAt: number; comeBack: number }): void {
    const timer = setTimeout(() => {
      const now = this.now();
      if (this.#keys.get(key) === state && !state.running && state.freeAt <= now && state.comeBack <= now) this.#keys.delete(key);
    }, Math.max(state.freeAt, state.comeBack) - this.now() + 1);
    timer.unref();
  }
}


/** One rate a send must respect: at most one send per `intervalMs` under `key`. */
export interface PaceRule {
  key: string;
  intervalMs: number;
}

/**
 * Send slots shared by every process that asks: `reserve` books the earliest moment all the rules allow
 * and answers how long to wait for it; when that is more than `maxWaitMs` away it books nothing and
 * answers, as a negative number, how long the caller should wait before asking again, so it can give the
 * work back instead of holding a worker.
 *
 * A key's booked moments are kept, not just its next free one, so a send may take a free moment before
 * one booked later: a note booked a second ahead because its chat was busy leaves its bot free for its
 * other chats meanwhile.
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

/** How much later than its slot a wait may end before the slot is booked again (see takeSlot). */
export const LATE_WAKE_MS = 25;
/** How many times one send books again after waking late, at most: a process that keeps stalling still sends. */
const MAX_REBOOKINGS = 2;

export type SlotTaken = { kind: 'go' } | { kind: 'later'; retryAfterMs: number } | { kind: 'stopped' };

/**
 * Books the earliest slot `rules` allow within `maxWaitMs` and waits for it: `go` when it has come,
 * `later` (come back in `retryAfterMs`) when it is further off, `stopped` when `signal` aborted the wait.
 *
 * A process that stalls (a long garbage collection, a busy machine) wakes every send whose slot fell in
 * the stall at the same moment, and they would leave together: a burst the platform counts against its
 * flood limit, however well the slots were spread. A wait that ends more than LATE_WAKE_MS after its
 * slot books a new one from now (each send in turn gets its own, one interval apart), at most twice.
 */
export async function takeSlot(pacer: SlotPacer, rules: PaceRule[], maxWaitMs: number, signal?: AbortSignal): Promise<SlotTaken> {
  for (let booking = 0; ; booking++) {
    const wait = await pacer.reserve(rules, maxWaitMs);
    if (wait < 0) return { kind: 'later', retryAfterMs: -wait };
    const due = performance.now() + wait;
    if (!(await waitForSlot(wait, signal))) return { kind: 'stopped' };
    if (performance.now() - due <= LATE_WAKE_MS || booking >= MAX_REBOOKINGS) return { kind: 'go' };
  }
}

/** The earliest moment from `from` at least one interval away from every moment booked under each rule (`lines`, each in order). */
function earliestFree(from: number, rules: PaceRule[], lines: number[][]): number {
  let at = from;
  for (let moved = true; moved; ) {
    moved = false;
    rules.forEach((rule, i) => {
      for (const booked of lines[i]!) {
        if (at > booked - rule.intervalMs && at < booked + rule.intervalMs) {
          at = booked + rule.intervalMs;
          moved = true;
        }
      }
    });
  }
  return at;
}

/** Slots in this process's memory: right for one process, and the fallback when Redis is away. */
export function createMemorySlotPacer(now: () => number = Date.now): SlotPacer {
  /** Per key, its moments booked less than one interval ago or later, in order. */
  const booked = new Map<string, { intervalMs: number; times: number[] }>();
  /** Per key, when the next send refused under it is told to come back. */
  const comeBack = new Map<string, number>();
  return {
    async reserve(rules, maxWaitMs) {
      const at0 = now();
      const lines = rules.map((rule) => (booked.get(rule.key)?.times ?? []).filter((t) => t > at0 - rule.intervalMs));
      const at = earliestFree(at0, rules, lines);
      if (at - at0 > maxWaitMs) {
        let back = at;
        for (const rule of rules) back = Math.max(back, comeBack.get(rule.key) ?? 0);
        // Only the key whose line is the longest moves its line on: a busy chat must not push back its bot's other chats.
        const alone = rules.map((rule, i) => earliestFree(at0, [rule], [lines[i]!]));
        const longest = Math.max(...alone);
        rules.forEach((rule, i) => {
          if (alone[i] === longest) comeBack.set(rule.key, back + rule.intervalMs);
        });
        if (comeBack.size > 10_000) for (const [key, time] of comeBack) if (time < at0) comeBack.delete(key);
        return -(back - at0);
      }
      rules.forEach((rule, i) => {
        const times = lines[i]!;
        times.push(at);
        times.sort((a, b) => a - b);
        booked.set(rule.key, { intervalMs: rule.intervalMs, times });
      });
      // Forget keys whose moments are long past, so the map does not grow with every chat ever paced.
      if (booked.size > 10_000) {
        for (const [key, { intervalMs, times }] of booked) if (times[times.length - 1]! <= at0 - intervalMs) booked.delete(key);
      }
      return at - at0;
    },
  };
}

// One round trip, atomic, on Redis' own clock (the processes' clocks may disagree): what the memory
// pacer does. KEYS: the n keys' booked moments (sorted sets), then their n "come back" moments; ARGV: the
// longest wait, then the n intervals.
const RESERVE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS / 2
local maxWait = tonumber(ARGV[1])
local lines = {}
for i = 1, n do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - tonumber(ARGV[i + 1]))
  lines[i] = {}
  for _, m in ipairs(redis.call('ZRANGE', KEYS[i], 0, -1)) do lines[i][#lines[i] + 1] = tonumber(m) end
end
local function earliest(first, last)
  local at = now
  local moved = true
  while moved do
    moved = false
    for i = first, last do
      local interval = tonumber(ARGV[i + 1])
      for _, b in ipairs(lines[i]) do
        if at > b - interval and at < b + interval then
          at = b + interval
          moved = true
        end
      end
    end
  end
  return at
end
local at = earliest(1, n)
if at - now > maxWait then
  local back = at
  for i = 1, n do
    local later = tonumber(redis.call('GET', KEYS[n + i]) or '0')
    if later > back then back = later end
  end
  local alone = {}
  local longest = now
  for i = 1, n do
    alone[i] = earliest(i, i)
    if alone[i] > longest then longest = alone[i] end
  end
  for i = 1, n do
    if alone[i] == longest then
      local interval = tonumber(ARGV[i + 1])
      redis.call('SET', KEYS[n + i], back + interval, 'PX', back - now + interval + 1000)
    end
  end
  return -(back - now)
end
for i = 1, n do
  local interval = tonumber(ARGV[i + 1])
  redis.call('ZADD', KEYS[i], at, tostring(at))
  if redis.call('PTTL', KEYS[i]) < at - now + interval + 1000 then redis.call('PEXPIRE', KEYS[i], at - now + interval + 1000) end
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
        // `slots`, not the `pace` keys of earlier versions, which held one moment as a string.
        const keys = rules.map((r) => `${options.keyPrefix}:slots:${r.key}`);
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
