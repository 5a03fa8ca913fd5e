import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

/** Sign-in attempts allowed per window, per client address and per email. */
export const SIGN_IN_WINDOW_SECONDS = 15 * 60;
export const SIGN_IN_ATTEMPTS_PER_IP = 30;
export const SIGN_IN_ATTEMPTS_PER_EMAIL = 10;

export interface SignInDecision {
  allowed: boolean;
  /** Whole seconds until another attempt is allowed (when refused). */
  retryAfter: number;
}

/**
 * Guards the password form against guessing: every attempt counts against the client address and
 * against the email tried (so one address cannot try many passwords, nor many addresses one email).
 * A successful sign-in clears its email's count. Shared through Redis when the service has it.
 */
export class SignInLimiter {
  readonly #byIp: RateLimiterAbstract;
  readonly #byEmail: RateLimiterAbstract;

  constructor(options: { redis?: Redis | undefined; keyPrefix?: string | undefined } = {}) {
    const prefix = `${options.keyPrefix ?? 'voicenote:rl'}:signin`;
    const make = (name: string, points: number): RateLimiterAbstract => {
      const memory = new RateLimiterMemory({ points, duration: SIGN_IN_WINDOW_SECONDS, keyPrefix: `${prefix}:${name}` });
      if (!options.redis) return memory;
      return new RateLimiterRedis({ storeClient: options.redis, points, duration: SIGN_IN_WINDOW_SECONDS, keyPrefix: `${prefix}:${name}`, insuranceLimiter: memory });
    };
    this.#byIp = make('ip', SIGN_IN_ATTEMPTS_PER_IP);
    this.#byEmail = make('email', SIGN_IN_ATTEMPTS_PER_EMAIL);
  }

  // Emails are not kept in Redis as they were typed.
  static #emailKey(email: string): string {
    return createHash('sha256').update(email.trim().toLowerCase()).digest('hex').slice(0, 32);
  }

  async attempt(ip: string, email: string): Promise<SignInDecision> {
    const results = await Promise.all([consume(this.#byIp, ip), consume(this.#byEmail, SignInLimiter.#emailKey(email))]);
    const refused = results.filter((r) => !r.allowed);
    if (refused.length === 0) return { allowed: true, retryAfter: 0 };
    return { allowed: false, retryAfter: Math.max(...refused.map((r) => r.retryAfter)) };
  }

  async succeeded(email: string): Promise<void> {
    await this.#byEmail.delete(SignInLimiter.#emailKey(email));
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
