import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Db } from '../store/db.js';
import { outcomeBatchOf } from '../store/outcome-batch.js';
import { scheduleRetry, settleMessage, type MessageRow, type Settlement } from '../store/messages.js';
import { inSavepoint } from '../store/savepoint.js';
import type { Database } from '../store/schema.js';
import { setSenderStatus, touchSender, type SenderChange } from '../store/senders.js';
import type { DeliveryError, FailureCode } from '../platforms/platform.js';
import { AUDIO_RETRY_WINDOW_MS, nextAttemptAt } from './retry-policy.js';
import { Deferral, type WaitReason } from './rhythm-gate.js';
import { senderOf } from './sender-gate.js';
import type { StorageWatch } from './storage-watch.js';
import type { RecordWrite } from './worker-options.js';

/** The outcome of an attempt: what it means for the message, and writing it (kept in memory while storage is away). */

export const AUDIO_CODES = new Set<FailureCode>(['audio_fetch_failed', 'audio_fetch_blocked', 'audio_too_large', 'audio_too_long', 'audio_unsupported']);

/** An outcome to write, with the record of the attempt that led to it; kept in memory while storage cannot take it. */
export type Outcome = (
  | { kind: 'settle'; settlement: Settlement }
  | { kind: 'retry'; delayMs: number; errorCode: FailureCode; errorMessage: string; notAttempted: boolean; waitReason?: WaitReason; reachedPlatform?: boolean }
) & { record?: RecordWrite | undefined; sender?: SenderChange | undefined; senderLabel?: string };

/** What a failed attempt means for its message, at database time `now`: a retry, or the end. */
export function outcomeOf(message: MessageRow, error: DeliveryError, now: number, log: Logger): Outcome {
  if (error instanceof Deferral) {
    log.info({ wait: error.reason, retry_in_ms: error.retryAfterMs }, 'waits in the queue');
    return { kind: 'retry', delayMs: error.retryAfterMs ?? 0, errorCode: error.code, errorMessage: error.message, notAttempted: true, waitReason: error.reason };
  }
  const attempts = error.notAttempted ? message.attempts - 1 : message.attempts;
  const retryAt = error.transient
    ? nextAttemptAt({
        attempts,
        // After a wait (a sender's cap, the indicator) the retry window counts from the wait's end.
        acceptedAt: Math.max(Number(message.created_at), Number(message.waited_until ?? 0)),
        now,
        retryAfterMs: error.retryAfterMs,
        ...(AUDIO_CODES.has(error.code) ? { windowMs: AUDIO_RETRY_WINDOW_MS } : {}),
      })
    : null;
  if (retryAt !== null) {
    if (error.notAttempted) log.info({ code: error.code, retry_in_ms: retryAt - now }, 'handed back for another process to deliver');
    else log.info({ code: error.code, retry_in_ms: retryAt - now }, 'delivery attempt failed; will retry');
    return { kind: 'retry', delayMs: retryAt - now, errorCode: error.code, errorMessage: error.message, notAttempted: error.notAttempted };
  }
  log.info({ code: error.code }, 'delivery failed');
  return { kind: 'settle', settlement: { status: 'failed', at: now, errorCode: error.code, errorMessage: error.message } };
}

/** The end of a message whose attempts keep ending without an outcome (the worker stopped or crashed each time). */
export function poisoned(message: MessageRow, now: number): Settlement {
  return {
    status: 'failed',
    at: now,
    errorCode: 'platform_error',
    errorMessage: `delivery was abandoned: ${Number(message.orphaned_claims ?? 0)} attempts in a row ended without an outcome (the worker stopped or crashed)`,
  };
}

/**
 * Writes outcomes, or keeps them in memory when storage cannot take them now; the kept ones are written
 * before the worker claims anything again.
 */
export class OutcomeWriter {
  readonly #pending = new Map<string, { message: MessageRow; outcome: Outcome }>();

  constructor(
    private readonly deps: {
      db: Db;
      workerId: string;
      logger: Logger;
      storage: StorageWatch;
      senderKind?: ((platform: string, senderKey: string) => string) | undefined;
      onDelivered?: (message: MessageRow) => void;
    },
  ) {}

