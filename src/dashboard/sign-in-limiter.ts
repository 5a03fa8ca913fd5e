import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

/** Sign-in attempts allowed per window: per client address, and per client address and email. */
export const SIGN_IN_WINDOW_SECONDS = 15 * 60;
export const SIGN_IN_ATTEMPTS_PER_IP = 30;
export const SIGN_IN_ATTEMPTS_PER_IP_AND_EMAIL = 10;
/** Failures of one address for one email before each further attempt must wait (1 s, then doubling). */
export const SIGN_IN_FREE_FAILURES = 3;

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
 * Nothing counts per email alone: wrong passwords typed elsewhere never lock an account's owner out
 * of their own address. A successful sign-in clears its address-and-email count. Shared through Redis
 * when the service has it.
 */
export class SignInLimiter {
  readonly #byIp: RateLimiterAbstract;
  readonly #byPair: RateLimiterAbstract;
  readonly #backoff: RateLimiterAbstract;
  readonly #backoffBaseSeconds: number;
  // Redis keeps expiries in whole seconds (a shorter block would never expire).
  readonly #shortestBlockSeconds: number;

  constructor(options: SignInLimiterOptions = {}) {
    const prefix = `${options.keyPrefix ?? 'voicenote:rl'}:signin`;
    const make = (name: string, points: number): RateLimiterAbstract => {
      const memory = new RateLimiterMemory({ points, duration: SIGN_IN_WINDOW_SECONDS, keyPrefix: `${prefix}:${name}` });
      if (!options.redis) return memory;
      return new RateLimiterRedis({ storeClient: options.redis, points, duration: SIGN_IN_WINDOW_SECONDS, keyPrefix: `${prefix}:${name}`, insuranceLimiter: memory });
    };
    this.#byIp = make('ip', SIGN_IN_ATTEMPTS_PER_IP);
    this.#byPair = make('ip-email', SIGN_IN_ATTEMPTS_PER_IP_AND_EMAIL);
    // One point: blocked (for the backoff's length) or not.
    this.#backoff = make('backoff', 1);
    this.#backoffBaseSeconds = options.backoffBaseSeconds ?? 1;
    this.#shortestBlockSeconds = options.redis ? 1 : 0;
  }

  // Emails are not kept in Redis as they were typed.
  static #pairKey(ip: string, email: string): string {
    return createHash('sha256').update(`${ip}\n${email.trim().toLowerCase()}`).digest('hex').slice(0, 32);
  }

  /** Before the password is checked: may this address try this email now? Counts the attempt when it may. */
  async attempt(ip: string, email: string): Promise<SignInDecision> {
    const pair = SignInLimiter.#pairKey(ip, email);
    const waiting = await this.#backoff.get(pair);
    if (waiting !== null && waiting.consumedPoints > 1) return { allowed: false, retryAfter: Math.max(1, Math.ceil(waiting.msBeforeNext / 1000)) };
    const results = await Promise.all([consume(this.#byIp, ip), consume(this.#byPair, pair)]);
    const refused = results.filter((r) => !r.allowed);
    if (refused.length === 0) return { allowed: true, retryAfter: 0 };
    return { allowed: false, retryAfter: Math.max(...refused.map((r) => r.retryAfter)) };
  }

  /** A wrong password: past the free failures, the next attempt from this address for this email waits, twice as long each time. */
  async failed(ip: string, email: string): Promise<void> {
    const pair = SignInLimiter.#pairKey(ip, email);
    const failures = (await this.#byPair.get(pair))?.consumedPoints ?? 0;
    if (failures < SIGN_IN_FREE_FAILURES) return;
    const seconds = Math.min(SIGN_IN_WINDOW_SECONDS, Math.max(this.#shortestBlockSeconds, this.#backoffBaseSeconds * 2 ** (failures - SIGN_IN_FREE_FAILURES)));
    await this.#backoff.block(pair, seconds);
  }

  async succeeded(ip: string, email: string): Promise<void> {
    const pair = SignInLimiter.#pairKey(ip, email);
    await Promise.all([this.#byPair.delete(pair), this.#backoff.delete(pair)]);
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
