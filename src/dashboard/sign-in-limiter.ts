import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

/** Sign-in attempts allowed per window: per client address, and per client address and email. */
export const SIGN_IN_WINDOW_SECONDS = 15 * 60;
export const SIGN_IN_ATTEMPTS_PER_IP = 30;
export const SIGN_IN_ATTEMPTS_PER_IP_AND_EMAIL = 10;
/** Failures of one address for one email before each further attempt must wait (1 s, then doubling). */
export const SIGN_IN_FREE_FAILURES = 3;
/**
 * How long one address's check for one email holds its turn at most (released when it ends): longer
 * than a check can take, queued behind others; a process that dies mid-check frees it after this.
 */
const CHECK_TURN_SECONDS = 60;

export interface SignInDecision {
  allowed: boolean;
  /** Whole seconds until another attempt is allowed (when refused). */
  retryAfter: number;
}

export interface SignInLimiterOptions {
  redis?: Redis | undefined;
  keyPrefix?: string | undefined;
  /** Tests: the first wait after the free failures, in seconds (1 s by default; it doubles each failure). */
  backoffBaseSeconds?: number;
}

/**
 * Guards the password form against guessing (OWASP's authentication guidance: throttle per client
 * and account with growing delays, rather than lock the account itself):
 * - per client address, 30 attempts in 15 minutes, whatever the emails tried;
 * - per client address and email, 10 attempts in 15 minutes, and after 3 failures each further
 *   attempt waits 1 s, 2 s, 4 s … (up to the window).
 * One address checks one email's password one attempt at a time: attempts sent in parallel wait
 * their turn (refused meanwhile), so they meet the same growing waits as attempts one after another.
 * Nothing counts per email alone: wrong passwords typed elsewhere never lock an account's owner out
 * of their own address. A successful sign-in clears its address-and-email count. Shared through Redis
 * when the service has it.
 */
export class SignInLimiter {
  readonly #byIp: RateLimiterAbstract;
  readonly #byPair: RateLimiterAbstract;
  readonly #backoff: RateLimiterAbstract;
  /** One point per address and email: a password check in progress (one at a time). */
  readonly #checking: RateLimiterAbstract;
  readonly #backoffBaseSeconds: number;
  // Redis keeps expiries in whole seconds (a shorter block would never expire).
  readonly #shortestBlockSeconds: number;

  constructor(options: SignInLimiterOptions = {}) {
    const prefix = `${options.keyPrefix ?? 'voicenote:rl'}:signin`;
    const make = (name: string, points: number, duration = SIGN_IN_WINDOW_SECONDS): RateLimiterAbstract => {
      const memory = new RateLimiterMemory({ points, duration, keyPrefix: `${prefix}:${name}` });
      if (!options.redis) return memory;
      return new RateLimiterRedis({ storeClient: options.redis, points, duration, keyPrefix: `${prefix}:${name}`, insuranceLimiter: memory });
    };
    this.#byIp = make('ip', SIGN_IN_ATTEMPTS_PER_IP);
    this.#byPair = make('ip-email', SIGN_IN_ATTEMPTS_PER_IP_AND_EMAIL);
    // One point: blocked (for the backoff's length) or not.
    this.#backoff = make('backoff', 1);
    this.#checking = make('checking', 1, CHECK_TURN_SECONDS);
    this.#backoffBaseSeconds = options.backoffBaseSeconds ?? 1;
    this.#shortestBlockSeconds = options.redis ? 1 : 0;
  }

  // Emails are not kept in Redis as they were typed.
  static #pairKey(ip: string, email: string): string {
    return createHash('sha256').update(`${ip}\n${email.trim().toLowerCase()}`).digest('hex').slice(0, 32);
  }

  /**
   * Before the password is checked: may this address try this email now? Counts the attempt when it
   * may, and gives it the pair's one turn: while its check runs, another attempt from this address
   * for this email is refused (as a wait of 1 s). Without the turn, attempts sent in parallel all
   * passed the wait (checked before the hash) before any failure was recorded (after it), and so
   * skipped the growing waits. Every allowed attempt ends with failed(), succeeded() or release().
   */
  async attempt(ip: string, email: string): Promise<SignInDecision> {
    const pair = SignInLimiter.#pairKey(ip, email);
    const waiting = await this.#backoff.get(pair);
    if (waiting !== null && waiting.consumedPoints > 1) return { allowed: false, retryAfter: Math.max(1, Math.ceil(waiting.msBeforeNext / 1000)) };
    const turn = await consume(this.#checking, pair);
    if (!turn.allowed) return { allowed: false, retryAfter: 1 };
    // The wait again, now that this attempt holds the turn: a check that ended just before may have set it.
    const after = await this.#backoff.get(pair);
    if (after !== null && after.consumedPoints > 1) {
      await this.release(ip, email);
      return { allowed: false, retryAfter: Math.max(1, Math.ceil(after.msBeforeNext / 1000)) };
    }
    const results = await Promise.all([consume(this.#byIp, ip), consume(this.#byPair, pair)]);
    const refused = results.filter((r) => !r.allowed);
    if (refused.length === 0) return { allowed: true, retryAfter: 0 };
    await this.release(ip, email);
    return { allowed: false, retryAfter: Math.max(...refused.map((r) => r.retryAfter)) };
  }

  /** A wrong password: past the free failures, the next attempt from this address for this email waits, twice as long each time. */
  async failed(ip: string, email: string): Promise<void> {
    const pair = SignInLimiter.#pairKey(ip, email);
    try {
      const failures = (await this.#byPair.get(pair))?.consumedPoints ?? 0;
      if (failures < SIGN_IN_FREE_FAILURES) return;
      const seconds = Math.min(SIGN_IN_WINDOW_SECONDS, Math.max(this.#shortestBlockSeconds, this.#backoffBaseSeconds * 2 ** (failures - SIGN_IN_FREE_FAILURES)));
      await this.#backoff.block(pair, seconds);
    } finally {
      // The wait is in place before the turn is given back.
      await this.release(ip, email);
    }
  }

  async succeeded(ip: string, email: string): Promise<void> {
    const pair = SignInLimiter.#pairKey(ip, email);
    await Promise.all([this.#byPair.delete(pair), this.#backoff.delete(pair), this.#checking.delete(pair)]);
  }

  /** Gives back the turn of a check that ended neither way (an error on the way). */
  async release(ip: string, email: string): Promise<void> {
    await this.#checking.delete(SignInLimiter.#pairKey(ip, email));
  }
}

async function consume(limiter: RateLimiterAbstract, key: string): Promise<SignInDecision> {
  try {
    await limiter.consume(key, 1);
    return { allowed: true, retryAfter: 0 };
  } catch (rejection) {
    if (rejection instanceof RateLimiterRes) return { allowed: false, retryAfter: Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)) };
    throw rejection;
  }
}
