import type { Db } from '../store/db.js';
import { claimDueMessagesFairly, type MessageRow } from '../store/messages.js';
import { AccountSlots, pickFairly } from './fair-share.js';

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
/**
 * How often a claim also looks for messages whose lease ran out (their worker died: rare). Not at every
 * claim: on PostgreSQL that look is a round trip of its own. Such a message waits at most this much longer
 * than its lease and grace (minutes).
 */
const EXPIRED_LEASES_EVERY_MS = 1_000;

/**
 * How many conversion slots a worker with `slots` delivery slots has, with `conversions` run at once:
 * each running conversion and one more downloading or waiting its turn, and at least a quarter of
 * `slots` (such a note's download holds its slot too, as long as its audio host takes to answer).
 */
export function conversionSlotsFor(slots: number, conversions: number): number {
  return Math.min(slots, Math.max(2 * conversions, Math.ceil(slots / 4)));
}

export interface ClaimSettings {
  db: Db;
  workerId: string;
  concurrency: number;
  accountSharePercent: number;
  leaseMs: number;
  pollMs: number;
  affinityHolder?: string;
  clock: () => number;
  /** Slots of their own for notes whose audio may need converting (see WorkerOptions.conversionSlots). */
  conversionSlots?: number;
  /** Whether a note's audio may need converting (not known to be ready). */
  mayConvert?: (message: { platform: string; audio_url: string }) => boolean;
}

/**
 * The worker's claims: when to claim (in batches while there is a backlog, not while the accounts with
 * due work hold their cap here) and what (fairly across accounts and senders: fair-share.ts).
 */
export class MessageClaims {
  readonly #settings: ClaimSettings;
  /** Messages in hand per account, and the most each may hold: what the fair claim weighs. */
  readonly #slots: AccountSlots;
  readonly #cappedLookMs: number;
  /** The last claim got all it asked for: more messages are due than this worker has slots. */
  #backlog = false;
  /**
   * The last claim left slots free while due messages may wait: their accounts hold their cap here. Until
   * a batch of slots frees, CAPPED_NEW_WORK_MS pass after a message is accepted in this process, or
   * CAPPED_LOOK_MS pass, claiming again would find the same (and read past the capped accounts' messages
   * for nothing).
   */
  #capped: { at: number; free: number } | undefined;
  /** New work was announced since the last claim. */
  #newWork = false;
  /** When queued work not due at the last claim falls due (this process's clock): new work from then on. */
  #newWorkDueAt: number | undefined;
  /** When the last claim looked for messages whose lease ran out (this process's clock). */
  #expiredLookAt = Number.NEGATIVE_INFINITY;
  /** Messages in hand claimed as "may need converting" whose audio is not ready yet. */
  readonly #converting = new Set<string>();

  constructor(settings: ClaimSettings) {
    this.#settings = settings;
    this.#slots = new AccountSlots(settings.concurrency, settings.accountSharePercent, settings.clock);
    this.#cappedLookMs = Math.min(settings.pollMs, CAPPED_LOOK_MS);
  }

  newWork(): void {
    this.#newWork = true;
  }

  /** Queued work falls due in `ms`: from then on it counts as new work (a capped claim looks at once). */
  newWorkDueIn(ms: number): void {
    this.#newWorkDueAt = this.#settings.clock() + ms;
  }

