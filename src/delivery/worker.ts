import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AudioTarget } from '../audio/targets.js';
import { localSampleFor } from '../audio/samples.js';
import type { SecretBox } from '../core/secret-box.js';
import type { Kysely } from 'kysely';
import type { Db } from '../store/db.js';
import { outcomeBatchOf } from '../store/outcome-batch.js';
import { inSavepoint } from '../store/savepoint.js';
import type { Database } from '../store/schema.js';
import {
  claimDueMessagesFairly,
  extendLease,
  MAX_CLAIMS_WITHOUT_OUTCOME,
  msUntilNextDue,
  scheduleRetry,
  settleMessage,
  type MessageRow,
  type Settlement,
} from '../store/messages.js';
import { DeliveryError, type FailureCode, type PlatformAdapter, type PlatformSession, type VoiceFile } from '../platforms/platform.js';
import { AUDIO_RETRY_WINDOW_MS, nextAttemptAt } from './retry-policy.js';
import type { AudioFacts } from '../audio/pipeline.js';
import { accountCap, atCap, DEFAULT_ACCOUNT_SHARE_PERCENT, pickFairly } from './fair-share.js';
import { Deferral, type DeliveryGate, type WaitReason } from './rhythm-gate.js';

/** Turns an audio URL into the platform's voice format (the audio pipeline). */
export interface AudioSource {
  prepare(input: {
    url: string;
    target: AudioTarget;
    durationHint?: number;
    /** Stops the download and the conversion of this request. */
    signal?: AbortSignal;
    /** A shipped sample read instead of downloading `url` (sandbox only). */
    localSource?: string;
  }): Promise<PreparedVoice>;
}

/** `facts` (source as detected, cache key) is what the message log keeps of the audio. */
export type PreparedVoice = VoiceFile & { release(): void; facts?: AudioFacts };

export interface WorkerOptions {
  db: Db;
  secretBox: SecretBox;
  audio: AudioSource;
  /** The adapter for a message's environment and platform. */
  adapterFor(env: 'test' | 'live', platform: string): PlatformAdapter;
  /** The voice format and limits of a platform; undefined for a platform this build does not have. */
  audioTargetFor(platform: string): AudioTarget | undefined;
  logger: Logger;
  /** Messages handled at once by this process. */
  concurrency?: number;
  /**
   * The most of those slots one account may hold, in percent (WORKER_ACCOUNT_SHARE): the rest stays free
   * for other accounts (fair-share.ts).
   */
  accountSharePercent?: number;
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
  /**
   * This process's clock (tests skew it). Only differences of it are used: every time stored or
   * compared is the database's.
   */
  clock?: () => number;
  /** Sending like a person: each sender's daily cap and the "recording…" indicator, around the platform call. */
  gate?: DeliveryGate;
}

/** What the message log keeps of an attempt; `error` null when the platform accepted the voice note. */
export interface AttemptRecord {
  startedAt: number;
  endedAt: number;
  error: DeliveryError | null;
  /** When it is tried again; null when the attempt settled the message. */
  retryAt: number | null;
}

/** Writes one attempt's record in the transaction it is given; throws when it cannot. */
export type RecordWrite = (trx: Kysely<Database>) => Promise<void>;

