import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import { ApiError, sendError } from './errors.js';

// Routes that must answer even when the process is overloaded: liveness (an orchestrator must not
// kill a busy process) and the metrics that show why it is busy.
const NEVER_SHED = new Set(['/healthz', '/metrics']);
const RETRY_AFTER_SECONDS = '2';
const DEFAULT_SAMPLE_INTERVAL_MS = 1_000;
// The histogram's own sampling step, taken off its mean (a calm loop reads as 0 ms, not 10).
const RESOLUTION_MS = 10;

/**
 * Under event-loop pressure (the mean delay over the last sample above `maxEventLoopDelayMs`), new
 * requests get 503 service_unavailable with Retry-After at once instead of queueing into timeouts.
 *
 * Only the event-loop delay is sampled, with nothing that opens a file: a check that reads the
 * process's memory (process.memoryUsage() reads /proc) throws EMFILE once the process is out of
 * descriptors, and a timer that throws ends the process. Whatever happens, a sample never throws.
 */
export async function registerLoadShedding(app: FastifyInstance, options: { maxEventLoopDelayMs: number; sampleIntervalMs?: number }): Promise<void> {
  if (options.maxEventLoopDelayMs <= 0) return;
  // The first samples measure start-up (module loading, migrations, building the routes), not load: a
  // sample taken while the loop was blocked throughout even reads as an infinite delay. Shedding starts
  // once two samples have been taken on the running server.
  const sampleIntervalMs = options.sampleIntervalMs ?? DEFAULT_SAMPLE_INTERVAL_MS;
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  histogram.enable();
  let delayMs = 0;
  let shedFrom = Number.POSITIVE_INFINITY;
  const sample = (): void => {
    try {
      const mean = histogram.mean / 1e6 - RESOLUTION_MS;
      // No sample at all in the interval: the loop was blocked throughout.
      delayMs = Number.isNaN(mean) ? Number.POSITIVE_INFINITY : Math.max(0, mean);
      histogram.reset();
    } catch {
      delayMs = 0;
    }
  };
  const timer = setInterval(sample, sampleIntervalMs);
  timer.unref();
  app.addHook('onReady', async () => {
    shedFrom = Date.now() + 2 * sampleIntervalMs;
  });
  app.addHook('onClose', async () => {
    clearInterval(timer);
    histogram.disable();
  });
  app.addHook('onRequest', async (request, reply) => {
    if (delayMs <= options.maxEventLoopDelayMs || Date.now() < shedFrom || NEVER_SHED.has(request.url.split('?')[0] ?? '')) return undefined;
    request.log.warn('shedding load: the event loop is lagging');
    return sendError(reply, new ApiError('service_unavailable', 'the service is overloaded; retry shortly', null, { 'Retry-After': RETRY_AFTER_SECONDS }));
  });
}
