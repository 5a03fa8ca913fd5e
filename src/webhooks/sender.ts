import { randomUUID } from 'node:crypto';
import type { LookupFunction } from 'node:net';
import type { Logger } from 'pino';
import type { Agent } from 'undici';
import { request } from '../core/http-client.js';
import { createAudioAgent } from '../audio/fetch.js';
import type { AddressPolicy } from '../audio/url-check.js';
import { vetAudioUrl } from '../audio/url-check.js';
import type { SecretBox } from '../core/secret-box.js';
import type { Db } from '../store/db.js';
import { DueLoop, untilNextDue, type NextTurn } from '../delivery/due-loop.js';
import { AccountSlots, atCap, DEFAULT_ACCOUNT_SHARE_PERCENT, pickFairly } from '../delivery/fair-share.js';
import {
  claimDueDeliveriesFairly,
  fanOutEvent,
  findEndpointById,
  findEvent,
  nextWebhookDueAt,
  pendingEvents,
  purgeWebhookHistory,
  recordDeliveryAttempt,
  releaseDeliveryLeases,
  type WebhookDeliveryRow,
} from '../store/webhooks.js';
import { EndpointBreakers, type BreakerTuning } from './circuit-breaker.js';
import { signingSecrets } from './endpoints.js';
import { newRowId, newWebhookDeliveryId } from './ids.js';
import { webhookHeaders } from './signing.js';

/** What a delivery refused for its address records (no name, no address: the account reads it; the log has the detail). */
export const WEBHOOK_NOT_PUBLIC = 'the webhook host is not a public address';

/** Waits before the 2nd … 6th try of a delivery: 1 s, 5 s, 30 s, 2 min, 10 min. Then it has failed. */
export const RETRY_DELAYS_MS: readonly number[] = [1_000, 5_000, 30_000, 120_000, 600_000];
/** A receiver that has not answered in this long counts as a failure (and is retried). */
export const DEFAULT_TIMEOUT_MS = 10_000;
const EXCERPT_CHARS = 1_000;
/** Finished deliveries (and their answers) are kept this long for the delivery log, then forgotten. */
export const WEBHOOK_HISTORY_MS = 30 * 86_400_000;
const PURGE_EVERY_MS = 60 * 60_000;
const MAX_BODY_READ_BYTES = 16 * 1024;
/** Tries in flight at once to one endpoint, from one process: a slow receiver holds at most this many slots. */
export const DEFAULT_ENDPOINT_CONCURRENCY = 2;
/** Due deliveries the fair claim reads to choose from. */
const CLAIM_WINDOW = 64;

export interface WebhookSenderOptions {
  db: Db;
  secretBox: SecretBox;
  logger: Logger;
  allowPrivateUrls: boolean;
  retryDelaysMs?: readonly number[];
  timeoutMs?: number;
  /** Longest sleep between looks at the outbox (other processes write to it too). */
  pollMs?: number;
  /** Deliveries in flight at once. */
  concurrency?: number;
  /** Deliveries in flight at once to one endpoint. */
  endpointConcurrency?: number;
  /** The most of `concurrency` one account may hold, in percent (WORKER_ACCOUNT_SHARE). */
  accountSharePercent?: number;
  /** When an endpoint that does not answer is left alone, and for how long (circuit-breaker.ts). */
  breaker?: Partial<BreakerTuning>;
  /** Tests: stand a loopback receiver in for a public host. */
  addressPolicy?: AddressPolicy;
  /** Tests: replaces DNS resolution (made-up names pointed at loopback). */
  lookup?: LookupFunction;
}

/** The delay before the next try after `attempts` tries, or null when every retry is used up. */
export function retryDelayAfter(attempts: number, delays: readonly number[] = RETRY_DELAYS_MS): number | null {
  return attempts >= 1 && attempts <= delays.length ? delays[attempts - 1]! : null;
}

interface Answer {
  statusCode: number | null;
  excerpt: string | null;
  error: string | null;
}

