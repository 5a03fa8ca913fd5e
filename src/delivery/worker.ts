import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { lazyChild } from '../logger.js';
import { MAX_CLAIMS_WITHOUT_OUTCOME, msUntilNextDue, type MessageRow } from '../store/messages.js';
import { attemptWithLease, dbNow, ShuttingDown, type Job, type ResolvedWorkerOptions } from './attempt.js';
import { DOWNLOAD_IN_CONVERSION_SLOT_MS, MessageClaims } from './claim.js';
import { DueLoop, untilNextDue, type NextTurn } from './due-loop.js';
import { DEFAULT_ACCOUNT_SHARE_PERCENT } from './fair-share.js';
import { OutcomeWriter, poisoned } from './outcome.js';
import type { ClaimedRhythms } from './rhythm-gate.js';
import { readSenderHolds, type ClaimedSenders } from './sender-gate.js';
import { StorageWatch } from './storage-watch.js';
import { readSendWindows, type ClaimedWindows } from './window-gate.js';
import type { WorkerOptions } from './worker-options.js';

export type { AttemptRecord, AttemptRecorder, AudioSource, PreparedVoice, RecordWrite, WorkerOptions } from './worker-options.js';

/**
 * Whether the notes in hand whose audio is ready (`readyNotes` of `slots`) make a backlog that
 * conversions give way to (wait most of the time until it has gone): a quarter of the slots, rounded up.
 */
export function deliveriesWaitOnCpu(readyNotes: number, slots: number): boolean {
  return readyNotes >= Math.ceil(slots / 4);
}

/**
 * Claims due messages from the store, hands each to its platform and settles it. Runs inside `serve`
 * or alone as `voicenote worker`; any number of workers may share one database.
 *
 * The loop (due-loop.ts), the claim (claim.ts), the attempt (attempt.ts) and its outcome (outcome.ts)
 * each live in their own module; this class wires them.
 *
 * Storage being away never ends the process: an outcome that cannot be written is kept in memory and
 * written before this worker claims anything again; claims pause until storage answers.
 */
export class DeliveryWorker {
  readonly id = `worker_${randomUUID()}`;
  readonly #options: ResolvedWorkerOptions;
  /** Attempts in hand, by message id (their promises are the loop's work in flight). */
  readonly #jobs = new Map<string, Job>();
  /** Messages in hand whose audio is ready: their platform call is what is left. */
  readonly #audioReady = new Set<string>();
  readonly #storage: StorageWatch;
  readonly #claims: MessageClaims;
  readonly #outcomes: OutcomeWriter;
  readonly #loop: DueLoop;