export interface AttemptRecorder {
  audioPrepared(message: MessageRow, audio: PreparedVoice): Promise<void>;
  /**
   * An attempt ended (called once per attempt): the write of its record, which the worker runs in the
   * transaction that writes the attempt's outcome, in a savepoint of its own. So the record commits with
   * the outcome (one transaction and one flush instead of two), and one that cannot be written is
   * logged and dropped while the outcome stands.
   */
  attemptEnded(message: MessageRow, attempt: AttemptRecord): RecordWrite | undefined;
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

/** Due messages the fair claim reads to choose from: four per free slot, within these bounds. */
const MIN_CLAIM_WINDOW = 64;
const MAX_CLAIM_WINDOW = 512;
/** While accounts at their cap leave slots free: how often to look for other accounts' work anyway. */
const CAPPED_LOOK_MS = 200;
/**
 * The same after a message was accepted in this process: soon, but not once per accepted send (a bulk
 * sender at its cap would otherwise cost a read past its whole backlog per send it makes).
 */
const CAPPED_NEW_WORK_MS = 20;

/** Why an attempt was stopped from outside. */
class LeaseLost extends Error {
  constructor() {
    super('the lease on this message is gone (another worker holds it, or it was settled)');
    this.name = 'LeaseLost';
  }
}
class ShuttingDown extends Error {
  constructor() {
    super('the worker is shutting down');
    this.name = 'ShuttingDown';
  }
}

/** An outcome to write, with the record of the attempt that led to it; kept in memory while storage cannot take it. */
type Outcome = (
  | { kind: 'settle'; settlement: Settlement }
  | { kind: 'retry'; delayMs: number; errorCode: FailureCode; errorMessage: string; notAttempted: boolean; waitReason?: WaitReason }
) & { record?: RecordWrite | undefined };

interface PendingOutcome {
  message: MessageRow;
  outcome: Outcome;
}

interface Job {
  message: MessageRow;
  controller: AbortController;
  /** The database's clock at the claim, and this process's clock then: together, the database's time now. */
  dbClaimedAt: number;
  claimedAt: number;
  /** Database time until which the lease is known to hold. */
  leaseUntil: number;
  /** The platform may have been reached: an outcome is no longer "not attempted". */
  reachedPlatform: boolean;
}

/**
 * Claims due messages from the store, hands each to its platform and settles it. Runs inside `serve`
 * or alone as `voicenote worker`; any number of workers may share one database.
 *
 * Storage being away never ends the process: an outcome that cannot be written is kept in memory and
 * written before this worker claims anything again; claims pause until storage answers.
 */
export class DeliveryWorker {
  readonly id = `worker_${randomUUID()}`;
  readonly #options: Required<Pick<WorkerOptions, 'concurrency' | 'leaseMs' | 'pollMs' | 'clock' | 'accountSharePercent'>> & WorkerOptions;
  readonly #inFlight = new Map<string, { job: Job; done: Promise<void> }>();
  /** Messages in hand per account: what the fair claim weighs (fair-share.ts). */
  readonly #inHand = new Map<string, number>();
  readonly #pending = new Map<string, PendingOutcome>();
  #running = false;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #wakeRequested = false;
  #storageDown = false;
  /** The last claim got all it asked for: more messages are due than this worker has slots. */
  #backlog = false;
  /**
   * The last claim left slots free while due messages may wait: their accounts hold their cap here. Until
   * a batch of slots frees, CAPPED_NEW_WORK_MS pass after a message is accepted in this process, or
   * CAPPED_LOOK_MS pass, claiming again would find the same (and read past the capped accounts' messages
   * for nothing).
   */
  #capped: { at: number; free: number } | undefined;
  /** wake() was called since the last claim: new work may be there. */
  #newWork = false;

  constructor(options: WorkerOptions) {
    this.#options = { concurrency: 8, leaseMs: 120_000, pollMs: 1_000, clock: Date.now, accountSharePercent: DEFAULT_ACCOUNT_SHARE_PERCENT, ...options };
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /** A message was just accepted in this process: look at the queue now rather than at the next poll. */
  wake(): void {
    this.#newWork = true;
    this.#nudge();
  }

  /** Lets the loop look again (a slot freed). */
  #nudge(): void {
    this.#wakeRequested = true;
    this.#wake?.();
  }

  /** Outcomes waiting for storage to come back (0 when every outcome is written). */
  get pendingOutcomes(): number {
    return this.#pending.size;
  }