/**
 * Sends the outbox: hands each due event to its endpoints, posts each delivery signed, records every
 * answer and retries on the schedule. Runs beside the API and the delivery worker on its own timers
 * and connections, so a slow or dead receiver never holds up a voice note. Any number of processes
 * may run one over the same database: deliveries are claimed under leases.
 */
export class WebhookSender {
  readonly id = `webhooks_${randomUUID()}`;
  readonly #opts: Required<Pick<WebhookSenderOptions, 'retryDelaysMs' | 'timeoutMs' | 'pollMs' | 'concurrency' | 'endpointConcurrency' | 'accountSharePercent'>> &
    WebhookSenderOptions;
  readonly #agent: Agent;
  /** Claim what is due, sleep until the next due time, wake on notice, back off while storage is away (due-loop.ts). */
  readonly #loop: DueLoop;
  /** Deliveries in flight per account and per endpoint: what the fair claim weighs (delivery/fair-share.ts). */
  readonly #accountSlots: AccountSlots;
  readonly #endpointInHand = new Map<string, number>();
  readonly #breakers: EndpointBreakers;
  /**
   * The last claim left slots free while due deliveries may wait (their accounts or endpoints at their
   * cap, or their circuits open): look again once a slot frees, on wake(), or at the next poll, rather
   * than at once (they are due, so the next-due time says "now").
   */
  #capped: { free: number } | undefined;
  #newWork = false;
  readonly #stopping = new AbortController();
  #lastPurge = 0;
  /** A poll interval passed while capped: look again whatever else happened. */
  #pollDue = false;
  /** The last sleep was the capped one (its end by time, not by a notice, makes a poll due). */
  #cappedSleep = false;