  constructor(options: WorkerOptions) {
    this.#options = { concurrency: 8, leaseMs: 120_000, pollMs: 1_000, clock: Date.now, accountSharePercent: DEFAULT_ACCOUNT_SHARE_PERCENT, ...options };
    const { db, logger, concurrency, accountSharePercent, leaseMs, pollMs, affinityHolder, clock, conversionSlots } = this.#options;
    this.#storage = new StorageWatch(logger);
    // A note whose audio this process has not had ready lately may wait seconds for a conversion.
    const mayConvert = (m: { platform: string; audio_url: string }): boolean => {
      const target = this.#options.audioTargetFor(m.platform);
      return target !== undefined && this.#options.audio.isReady?.(m.audio_url, target) === false;
    };
    this.#claims = new MessageClaims({
      db,
      workerId: this.id,
      concurrency,
      accountSharePercent,
      leaseMs,
      pollMs,
      clock,
      ...(affinityHolder !== undefined ? { affinityHolder } : {}),
      ...(conversionSlots !== undefined && conversionSlots < concurrency ? { conversionSlots, mayConvert } : {}),
    });
    this.#outcomes = new OutcomeWriter({
      db,
      workerId: this.id,
      logger,
      storage: this.#storage,
      senderKind: this.#options.senderKind?.bind(this.#options),
      ...(options.onDelivered ? { onDelivered: options.onDelivered } : {}),
    });
    this.#loop = new DueLoop({
      pollMs,
      turn: () => this.#turn(),
      // Nothing in a turn should throw; if something does, the loop must live on.
      onError: (err) => logger.error({ err }, 'delivery loop error'),
    });
  }

  #stopGivingWay: () => void = () => undefined;

  start(): void {
    const { concurrency } = this.#options;
    this.#stopGivingWay = this.#options.audio.giveWayWhile?.(() => deliveriesWaitOnCpu(this.#audioReady.size, concurrency)) ?? (() => undefined);
    this.#loop.start();
  }

  /** A message was just accepted in this process: look at the queue now rather than at the next poll. */
  wake(): void {
    this.#claims.newWork();
    this.#loop.nudge();
  }

  /** Outcomes waiting for storage to come back (0 when every outcome is written). */
  get pendingOutcomes(): number {
    return this.#outcomes.pendingCount;
  }

  /**
   * Stops claiming and lets messages in hand finish for up to `graceMs`. Attempts still running then are
   * aborted (download, conversion, platform call) and each writes its own "try again" outcome, which
   * hands its message back. A lease is never handed back while its attempt may still reach a platform:
   * an attempt that does not stop within `abortWaitMs` keeps its lease, to run out.
   */
  async stop(graceMs = 10_000, abortWaitMs = 5_000): Promise<void> {
    this.#stopGivingWay();
    if (!this.#loop.running) return;
    await this.#loop.stop(graceMs);
    if (this.#jobs.size > 0) {
      for (const job of this.#jobs.values()) job.controller.abort(new ShuttingDown());
      await this.#loop.settleWithin(abortWaitMs);
    }
    if (this.#outcomes.pendingCount > 0) await this.#outcomes.flushPending();
    const { logger } = this.#options;
    if (this.#jobs.size > 0) {
      logger.warn({ messages: [...this.#jobs.keys()] }, 'attempts did not stop in time; their leases are left to run out');
    }
    if (this.#outcomes.pendingCount > 0) {
      logger.warn({ messages: this.#outcomes.pendingIds }, 'outcomes could not be written before shutdown; those messages are taken again once their leases run out');
    }
  }

  /** One turn of the loop: kept outcomes written first, then what is due claimed and started. */
  async #turn(): Promise<NextTurn> {
    const { concurrency, leaseMs, pollMs, affinityHolder, db } = this.#options;
    // What this worker already did is written before it takes more work.
    if (this.#outcomes.pendingCount > 0 && !(await this.#outcomes.flushPending())) return { next: 'pause', ms: pollMs };
    let claimed: MessageRow[] = [];
    // Notes waiting for their audio hold conversion slots of their own, not these.
    const delivering = this.#jobs.size - this.#claims.waitingForAudio;
    const free = concurrency - delivering;
    const batch = this.#claims.batch(delivering);
    if (this.#claims.due(free, batch)) {
      let claimedAt: number;
      try {
        ({ claimed, claimedAt } = await this.#claims.claim(free));
        this.#storage.back();
      } catch (err) {
        this.#storage.away(err, 'claim');
        return { next: 'pause', ms: pollMs };
      }
      // Side by side: on PostgreSQL each is a round trip, and the next claim waits for this turn.
      const [rhythms, senders, windows] = await Promise.all([this.#readAhead(claimed), this.#readSenders(claimed), this.#readWindows(claimed)]);
      for (const message of claimed) {
        const dbClaimedAt = Number(message.updated_at);
        const job: Job = { message, controller: new AbortController(), dbClaimedAt, claimedAt, leaseUntil: dbClaimedAt + leaseMs, reachedPlatform: false, rhythms, senders, windows };
        // A conversion slot freed: a note left queued for the lack of one may be claimed now.
        // A download still running after a moment leaves its conversion slot for one of its account's.
        const slowDownload = this.#claims.holdsConversionSlot(message.id)
          ? setTimeout(() => {
              if (this.#claims.downloadIsSlow(message)) this.#loop.nudge();
            }, DOWNLOAD_IN_CONVERSION_SLOT_MS)
          : undefined;
        job.audioFetched = () => clearTimeout(slowDownload);
        job.audioSettled = () => {
          clearTimeout(slowDownload);
          this.#audioReady.add(message.id);
          if (this.#claims.audioSettled(message)) this.#loop.nudge();
        };
        this.#jobs.set(message.id, job);
        const done = this.#handle(job).finally(() => {
          clearTimeout(slowDownload);
          this.#jobs.delete(message.id);
          this.#audioReady.delete(message.id);
          this.#claims.release(message, claimedAt);
        });
        this.#loop.track(message.id, done);
      }
    }
    if (claimed.length > 0 && claimed.length === free) return { next: 'again' };
    // Slots in use: the end of a message wakes this loop. Otherwise sleep until the next message is due.
    // Accounts at their cap: look again then, or when new work falls due before that (it may be another's).
    const cappedWait = this.#claims.cappedWaitMs();
    if (cappedWait !== undefined) {
      const ms = await untilNextDue(() => msUntilNextDue(db.kysely, { ...(affinityHolder !== undefined ? { affinityHolder } : {}), later: true }), cappedWait);
      if (ms < cappedWait) this.#claims.newWorkDueIn(ms);
      return { next: 'sleep', ms };
    }
    if (free < batch) return { next: 'sleep', ms: pollMs };
    const ms = await untilNextDue(() => msUntilNextDue(db.kysely, affinityHolder !== undefined ? { affinityHolder } : {}), pollMs);
    return { next: 'sleep', ms };
  }

  /** The claim's rhythms in one read; none when it fails (each message then reads its own, and fails as it would). */
  async #readAhead(claimed: readonly MessageRow[]): Promise<ClaimedRhythms | undefined> {
    const { gate, logger } = this.#options;
    if (!gate || claimed.length === 0) return undefined;
    try {
      return await gate.readAhead(claimed);
    } catch (err) {
      logger.debug({ err }, 'could not read the rhythms ahead');
      return undefined;
    }
  }

  /** The claim's senders that are not `ok`, in one read; none when it fails (their notes go as they would). */
  async #readSenders(claimed: readonly MessageRow[]): Promise<ClaimedSenders | undefined> {
    if (!claimed.some((m) => m.sender_key)) return undefined;
    try {
      return await readSenderHolds(this.#options.db.kysely, claimed);
    } catch (err) {
      this.#options.logger.debug({ err }, "could not read the senders' statuses ahead");
      return undefined;
    }
  }

  /** The send windows of the claim's accounts, in one read; none when it fails (each message then reads its own). */
  async #readWindows(claimed: readonly MessageRow[]): Promise<ClaimedWindows | undefined> {
    if (claimed.length === 0) return undefined;
    try {
      return await readSendWindows(this.#options.db.kysely, claimed);
    } catch (err) {
      this.#options.logger.debug({ err }, 'could not read the send windows ahead');
      return undefined;
    }
  }

  async #handle(job: Job): Promise<void> {
    const { message } = job;
    const { logger, clock } = this.#options;
    const log: Logger = lazyChild(logger, { message_id: message.id, attempt: message.attempts, request_id: message.request_id ?? undefined });
    try {
      if (Number(message.orphaned_claims ?? 0) >= MAX_CLAIMS_WITHOUT_OUTCOME) {
        log.warn({ claims: message.orphaned_claims }, 'attempts keep ending without an outcome; failing the message');
        await this.#outcomes.write(message, log, { kind: 'settle', settlement: poisoned(message, dbNow(job, clock)) });
        return;
      }
      const outcome = await attemptWithLease({ options: this.#options, workerId: this.id, storage: this.#storage }, job, log);
      if (outcome === undefined) return;
      await this.#outcomes.write(message, log, outcome);
    } catch (err) {
      log.error({ err }, 'unexpected error while handling a message; its lease is left to run out');
    }
  }
}
