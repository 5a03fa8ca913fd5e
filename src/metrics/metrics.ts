import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Logger } from 'pino';
import type { AudioMetrics } from '../audio/pipeline.js';
import type { DeliveryMetrics } from '../delivery/attempt-metrics.js';
import type { Db } from '../store/db.js';
import { queueSnapshot, whatsappSessionCounts, type QueueSnapshot } from './store-gauges.js';

// The hooks the worker and the audio pipeline call are declared where they are called; this module
// implements them (from above: it imports their types, never the other way round).
export type { AudioMetrics, DeliveryMetrics };

/** What the HTTP layer reports once a response has gone out. */
export interface HttpMetrics {
  responded(request: { method: string; route: string; status: number; seconds: number }): void;
}

export interface Metrics extends DeliveryMetrics, AudioMetrics, HttpMetrics {
  readonly registry: Registry;
  /** The text exposition format Prometheus scrapes. */
  render(): Promise<{ contentType: string; body: string }>;
}

const KNOWN_METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']);
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const ATTEMPT_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const CONVERSION_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
// One scrape reads the queue once, however many gauges draw from it.
const SNAPSHOT_REUSE_MS = 250;

/**
 * One registry per process (per app in tests, so apps in one test process do not share counters).
 * Counters and histograms are fed by hook calls; the queue and the WhatsApp sessions are read from
 * the store when Prometheus scrapes, so every process reports the same, shared truth.
 */
export function createMetrics(options: { db: Db; logger: Logger; now?: () => number }): Metrics {
  const { db, logger } = options;
  const now = options.now ?? Date.now;
  const registry = new Registry();
  // The standard names (process_*, nodejs_*), which ready-made dashboards expect.
  collectDefaultMetrics({ register: registry });

  const httpRequests = new Counter({
    name: 'voicenote_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: 'voicenote_http_request_duration_seconds',
    help: 'Time from request to response, by method and route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: HTTP_BUCKETS,
    registers: [registry],
  });
  const deliveries = new Counter({
    name: 'voicenote_deliveries_total',
    help: 'Delivery attempts by platform, environment, outcome (delivered, retry, failed) and error code',
    labelNames: ['platform', 'env', 'outcome', 'code'] as const,
    registers: [registry],
  });
  const attemptSeconds = new Histogram({
    name: 'voicenote_delivery_attempt_duration_seconds',
    help: 'Time of one delivery attempt (audio preparation and platform call), by platform and outcome',
    labelNames: ['platform', 'outcome'] as const,
    buckets: ATTEMPT_BUCKETS,
    registers: [registry],
  });
  const conversionSeconds = new Histogram({
    name: 'voicenote_audio_conversion_duration_seconds',
    help: 'Time to convert (or pass through) one source into a platform format, cache misses only',
    labelNames: ['format'] as const,
    buckets: CONVERSION_BUCKETS,
    registers: [registry],
  });
  const cacheLookups = new Counter({
    name: 'voicenote_audio_cache_lookups_total',
    help: 'Converted-audio cache lookups by result (hit, miss)',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const storeErrors = new Counter({
    name: 'voicenote_metrics_store_errors_total',
    help: 'Scrapes whose queue or session figures could not be read from storage',
    registers: [registry],
  });

  let snapshot: { at: number; value: Promise<QueueSnapshot | undefined> } | undefined;
  const readQueue = (): Promise<QueueSnapshot | undefined> => {
    const t = now();
    if (!snapshot || t - snapshot.at > SNAPSHOT_REUSE_MS) {
      snapshot = {
        at: t,
        value: queueSnapshot(db.kysely, t).catch((err: unknown) => {
          storeErrors.inc();
          logger.warn({ err }, 'metrics: could not read the queue');
          return undefined;
        }),
      };
    }
    return snapshot.value;
  };

  new Gauge({
    name: 'voicenote_queue_depth',
    help: 'Messages not yet settled, by platform and status (read from storage at scrape time)',
    labelNames: ['platform', 'status'] as const,
    registers: [registry],
    async collect() {
      const q = await readQueue();
      this.reset();
      for (const row of q?.depth ?? []) this.set({ platform: row.platform, status: row.status }, row.count);
    },
  });
  new Gauge({
    name: 'voicenote_queue_oldest_due_age_seconds',
    help: 'Age of the oldest message whose attempt is due and that no worker holds, by platform (0 when none)',
    labelNames: ['platform'] as const,
    registers: [registry],
    async collect() {
      const q = await readQueue();
      this.reset();
      for (const row of q?.oldestDue ?? []) this.set({ platform: row.platform }, row.ageSeconds);
    },
  });
  new Gauge({
    name: 'voicenote_whatsapp_sessions',
    help: 'WhatsApp sessions by environment and status (read from storage at scrape time)',
    labelNames: ['env', 'status'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      try {
        for (const row of await whatsappSessionCounts(db.kysely)) this.set({ env: row.env, status: row.status }, row.count);
      } catch (err) {
        storeErrors.inc();
        logger.warn({ err }, 'metrics: could not read the WhatsApp sessions');
      }
    },
  });

  return {
    registry,
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
    responded({ method, route, status, seconds }) {
      const m = KNOWN_METHODS.has(method) ? method : 'OTHER';
      httpRequests.inc({ method: m, route, status: String(status) });
      httpDuration.observe({ method: m, route }, seconds);
    },
    attemptEnded({ platform, env, outcome, code, seconds }) {
      deliveries.inc({ platform, env, outcome, code: code ?? 'none' });
      attemptSeconds.observe({ platform, outcome }, seconds);
    },
    cacheLookup(hit) {
      cacheLookups.inc({ result: hit ? 'hit' : 'miss' });
    },
    converted(format, seconds) {
      conversionSeconds.observe({ format }, seconds);
    },
  };
}
