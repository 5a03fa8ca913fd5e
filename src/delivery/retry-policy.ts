/**
 * When to try a transient failure again (docs/sending.md, "Live delivery"): about 2 s after the first attempt,
 * doubling, never more than 10 minutes apart, for at most one hour after the message was accepted.
 */
export const FIRST_RETRY_MS = 2_000;
export const MAX_RETRY_GAP_MS = 10 * 60_000;
export const RETRY_WINDOW_MS = 60 * 60_000;
/**
 * An audio host that does not answer (timeouts, refused connections, 5xx) is tried again for this long
 * only: a wrong or dead audio URL should fail in minutes, not after the platforms' hour.
 */
export const AUDIO_RETRY_WINDOW_MS = 10 * 60_000;

export interface RetryInput {
  /** Attempts made so far, this one included (1 after the first). */
  attempts: number;
  acceptedAt: number;
  now: number;
  /** The platform's own "retry after", when it gave one. */
  retryAfterMs?: number;
  /** How long after acceptance retries stop (default RETRY_WINDOW_MS). */
  windowMs?: number;
  /** 0..1; injectable so tests can pin it. */
  random?: () => number;
}

/** Epoch ms of the next attempt, or null when the retry window is spent. */
export function nextAttemptAt(input: RetryInput): number | null {
  const random = input.random ?? Math.random;
  const exponent = Math.min(Math.max(input.attempts - 1, 0), 30);
  const backoff = Math.min(FIRST_RETRY_MS * 2 ** exponent, MAX_RETRY_GAP_MS);
  // ±20 % jitter spreads out messages that failed together, so they do not all come back at once.
  const jittered = backoff * (0.8 + 0.4 * random());
  const delay = input.retryAfterMs !== undefined ? Math.max(input.retryAfterMs, 0) + 250 * random() : jittered;
  const at = input.now + Math.round(delay);
  return at > input.acceptedAt + (input.windowMs ?? RETRY_WINDOW_MS) ? null : at;
}