  constructor(options: WebhookSenderOptions) {
    this.#opts = {
      retryDelaysMs: RETRY_DELAYS_MS,
      timeoutMs: DEFAULT_TIMEOUT_MS,
      pollMs: 1_000,
      concurrency: 8,
      endpointConcurrency: DEFAULT_ENDPOINT_CONCURRENCY,
      accountSharePercent: DEFAULT_ACCOUNT_SHARE_PERCENT,
      ...options,
    };
    this.#accountSlots = new AccountSlots(this.#opts.concurrency, this.#opts.accountSharePercent);
    this.#breakers = new EndpointBreakers(options.breaker);
    // The audio fetcher's agent: every resolved and connected address is checked the same way.
    this.#agent = createAudioAgent({
      allowPrivate: options.allowPrivateUrls,
      addressPolicy: options.addressPolicy,
      lookup: options.lookup,
      // The delivery log (which the account sees) says only "not a public address"; the operator's log says which and why.
      onRefused: (detail) => options.logger.warn({ webhook_host: detail.host, reason: detail.reason }, 'webhook delivery refused: the host is not a public address'),
    });
    this.#loop = new DueLoop({
      pollMs: this.#opts.pollMs,
      turn: (context) => this.#turn(context),
      onError: (err) => this.#opts.logger.warn({ err }, 'webhook outbox could not be read; retrying'),
    });
  }

  start(): void {
    this.#loop.start();
  }

  /** Something was just written to the outbox in this process: look now rather than at the next poll. */
  wake(): void {
    this.#newWork = true;
    this.#loop.nudge();
  }

  /** Stops looking, gives deliveries in flight a moment, and hands back the leases of the rest. */
  async stop(graceMs = 2_000): Promise<void> {
    if (!this.#loop.running) return;
    await this.#loop.stop(graceMs);
    this.#stopping.abort();
    await Promise.allSettled([...this.#loop.inFlight.values()]);
    await releaseDeliveryLeases(this.#opts.db.kysely, this.id, [...this.#loop.inFlight.keys()]).catch(() => undefined);
    await this.#agent.close().catch(() => undefined);
  }

  /** One turn of the loop: the outbox's new events fanned out, what is due claimed and started. */
  async #turn({ woken }: { woken: boolean }): Promise<NextTurn> {
    const { db, logger, concurrency, timeoutMs, endpointConcurrency, pollMs } = this.#opts;
    const accounts = this.#accountSlots;
    if (this.#cappedSleep && !woken) this.#pollDue = true;
    this.#cappedSleep = false;
    const now = Date.now();
    for (const event of await pendingEvents(db.kysely, now, 100)) {
      await fanOutEvent(db.kysely, event, now, () => newWebhookDeliveryId(now));
    }
    const free = concurrency - this.#loop.inFlight.size;
    const capped = this.#capped;
    if (free > 0 && (capped === undefined || this.#newWork || free > capped.free || this.#pollDue)) {
      this.#newWork = false;
      this.#pollDue = false;
      // Endpoints that failed to answer (probing ones too) get one try at a time.
      const single = this.#breakers.oneAtATime(now);
      const endpointFull = [...atCap(this.#endpointInHand, endpointConcurrency), ...single.filter((id) => (this.#endpointInHand.get(id) ?? 0) >= 1)];
      const excludeEndpoints = [...new Set([...endpointFull, ...this.#breakers.open(now)])];
      const excludeAccounts = accounts.full();
      const endpointCaps = new Set(single);
      // The lease outlasts a try (timeout plus recording), so only a dead process loses one.
      const { claimed, leftBehind } = await claimDueDeliveriesFairly(db.kysely, db.dialect, this.id, {
        limit: free,
        leaseMs: timeoutMs + 30_000,
        now,
        window: Math.max(CLAIM_WINDOW, free * 4),
        excludeAccounts,
        excludeEndpoints,
        pick: (candidates) =>
          pickFairly(
            candidates.map((c) => ({ id: c.id, account: c.account_id, sender: c.endpoint_id })),
            {
              limit: free,
              slots: concurrency,
              capOf: (account) => accounts.capOf(account),
              inHand: accounts.inHand,
              // The one slot of an endpoint that failed to answer: the pick sees it as full after one.
              senderCap: endpointConcurrency,
              senderInHand: new Map([...this.#endpointInHand, ...[...endpointCaps].map((id) => [id, endpointConcurrency - 1] as const)]),
            },
          ),
      });
      this.#capped = claimed.length < free && (leftBehind || excludeAccounts.length > 0 || excludeEndpoints.length > 0) ? { free: free - claimed.length } : undefined;
      for (const delivery of claimed) {
        const startedAt = Date.now();
        accounts.take(delivery.account_id);
        count(this.#endpointInHand, delivery.endpoint_id, 1);
        const job = this.#deliver(delivery)
          .catch((err: unknown) => logger.warn({ err, delivery_id: delivery.id }, 'webhook delivery could not be recorded'))
          .finally(() => {
            accounts.release(delivery.account_id, startedAt);
            count(this.#endpointInHand, delivery.endpoint_id, -1);
          });
        this.#loop.track(delivery.id, job);
      }
    }
    if (now - this.#lastPurge > PURGE_EVERY_MS) {
      this.#lastPurge = now;
      await purgeWebhookHistory(db.kysely, now - WEBHOOK_HISTORY_MS);
    }
    if (this.#capped) {
      // Due deliveries wait behind a cap or an open circuit: the end of a try, a wake() or the poll ends this.
      this.#cappedSleep = true;
      return { next: 'sleep', ms: pollMs };
    }
    const ms = await untilNextDue(async () => {
      const due = await nextWebhookDueAt(db.kysely);
      return due === undefined ? undefined : due - Date.now();
    }, pollMs);
    return { next: 'sleep', ms };
  }

  async #deliver(delivery: WebhookDeliveryRow): Promise<void> {
    const { db, secretBox, retryDelaysMs } = this.#opts;
    const [endpoint, event] = await Promise.all([findEndpointById(db.kysely, delivery.endpoint_id), findEvent(db.kysely, delivery.event_id)]);
    const startedAt = Date.now();
    let answer: Answer;
    let final = false;
    if (!endpoint || !event) {
      answer = { statusCode: null, excerpt: null, error: endpoint ? 'the event is gone' : 'the endpoint was deleted' };
      final = true;
    } else {
      answer = await this.#post(endpoint.url, signingSecrets(secretBox, endpoint, startedAt), event.id, event.payload);
      if (answer.statusCode !== null) this.#breakers.answered(endpoint.id);
      // Refused by the address rules: not the receiver's silence.
      else if (!answer.error?.startsWith('refused')) this.#breakers.unanswered(endpoint.id, Date.now());
    }
    const endedAt = Date.now();
    const ok = answer.statusCode !== null && answer.statusCode >= 200 && answer.statusCode <= 299;
    const delay = ok || final ? null : retryDelayAfter(delivery.attempts, retryDelaysMs);
    await recordDeliveryAttempt(
      db.kysely,
      delivery,
      this.id,
      {
        id: newRowId('wha', startedAt),
        delivery_id: delivery.id,
        attempt: delivery.attempts,
        started_at: startedAt,
        duration_ms: endedAt - startedAt,
        status_code: answer.statusCode,
        response_excerpt: answer.excerpt,
        error: answer.error,
      },
      { status: ok ? 'succeeded' : delay === null ? 'failed' : 'pending', nextAttemptAt: delay === null ? endedAt : endedAt + delay, now: endedAt },
    );
  }

  /** One signed POST; whatever happens comes back as an answer, never as a throw. */
  async #post(url: string, secrets: string[], eventId: string, body: string): Promise<Answer> {
    const { allowPrivateUrls, addressPolicy, timeoutMs } = this.#opts;
    const verdict = vetAudioUrl(url, { allowPrivate: allowPrivateUrls, addressPolicy });
    if (!verdict.ok) {
      if (!verdict.blocked) return { statusCode: null, excerpt: null, error: `refused: ${verdict.message.replace(/^audio_url/, 'url')}` };
      this.#opts.logger.warn({ webhook_host: hostOf(url), reason: verdict.message }, 'webhook delivery refused: the host is not a public address');
      return { statusCode: null, excerpt: null, error: `refused: ${WEBHOOK_NOT_PUBLIC}` };
    }
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      const res = await request(verdict.url, {
        method: 'POST',
        dispatcher: this.#agent,
        headers: webhookHeaders(secrets, eventId, Math.floor(Date.now() / 1000), body),
        body,
        signal: AbortSignal.any([timeout, this.#stopping.signal]),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      const excerpt = await readExcerpt(res.body);
      return { statusCode: res.statusCode, excerpt, error: res.statusCode >= 200 && res.statusCode <= 299 ? null : `the receiver answered HTTP ${res.statusCode}` };
    } catch (err) {
      if (timeout.aborted) return { statusCode: null, excerpt: null, error: `no answer within ${Math.round(timeoutMs / 100) / 10} s` };
      return { statusCode: null, excerpt: null, error: describe(err) };
    }
  }
}

/** The host of a URL for the log (its path and query may carry a receiver's secret). */
function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '(not a URL)';
  }
}

/** Adds `delta` to a per-key count, forgetting keys that reach zero. */
function count(map: Map<string, number>, key: string, delta: number): void {
  const n = (map.get(key) ?? 0) + delta;
  if (n > 0) map.set(key, n);
  else map.delete(key);
}

async function readExcerpt(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= MAX_BODY_READ_BYTES) break;
    }
  } catch {
    // A body cut short still tells what it said so far.
  } finally {
    body.destroy();
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? null : text.slice(0, EXCERPT_CHARS);
}

function describe(err: unknown): string {
  let cur: unknown = err;
  for (let i = 0; i < 5 && cur instanceof Error; i++) {
    const code = (cur as Error & { code?: unknown }).code;
    if (code === 'AUDIO_FETCH_BLOCKED') return `refused: ${WEBHOOK_NOT_PUBLIC}`;
    if (typeof code === 'string' && code.startsWith('E') && !code.startsWith('ERR_')) return `could not connect (${code})`;
    if (!(cur.cause instanceof Error)) break;
    cur = cur.cause;
  }
  return err instanceof Error ? err.message : String(err);
}