  #hasNewWork(): boolean {
    return this.#newWork || (this.#newWorkDueAt !== undefined && this.#settings.clock() >= this.#newWorkDueAt);
  }

  /** How many slots must be free before a claim: with a backlog, a quarter of them (one statement for many). */
  batch(inFlight: number): number {
    // With a backlog, every finished message would free one slot and cost one claim statement (a
    // scan of the due index and a write): wait until a quarter of the slots are free and claim them
    // in one statement. Without one, claim at once (a new message should not wait for others).
    return this.#backlog && inFlight > 0 ? Math.ceil(this.#settings.concurrency / 4) : 1;
  }

  /** Whether to claim now with `free` slots. */
  due(free: number, batch: number): boolean {
    const capped = this.#capped;
    const claimNow = capped
      ? free >= capped.free + batch || this.#settings.clock() - capped.at >= (this.#hasNewWork() ? CAPPED_NEW_WORK_MS : this.#cappedLookMs)
      : free >= batch;
    return claimNow && free > 0;
  }

  /** While capped: how long until looking again is worth it; undefined when not capped. */
  cappedWaitMs(): number | undefined {
    if (!this.#capped) return undefined;
    return Math.max(1, (this.#hasNewWork() ? CAPPED_NEW_WORK_MS : this.#cappedLookMs) - (this.#settings.clock() - this.#capped.at));
  }

  /** Claims up to `free` due messages (throws when storage does not answer); `claimedAt` on this process's clock. */
  async claim(free: number): Promise<{ claimed: MessageRow[]; claimedAt: number }> {
    const { db, workerId, concurrency, leaseMs, affinityHolder, clock } = this.#settings;
    const claimedAt = clock();
    const slots = this.#slots;
    const excluded = slots.full();
    this.#newWork = false;
    this.#newWorkDueAt = undefined;
    const expiredLeases = claimedAt - this.#expiredLookAt >= EXPIRED_LEASES_EVERY_MS;
    if (expiredLeases) this.#expiredLookAt = claimedAt;
    const { claimed, leftBehind } = await claimDueMessagesFairly(db.kysely, db.dialect, workerId, {
      limit: free,
      leaseMs,
      ...(affinityHolder !== undefined ? { affinityHolder } : {}),
      excludeAccounts: excluded,
      window: Math.min(MAX_CLAIM_WINDOW, Math.max(MIN_CLAIM_WINDOW, free * 4)),
      expiredLeases,
      pick: (candidates) =>
        pickFairly(
          this.#withinConversionSlots(candidates).map((c) => ({ id: c.id, account: c.account_id, sender: c.sender })),
          { limit: free, slots: concurrency, capOf: (account) => slots.capOf(account), inHand: slots.inHand },
        ),
    });
    this.#capped = claimed.length < free && (leftBehind || excluded.length > 0) ? { at: claimedAt, free: free - claimed.length } : undefined;
    this.#backlog = claimed.length === free || this.#capped !== undefined;
    for (const message of claimed) {
      // A note that may need converting holds a conversion slot, not one of its account's, until its
      // audio is ready (audioSettled).
      if (this.#settings.conversionSlots !== undefined && this.#settings.mayConvert?.(message)) this.#converting.add(message.id);
      else slots.take(message.account_id);
    }
    return { claimed, claimedAt };
  }

  /**
   * Candidates in due order, without those that may need converting once the conversion slots are
   * full: those stay queued (for this worker's next claim, or another worker's), not held in a slot
   * that notes with their audio ready could use.
   */
  #withinConversionSlots<C extends { platform: string; audio_url: string }>(candidates: readonly C[]): readonly C[] {
    const { conversionSlots, mayConvert } = this.#settings;
    if (conversionSlots === undefined || mayConvert === undefined) return candidates;
    let room = conversionSlots - this.#converting.size;
    return candidates.filter((c) => !mayConvert(c) || room-- > 0);
  }

  /** Notes in hand that hold a conversion slot (their audio is not ready yet), beside the `concurrency` slots. */
  get waitingForAudio(): number {
    return this.#converting.size;
  }

  /**
   * A message's audio is ready (or failed): it gives its conversion slot back and takes one of its
   * account's slots for the rest of its attempt. True when it held a conversion slot.
   */
  audioSettled(message: MessageRow): boolean {
    if (!this.#converting.delete(message.id)) return false;
    this.#slots.take(message.account_id);
    return true;
  }

  /** A message claimed at `claimedAt` (this process's clock) is done with (its outcome written or kept). */
  release(message: MessageRow, claimedAt: number): void {
    if (this.#converting.delete(message.id)) return;
    this.#slots.release(message.account_id, claimedAt);
  }
}