  /**
   * Stops claiming and lets messages in hand finish for up to `graceMs`. Attempts still running then are
   * aborted (download, conversion, platform call) and each writes its own "try again" outcome, which
   * hands its message back. A lease is never handed back while its attempt may still reach a platform:
   * an attempt that does not stop within `abortWaitMs` keeps its lease, to run out.
   */
  async stop(graceMs = 10_000, abortWaitMs = 5_000): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    this.#wake?.();
    await this.#loop;
    await this.#settleWithin(graceMs);
    if (this.#inFlight.size > 0) {
      for (const { job } of this.#inFlight.values()) job.controller.abort(new ShuttingDown());
      await this.#settleWithin(abortWaitMs);
    }
    if (this.#pending.size > 0) await this.#flushPending();
    const { logger } = this.#options;
    if (this.#inFlight.size > 0) {
      logger.warn({ messages: [...this.#inFlight.keys()] }, 'attempts did not stop in time; their leases are left to run out');
    }
    if (this.#pending.size > 0) {
      logger.warn({ messages: [...this.#pending.keys()] }, 'outcomes could not be written before shutdown; those messages are taken again once their leases run out');
    }
  }

  async #settleWithin(ms: number): Promise<void> {
    if (this.#inFlight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.#inFlight.values()].map((f) => f.done)),
      new Promise((resolve) => (timer = setTimeout(resolve, ms))),
    ]);
    clearTimeout(timer);
  }

  #storageAway(err: unknown, what: string): void {
    if (this.#storageDown) return;
    this.#storageDown = true;
    this.#options.logger.warn({ err }, `storage is not answering (${what}); claims pause and outcomes are kept until it returns`);
  }

  #storageBack(): void {
    if (!this.#storageDown) return;
    this.#storageDown = false;
    this.#options.logger.info('storage answers again; claiming resumes');
  }

  async #run(): Promise<void> {
    const { db, concurrency, leaseMs, pollMs, affinityHolder, clock, logger, accountSharePercent } = this.#options;
    const hardCap = accountCap(concurrency, accountSharePercent);
    const cappedLookMs = Math.min(pollMs, CAPPED_LOOK_MS);
    while (this.#running) {
      try {
        // Reset on every turn, whatever happens below: a wake left pending would make #sleep return at
        // once and spin this loop on microtasks, starving timers and the very jobs whose end would free
        // a slot.
        this.#wakeRequested = false;
        // What this worker already did is written before it takes more work.
        if (this.#pending.size > 0 && !(await this.#flushPending())) {
          await this.#pause(pollMs);
          continue;
        }
        let claimed: MessageRow[] = [];
        const free = concurrency - this.#inFlight.size;
        // With a backlog, every finished message would free one slot and cost one claim statement (a
        // scan of the due index and a write): wait until a quarter of the slots are free and claim them
        // in one statement. Without one, claim at once (a new message should not wait for others).
        const claimBatch = this.#backlog && this.#inFlight.size > 0 ? Math.ceil(concurrency / 4) : 1;
        const capped = this.#capped;
        const claimNow = capped
          ? free >= capped.free + claimBatch || clock() - capped.at >= (this.#newWork ? CAPPED_NEW_WORK_MS : cappedLookMs)
          : free >= claimBatch;
        if (claimNow && free > 0) {
          const claimedAt = clock();
          const excluded = atCap(this.#inHand, hardCap);
          this.#newWork = false;
          let leftBehind: boolean;
          try {
            ({ claimed, leftBehind } = await claimDueMessagesFairly(db.kysely, db.dialect, this.id, {
              limit: free,
              leaseMs,
              ...(affinityHolder !== undefined ? { affinityHolder } : {}),
              excludeAccounts: excluded,
              window: Math.min(MAX_CLAIM_WINDOW, Math.max(MIN_CLAIM_WINDOW, free * 4)),
              pick: (candidates) =>
                pickFairly(
                  candidates.map((c) => ({ id: c.id, account: c.account_id, sender: c.sender })),
                  { limit: free, slots: concurrency, hardCap, inHand: this.#inHand },
                ),
            }));
            this.#storageBack();
          } catch (err) {
            this.#storageAway(err, 'claim');
            await this.#pause(pollMs);
            continue;
          }
          this.#capped = claimed.length < free && (leftBehind || excluded.length > 0) ? { at: claimedAt, free: free - claimed.length } : undefined;
          this.#backlog = claimed.length === free || this.#capped !== undefined;
          for (const message of claimed) {
            const dbClaimedAt = Number(message.updated_at);
            const job: Job = {
              message,
              controller: new AbortController(),
              dbClaimedAt,
              claimedAt,
              leaseUntil: dbClaimedAt + leaseMs,
              reachedPlatform: false,
            };
            const done = this.#handle(job).finally(() => {
              this.#inFlight.delete(message.id);
              const held = (this.#inHand.get(message.account_id) ?? 1) - 1;
              if (held > 0) this.#inHand.set(message.account_id, held);
              else this.#inHand.delete(message.account_id);
              this.#nudge();
            });
            this.#inFlight.set(message.id, { job, done });
            this.#inHand.set(message.account_id, (this.#inHand.get(message.account_id) ?? 0) + 1);
          }
        }
        if (claimed.length > 0 && claimed.length === free) continue;
        // Slots in use: the end of a message wakes this loop. Otherwise sleep until the next message is due.
        if (this.#capped) await this.#sleep(Math.max(1, (this.#newWork ? CAPPED_NEW_WORK_MS : cappedLookMs) - (clock() - this.#capped.at)));
        else await this.#sleep(free >= claimBatch ? await this.#untilNextDue(pollMs) : pollMs);
      } catch (err) {
        // Nothing above should throw; if something does, the loop must live on.
        logger.error({ err }, 'delivery loop error');
        await this.#pause(pollMs);
      }
    }
  }

  async #untilNextDue(pollMs: number): Promise<number> {
    try {
      const { db, affinityHolder } = this.#options;
      const wait = await msUntilNextDue(db.kysely, affinityHolder !== undefined ? { affinityHolder } : {});
      return wait === undefined ? pollMs : Math.min(pollMs, Math.max(wait, 5));
    } catch {
      return pollMs;
    }
  }

  /** While storage is away: a real wait (wakes do not cut it short), ended early only by stop(). */
  #pause(ms: number): Promise<void> {
    if (!this.#running) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = () => {
        if (!this.#running) done();
      };
    });
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

  /** The database's time now, from the claim's and this process's elapsed time. */
  #dbNow(job: Job): number {
    return job.dbClaimedAt + (this.#options.clock() - job.claimedAt);
  }

  async #handle(job: Job): Promise<void> {
    const { message } = job;
    const { logger } = this.#options;
    const log = logger.child({ message_id: message.id, attempt: message.attempts, request_id: message.request_id ?? undefined });
    try {
      if (Number(message.orphaned_claims ?? 0) >= MAX_CLAIMS_WITHOUT_OUTCOME) {
        log.warn({ claims: message.orphaned_claims }, 'attempts keep ending without an outcome; failing the message');
        await this.#write(job, log, { kind: 'settle', settlement: this.#poison(job) });
        return;
      }
      const outcome = await this.#attemptWithLease(job, log);
      if (outcome === undefined) return;
      await this.#write(job, log, outcome);
    } catch (err) {
      log.error({ err }, 'unexpected error while handling a message; its lease is left to run out');
    }
  }

  #poison(job: Job): Settlement {
    return {
      status: 'failed',
      at: this.#dbNow(job),
      errorCode: 'platform_error',
      errorMessage: `delivery was abandoned: ${Number(job.message.orphaned_claims ?? 0)} attempts in a row ended without an outcome (the worker stopped or crashed)`,
    };
  }

  /** Runs the attempt while renewing its lease; undefined when the lease was lost (nothing to write). */
  async #attemptWithLease(job: Job, log: Logger): Promise<Outcome | undefined> {
    const { db, leaseMs, clock } = this.#options;
    const { message, controller } = job;
    // A long upload must not look like a dead worker: renew the lease while the job runs. A renewal that
    // matches no row means another worker holds the message now: stop at once.
    const renew = setInterval(() => {
      const before = clock();
      extendLease(db.kysely, message.id, this.id, leaseMs).then(
        (held) => {
          if (held) job.leaseUntil = job.dbClaimedAt + (before - job.claimedAt) + leaseMs;
          else controller.abort(new LeaseLost());
        },
        (err: unknown) => {
          log.warn({ err }, 'could not renew lease');
          // Storage is away: once the lease may have run out, another worker may take the message when
          // storage returns; an attempt that has not reached the platform yet must not start now.
          if (this.#dbNow(job) >= job.leaseUntil && !job.reachedPlatform) controller.abort(new LeaseLost());
        },
      );
    }, Math.max(leaseMs / 3, 10));
    const startedAt = Date.now();
    try {
      await this.#attempt(job);
      const record = this.#record(job, { startedAt, endedAt: Date.now(), error: null, retryAt: null });
      return { kind: 'settle', settlement: { status: 'delivered', at: this.#dbNow(job) }, record };
    } catch (thrown) {
      const reason: unknown = controller.signal.aborted ? controller.signal.reason : undefined;
      if (reason instanceof LeaseLost || thrown instanceof LeaseLost) {
        log.warn('lease lost; the attempt was stopped and the message is left to its new holder');
        return undefined;
      }
      if (reason instanceof ShuttingDown) {
        log.info({ reached_platform: job.reachedPlatform }, 'attempt stopped by shutdown; handing the message back');
        return {
          kind: 'retry',
          delayMs: 0,
          errorCode: 'platform_error',
          errorMessage: 'the attempt was interrupted by a shutdown',
          notAttempted: !job.reachedPlatform,
        };
      }
      const error = asDeliveryError(thrown);
      const outcome = this.#outcomeOf(job, error, log);
      const endedAt = Date.now();
      // A wait (a sender's cap, the indicator) is not an attempt: the message shows what it waits for instead.
      if (error instanceof Deferral) return outcome;
      const record = this.#record(job, { startedAt, endedAt, error, retryAt: outcome.kind === 'retry' ? endedAt + outcome.delayMs : null });
      return { ...outcome, record };
    } finally {
      clearInterval(renew);
    }
  }

  /** Tells the message log; the write of its record (its failures are its own: delivery goes on). */
  #record(job: Job, attempt: AttemptRecord): RecordWrite | undefined {
    try {
      return this.#options.recorder?.attemptEnded(job.message, attempt);
    } catch (err) {
      this.#options.logger.warn({ err }, 'could not record the attempt');
      return undefined;
    }
  }

  /** The attempt's record in the outcome's transaction, in a savepoint: a failure of the record leaves the outcome alone. */
  async #writeRecord(trx: Kysely<Database>, message: MessageRow, write: RecordWrite): Promise<void> {
    const written = await inSavepoint(trx, write);
    if (!written.ok) this.#options.logger.warn({ err: written.error, message_id: message.id }, 'could not record the attempt');
  }

  #outcomeOf(job: Job, error: DeliveryError, log: Logger): Outcome {
    const { message } = job;
    const now = this.#dbNow(job);
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

  /** Writes an outcome, or keeps it for later when storage cannot take it now. */
  async #write(job: Job, log: Logger, outcome: Outcome): Promise<void> {
    try {
      const written = await this.#store(job.message, outcome);
      this.#storageBack();
      if (!written) log.warn('the message is no longer held by this worker; outcome not written');
      else if (outcome.kind === 'settle' && outcome.settlement.status === 'delivered') log.info('delivered');
    } catch (err) {
      this.#storageAway(err, 'outcome');
      log.warn({ outcome: outcome.kind === 'settle' ? outcome.settlement.status : 'retry' }, 'outcome kept in memory until storage returns');
      this.#pending.set(job.message.id, { message: job.message, outcome });
    }
  }

  /**
   * Through the store's outcome batch (outcome-batch.ts): on SQLite, outcomes written together share one
   * transaction and one disk flush, each in a savepoint of its own; the promise
   * resolves only once the outcome is on disk, so a lease is never given up before its outcome is written.
   */
  async #store(message: MessageRow, outcome: Outcome): Promise<boolean> {
    return outcomeBatchOf(this.#options.db).run(async (trx) => {
      const written =
        outcome.kind === 'settle'
          ? await settleMessage(trx, message, this.id, outcome.settlement)
          : await scheduleRetry(trx, message, this.id, {
              delayMs: outcome.delayMs,
              errorCode: outcome.errorCode,
              errorMessage: outcome.errorMessage,
              notAttempted: outcome.notAttempted,
              ...(outcome.waitReason ? { waitReason: outcome.waitReason } : {}),
            });
      // The attempt happened whoever holds the message now: its record is written either way.
      if (outcome.record) await this.#writeRecord(trx, message, outcome.record);
      return written;
    });
  }

