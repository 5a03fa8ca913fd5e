import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { PlatformSession } from '../core/send-rules.js';
import { isPlatform } from '../core/send-rules.js';
import type { SecretBox } from '../core/secret-box.js';
import type { Db } from '../store/db.js';
import { claimDueMessages, extendLease, nextDueAt, releaseLeases, scheduleRetry, settleMessage, type MessageRow } from '../store/messages.js';
import { DeliveryError, type FailureCode, type PlatformAdapter, type VoiceFile } from '../platforms/platform.js';
import { nextAttemptAt } from './retry-policy.js';
import type { AudioFacts } from '../audio/pipeline.js';

/** Turns an audio URL into the platform's voice format (the audio pipeline). */
export interface AudioSource {
  prepare(input: { url: string; platform: 'linkedin' | 'telegram' | 'whatsapp'; durationHint?: number }): Promise<PreparedVoice>;
}

/** `facts` (source as detected, cache key) is what the message log keeps of the audio. */
export type PreparedVoice = VoiceFile & { release(): void; facts?: AudioFacts };

export interface WorkerOptions {
  db: Db;
  secretBox: SecretBox;
  audio: AudioSource;
  /** The adapter for a message's environment and platform. */
  adapterFor(env: 'test' | 'live', platform: string): PlatformAdapter;
  logger: Logger;
  /** Messages handled at once by this process. */
  concurrency?: number;
  leaseMs?: number;
  /** Longest sleep between looks at the queue, for work that other processes accepted. */
  pollMs?: number;
  /**
   * The id under which this process holds affinity leases (platform resources such as a session's
   * connection): messages whose key another process holds are left to that process's worker.
   */
  affinityHolder?: string;
  /** The message log: told of each attempt and its audio (never throws; delivery does not depend on it). */
  recorder?: AttemptRecorder;
}

/** What the message log keeps of an attempt; `error` null when the platform accepted the voice note. */
export interface AttemptRecord {
  startedAt: number;
  endedAt: number;
  error: DeliveryError | null;
  /** When it is tried again; null when the attempt settled the message. */
  retryAt: number | null;
}

export interface AttemptRecorder {
  audioPrepared(message: MessageRow, audio: PreparedVoice): Promise<void>;
  attemptEnded(message: MessageRow, attempt: AttemptRecord): Promise<void>;
}

const AUDIO_CODES = new Set<FailureCode>(['audio_fetch_failed', 'audio_fetch_blocked', 'audio_too_large', 'audio_too_long', 'audio_unsupported']);

/** Any error from a step of delivery, as a DeliveryError (unknown errors are transient: a bug must not lose a message). */
function asDeliveryError(error: unknown): DeliveryError {
  if (error instanceof DeliveryError) return error;
  if (error instanceof Error) {
    const coded = error as Error & { code?: unknown; transient?: unknown };
    if (typeof coded.code === 'string' && AUDIO_CODES.has(coded.code as FailureCode)) {
      return new DeliveryError(coded.code as FailureCode, error.message, coded.transient === true);
    }
    return new DeliveryError('platform_error', `internal error during delivery: ${error.message}`, true);
  }
  return new DeliveryError('platform_error', 'internal error during delivery', true);
}

/** A message's sealed `session`; one sealed under another SECRET_KEY can never be opened, so that is final. */
function openCredentials(secretBox: SecretBox, sealed: string): PlatformSession {
  try {
    return secretBox.openJson<PlatformSession>(sealed);
  } catch {
    throw new DeliveryError('invalid_session', 'the stored credentials cannot be decrypted (was SECRET_KEY changed since the message was accepted?)', false);
  }
}

/**
 * Claims due messages from the store, hands each to its platform and settles it. Runs inside `serve`
 * or alone as `voicenote worker`; any number of workers may share one database.
 */
export class DeliveryWorker {
  readonly id = `worker_${randomUUID()}`;
  readonly #options: Required<Pick<WorkerOptions, 'concurrency' | 'leaseMs' | 'pollMs'>> & WorkerOptions;
  readonly #inFlight = new Map<string, Promise<void>>();
  #running = false;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #wakeRequested = false;

