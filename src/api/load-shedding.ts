import underPressure from '@fastify/under-pressure';
import type { FastifyInstance } from 'fastify';
import { ApiError } from './errors.js';

// Routes that must answer even when the process is overloaded: liveness (an orchestrator must not
// kill a busy process) and the metrics that show why it is busy.
const NEVER_SHED = new Set(['/healthz', '/metrics']);
const RETRY_AFTER_SECONDS = '2';
const DEFAULT_SAMPLE_INTERVAL_MS = 1_000;

/**
 * Under event-loop pressure (the mean delay over the last sample above `maxEventLoopDelayMs`), new
 * requests get 503 service_unavailable with Retry-After at once instead of queueing into timeouts.
 */
export async function registerLoadShedding(app: FastifyInstance, options: { maxEventLoopDelayMs: number; sampleIntervalMs?: number }): Promise<void> {
  if (options.maxEventLoopDelayMs <= 0) return;
  // The first samples measure start-up (module loading, migrations, building the routes), not load: a
  // sample taken while the loop was blocked throughout even reads as an infinite delay. Shedding starts
  // once two samples have been taken on the running server.
  const sampleIntervalMs = options.sampleIntervalMs ?? DEFAULT_SAMPLE_INTERVAL_MS;
  let shedFrom = Number.POSITIVE_INFINITY;
  app.addHook('onReady', async () => {
    shedFrom = Date.now() + 2 * sampleIntervalMs;
  });
  await app.register(underPressure, {
    maxEventLoopDelay: options.maxEventLoopDelayMs,
    ...(options.sampleIntervalMs !== undefined ? { sampleInterval: options.sampleIntervalMs } : {}),
    // A resolved promise lets the request through; a rejected one reaches the error handler, which answers the envelope.
    pressureHandler: (request) => {
      if (Date.now() < shedFrom || NEVER_SHED.has(request.url.split('?')[0] ?? '')) return undefined;
      request.log.warn('shedding load: the event loop is lagging');
      return Promise.reject(
        new ApiError('service_unavailable', 'the service is overloaded; retry shortly', null, { 'Retry-After': RETRY_AFTER_SECONDS }),
      );
    },
  });
}
