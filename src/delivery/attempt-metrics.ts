import type { AttemptRecorder } from './worker.js';

/**
 * What the delivery side reports about each attempt (one call per attempt, wherever it ended). Declared
 * here, next to the worker that owns AttemptRecorder; the metrics module implements it from above and
 * app.ts wires the two.
 */
export interface DeliveryMetrics {
  attemptEnded(attempt: { platform: string; env: string; outcome: 'delivered' | 'retry' | 'failed'; code: string | null; seconds: number }): void;
}

/** The worker's attempt recorder, with every attempt also counted and timed for Prometheus. */
export function withAttemptMetrics(recorder: AttemptRecorder, metrics: DeliveryMetrics): AttemptRecorder {
  return {
    ...recorder,
    attemptEnded(message, attempt) {
      metrics.attemptEnded({
        platform: message.platform,
        env: message.env,
        outcome: attempt.error === null ? 'delivered' : attempt.retryAt !== null ? 'retry' : 'failed',
        code: attempt.error?.code ?? null,
        seconds: Math.max(0, attempt.endedAt - attempt.startedAt) / 1000,
      });
      return recorder.attemptEnded(message, attempt);
    },
  };
}