  constructor(options: WorkerOptions) {
    this.#options = { concurrency: 8, leaseMs: 120_000, pollMs: 1_000, ...options };
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /** A message was just accepted in this process: look at the queue now rather than at the next poll. */
  wake(): void {
    this.#wakeRequested = true;
    this.#wake?.();
  }

  /** Stops claiming, lets messages in hand finish (up to `graceMs`), and hands back the leases of the rest. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    this.#wake?.();
    await this.#loop;
    const pending = [...this.#inFlight.values()];
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled(pending), new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    await releaseLeases(this.#options.db.kysely, this.id, [...this.#inFlight.keys()]).catch((err: unknown) =>
      this.#options.logger.warn({ err }, 'could not release leases at shutdown'),
    );
  }

  async #run(): Promise<void> {
    const { db, logger, concurrency, leaseMs, pollMs, affinityHolder } = this.#options;
    while (this.#running) {
      let claimed: MessageRow[] = [];
      const free = concurrency - this.#inFlight.size;
      // Reset even when every slot is busy: a wake left pending would make #sleep return at once and
      // spin this loop on microtasks, starving the very jobs whose end would free a slot.
      this.#wakeRequested = false;
      if (free > 0) {
        try {
          claimed = await claimDueMessages(db.kysely, db.dialect, this.id, {
            limit: free,
            leaseMs,
            ...(affinityHolder !== undefined ? { affinityHolder } : {}),
          });
        } catch (err) {
          logger.error({ err }, 'could not claim messages; retrying');
        }
        for (const message of claimed) {
          const job = this.#handle(message).finally(() => {
            this.#inFlight.delete(message.id);
            this.wake();
          });
          this.#inFlight.set(message.id, job);
        }
      }
      if (claimed.length > 0 && claimed.length === free) continue;
      await this.#sleep(free > 0 ? await this.#untilNextDue(pollMs) : pollMs);
    }
  }

  async #untilNextDue(pollMs: number): Promise<number> {
    try {
      const { db, affinityHolder } = this.#options;
      const due = await nextDueAt(db.kysely, affinityHolder !== undefined ? { affinityHolder } : {});
      return due === undefined ? pollMs : Math.min(pollMs, Math.max(due - Date.now(), 5));
    } catch {
      return pollMs;
    }
  }

  #sleep(ms: number): Promise<void> {
    if (this.#wakeRequested || !this.#running) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }

  async #handle(message: MessageRow): Promise<void> {
    const { db, logger, leaseMs } = this.#options;
    const log = logger.child({ message_id: message.id, attempt: message.attempts });
    // A long upload must not look like a dead worker: renew the lease while the job runs.
    const renew = setInterval(() => {
      extendLease(db.kysely, message.id, this.id, Date.now() + leaseMs).catch((err: unknown) => log.warn({ err }, 'could not renew lease'));
    }, leaseMs / 3);
    const startedAt = Date.now();
    try {
      await this.#attempt(message);
      await this.#options.recorder?.attemptEnded(message, { startedAt, endedAt: Date.now(), error: null, retryAt: null });
      const settled = await settleMessage(db.kysely, message, this.id, { status: 'delivered', at: Date.now() });
      if (settled) log.info('delivered');
    } catch (thrown) {
      const error = asDeliveryError(thrown);
      const now = Date.now();
      const attempts = error.notAttempted ? message.attempts - 1 : message.attempts;
      const retryAt = error.transient
        ? nextAttemptAt({ attempts, acceptedAt: Number(message.created_at), now, retryAfterMs: error.retryAfterMs })
        : null;
      await this.#options.recorder?.attemptEnded(message, { startedAt, endedAt: now, error, retryAt });
      if (retryAt !== null) {
        await scheduleRetry(db.kysely, message, this.id, {
          at: retryAt,
          errorCode: error.code,
          errorMessage: error.message,
          notAttempted: error.notAttempted,
        });
        if (error.notAttempted) log.info({ code: error.code, retry_in_ms: retryAt - now }, 'handed back for another process to deliver');
        else log.info({ code: error.code, retry_in_ms: retryAt - now }, 'delivery attempt failed; will retry');
      } else {
        await settleMessage(db.kysely, message, this.id, { status: 'failed', at: now, errorCode: error.code, errorMessage: error.message });
        log.info({ code: error.code }, 'delivery failed');
      }
    } finally {
      clearInterval(renew);
    }
  }

  async #attempt(message: MessageRow): Promise<void> {
    const { secretBox, audio, adapterFor } = this.#options;
    if (!isPlatform(message.platform)) throw new DeliveryError('platform_error', `unknown platform ${message.platform}`, false);
    if (message.credentials === null) throw new DeliveryError('invalid_session', 'the session credentials are gone', false);
    const session = openCredentials(secretBox, message.credentials);
    const voice = await audio.prepare({
      url: message.audio_url,
      platform: message.platform,
      ...(message.duration !== null ? { durationHint: Number(message.duration) } : {}),
    });
    try {
      await this.#options.recorder?.audioPrepared(message, voice);
      await adapterFor(message.env === 'live' ? 'live' : 'test', message.platform).deliver({
        messageId: message.id,
        accountId: message.account_id,
        env: message.env === 'live' ? 'live' : 'test',
        platform: message.platform,
        recipient: message.recipient,
        session,
        caption: message.caption,
        audio: voice,
        attempt: message.attempts,
      });
    } finally {
      voice.release();
    }
  }
}