  /** Outcomes waiting for storage to come back. */
  get pendingIds(): string[] {
    return [...this.#pending.keys()];
  }

  get pendingCount(): number {
    return this.#pending.size;
  }

  async write(message: MessageRow, log: Logger, outcome: Outcome): Promise<void> {
    try {
      const written = await this.#store(message, outcome);
      this.deps.storage.back();
      if (!written) log.warn('the message is no longer held by this worker; outcome not written');
      else if (outcome.kind === 'settle' && outcome.settlement.status === 'delivered') {
        log.info('delivered');
        this.deps.onDelivered?.(message);
      }
    } catch (err) {
      this.deps.storage.away(err, 'outcome');
      log.warn({ outcome: outcome.kind === 'settle' ? outcome.settlement.status : 'retry' }, 'outcome kept in memory until storage returns');
      this.#pending.set(message.id, { message, outcome });
    }
  }

  /** Writes the kept outcomes, oldest first; false when storage still does not take them. */
  async flushPending(): Promise<boolean> {
    const { logger, storage } = this.deps;
    for (const [id, { message, outcome }] of this.#pending) {
      let written: boolean;
      try {
        written = await this.#store(message, outcome);
      } catch (err) {
        storage.away(err, 'outcome');
        return false;
      }
      storage.back();
      this.#pending.delete(id);
      const log = logger.child({ message_id: id, attempt: message.attempts, request_id: message.request_id ?? undefined });
      if (!written) log.warn('kept outcome not written: another worker has taken the message since');
      else {
        log.info({ outcome: outcome.kind === 'settle' ? outcome.settlement.status : 'retry' }, 'kept outcome written');
        if (outcome.kind === 'settle' && outcome.settlement.status === 'delivered') this.deps.onDelivered?.(message);
      }
    }
    return true;
  }

  /**
   * Through the store's outcome batch (outcome-batch.ts): on SQLite, outcomes written together share one
   * transaction and one disk flush, each in a savepoint of its own; the promise
   * resolves only once the outcome is on disk, so a lease is never given up before its outcome is written.
   */
  async #store(message: MessageRow, outcome: Outcome): Promise<boolean> {
    const { db, workerId } = this.deps;
    return outcomeBatchOf(db).run(async (trx) => {
      const written =
        outcome.kind === 'settle'
          ? await settleMessage(trx, message, workerId, outcome.settlement)
          : await scheduleRetry(trx, message, workerId, {
              delayMs: outcome.delayMs,
              errorCode: outcome.errorCode,
              errorMessage: outcome.errorMessage,
              notAttempted: outcome.notAttempted,
              reachedPlatform: outcome.reachedPlatform === true,
              ...(outcome.waitReason ? { waitReason: outcome.waitReason } : {}),
            });
      // The attempt happened whoever holds the message now: its record is written either way.
      if (outcome.record) await this.#writeRecord(trx, message, outcome.record);
      await this.#writeSender(trx, message, outcome, written);
      return written;
    });
  }

  /**
   * The sender's record (store/senders.ts) with the outcome: a settled note costs one statement (the
   * record made on first use, the note counted); what the platform said of the sender, when it said
   * anything, is written in a savepoint (its failure leaves the outcome alone).
   */
  async #writeSender(trx: Kysely<Database>, message: MessageRow, outcome: Outcome, written: boolean): Promise<void> {
    const sender = senderOf(message);
    if (!sender) return;
    const kind = this.deps.senderKind?.(sender.platform, sender.senderKey) ?? sender.platform;
    if (written && outcome.kind === 'settle') {
      await touchSender(trx, sender, kind, { delivered: outcome.settlement.status === 'delivered', at: outcome.settlement.at, label: outcome.senderLabel ?? null });
    }
    const change = outcome.sender;
    if (!change) return;
    const set = await inSavepoint(trx, (t) => setSenderStatus(t, sender, change, { kind }));
    if (!set.ok) this.deps.logger.warn({ err: set.error, message_id: message.id }, "could not record the sender's status");
  }

  /** The attempt's record in the outcome's transaction, in a savepoint: a failure of the record leaves the outcome alone. */
  async #writeRecord(trx: Kysely<Database>, message: MessageRow, write: RecordWrite): Promise<void> {
    const written = await inSavepoint(trx, write);
    if (!written.ok) this.deps.logger.warn({ err: written.error, message_id: message.id }, 'could not record the attempt');
  }
}