  /** Writes the kept outcomes, oldest first; false when storage still does not take them. */
  async #flushPending(): Promise<boolean> {
    const { logger } = this.#options;
    for (const [id, { message, outcome }] of this.#pending) {
      let written: boolean;
      try {
        written = await this.#store(message, outcome);
      } catch (err) {
        this.#storageAway(err, 'outcome');
        return false;
      }
      this.#storageBack();
      this.#pending.delete(id);
      const log = logger.child({ message_id: id, attempt: message.attempts, request_id: message.request_id ?? undefined });
      if (!written) log.warn('kept outcome not written: another worker has taken the message since');
      else log.info({ outcome: outcome.kind === 'settle' ? outcome.settlement.status : 'retry' }, 'kept outcome written');
    }
    return true;
  }

  async #attempt(job: Job): Promise<void> {
    const { secretBox, audio, adapterFor, db, leaseMs } = this.#options;
    const { message, controller } = job;
    const signal = controller.signal;
    const target = this.#options.audioTargetFor(message.platform);
    if (!target) throw new DeliveryError('platform_error', `unknown platform ${message.platform}`, false);
    if (message.credentials === null) throw new DeliveryError('invalid_session', 'the session credentials are gone', false);
    const session = openCredentials(secretBox, message.credentials);
    // A sandbox send of the service's own sample on a private address reads the shipped copy.
    const sample = message.env === 'live' ? null : localSampleFor(message.audio_url);
    const voice = await audio.prepare({
      url: message.audio_url,
      target,
      ...(sample !== null ? { localSource: sample } : {}),
      ...(message.duration !== null ? { durationHint: Number(message.duration) } : {}),
      signal,
    });
    try {
      await this.#options.recorder?.audioPrepared(message, voice).catch((err: unknown) => this.#options.logger.warn({ err }, 'could not record the audio'));
      // The lease is a promise: it must hold when the platform call, which cannot be taken back, starts.
      // Only its running out lets another worker take the message (nothing else writes over a lease),
      // and the worker knows on the database's clock until when it holds: while more than half of it is
      // left, confirming it would cost a write per message for nothing. Otherwise (a slow download or
      // conversion, or storage known to be away) it is renewed here, and a lost one stops the attempt.
      signal.throwIfAborted();
      if (this.#storageDown || job.leaseUntil - this.#dbNow(job) < leaseMs / 2) {
        const before = this.#options.clock();
        let held: boolean;
        try {
          held = await extendLease(db.kysely, message.id, this.id, leaseMs);
        } catch {
          throw new DeliveryError('platform_error', 'storage did not answer before the platform call; not attempted', true, undefined, { notAttempted: true });
        }
        if (!held) throw new LeaseLost();
        job.leaseUntil = job.dbClaimedAt + (before - job.claimedAt) + leaseMs;
        signal.throwIfAborted();
      }
      job.reachedPlatform = true;
      const adapter = adapterFor(message.env === 'live' ? 'live' : 'test', message.platform);
      const deliveryJob = {
        messageId: message.id,
        accountId: message.account_id,
        env: message.env === 'live' ? ('live' as const) : ('test' as const),
        platform: message.platform,
        recipient: message.recipient,
        session,
        caption: message.caption,
        audio: voice,
        attempt: message.attempts,
        signal,
      };
      if (this.#options.gate) await this.#options.gate.deliver({ message, workerId: this.id, job: deliveryJob, adapter });
      else await adapter.deliver(deliveryJob);
    } finally {
      voice.release();
    }
  }
}
