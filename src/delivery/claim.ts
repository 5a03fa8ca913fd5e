import type { Db } from '../store/db.js';
import { claimDueMessagesFairly, type ClaimCandidate, type MessageRow } from '../store/messages.js';
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
 * How long a note may download its audio in a conversion slot. Those slots are meant for the CPU's
 * work; a download that takes longer (an audio host slow to answer, or never answering: the fetch
 * waits up to 30 s) goes on in one of its account's slots, like a slow platform call.
 */
export const DOWNLOAD_IN_CONVERSION_SLOT_MS = 1_000;

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
  /**
   * The conversion slots by account: each account holds at most its share of them too, so that one
   * account's notes (whose audio hosts hang, say) cannot hold them all while another's wait.
   */
  readonly #conversionSlots: AccountSlots | undefined;
  /** Messages in hand claimed as "may need converting" whose audio is not ready yet: their account, when claimed. */
  readonly #converting = new Map<string, { account: string; claimedAt: number }>();

  constructor(settings: ClaimSettings) {
    this.#settings = settings;
    this.#slots = new AccountSlots(settings.concurrency, settings.accountSharePercent, settings.clock);
    if (settings.conversionSlots !== undefined && settings.mayConvert !== undefined) {
      this.#conversionSlots = new AccountSlots(settings.conversionSlots, settings.accountSharePercent, settings.clock);
    }
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
    const claimedAt = this.#settings.clock();
    const excluded = this.#slots.full();
    this.#newWork = false;
    this.#newWorkDueAt = undefined;
    const expiredLeases = claimedAt - this.#expiredLookAt >= EXPIRED_LEASES_EVERY_MS;
    if (expiredLeases) this.#expiredLookAt = claimedAt;
    let { claimed, leftBehind } = await this.#claimOnce(free, excluded, claimedAt, expiredLeases);
    // Accounts at their share of the conversion slots may fill the whole window with notes that need
    // converting (a flood of them, due first): read again past those accounts, or another account's
    // notes behind them would wait until the flood is gone.
    const convertingFull = (this.#conversionSlots?.full() ?? []).filter((account) => !excluded.includes(account));
    if (claimed.length < free && leftBehind && convertingFull.length > 0) {
      const more = await this.#claimOnce(free - claimed.length, [...excluded, ...convertingFull], claimedAt, false);
      claimed = [...claimed, ...more.claimed];
      leftBehind = true;
    }
    this.#capped = claimed.length < free && (leftBehind || excluded.length > 0) ? { at: claimedAt, free: free - claimed.length } : undefined;
    this.#backlog = claimed.length === free || this.#capped !== undefined;
    return { claimed, claimedAt };
  }

  /** One claim statement of up to `free` messages, accounts in `excluded` left out; what it took is held here. */
  async #claimOnce(free: number, excluded: string[], claimedAt: number, expiredLeases: boolean): Promise<{ claimed: MessageRow[]; leftBehind: boolean }> {
    const { db, workerId, leaseMs, affinityHolder } = this.#settings;
    const result = await claimDueMessagesFairly(db.kysely, db.dialect, workerId, {
      limit: free,
      leaseMs,
      ...(affinityHolder !== undefined ? { affinityHolder } : {}),
      excludeAccounts: excluded,
      window: Math.min(MAX_CLAIM_WINDOW, Math.max(MIN_CLAIM_WINDOW, free * 4)),
      expiredLeases,
      pick: (candidates) => this.#pick(candidates, free),
    });
    for (const message of result.claimed) {
      // A note that may need converting holds a conversion slot, not one of its account's, until its
      // audio is ready (audioSettled) or its download is found slow (downloadIsSlow).
      if (this.#conversionSlots && this.#settings.mayConvert?.(message)) {
        this.#converting.set(message.id, { account: message.account_id, claimedAt });
        this.#conversionSlots.take(message.account_id);
      } else this.#slots.take(message.account_id);
    }
    return result;
  }

  /**
   * Which candidates to claim: those whose audio is ready fairly across accounts in the worker's slots,
   * those that may need converting fairly across accounts in the conversion slots (each account within
   * its share of them too). Those left stay queued (for this worker's next claim, or another worker's).
   */
  #pick(candidates: readonly ClaimCandidate[], free: number): string[] {
    const fair = (list: readonly ClaimCandidate[]) => list.map((c) => ({ id: c.id, account: c.account_id, sender: c.sender }));
    const slots = this.#slots;
    const conversion = this.#conversionSlots;
    const mayConvert = this.#settings.mayConvert;
    const ordinary = (list: readonly ClaimCandidate[], limit: number) =>
      pickFairly(fair(list), { limit, slots: this.#settings.concurrency, capOf: (account) => slots.capOf(account), inHand: slots.inHand });
    if (!conversion || !mayConvert) return ordinary(candidates, free);
    const converting: ClaimCandidate[] = [];
    const ready: ClaimCandidate[] = [];
    for (const candidate of candidates) (mayConvert(candidate) ? converting : ready).push(candidate);
    const room = Math.min(free, conversion.slots - this.#converting.size);
    const toConvert = pickFairly(fair(converting), { limit: room, slots: conversion.slots, capOf: (account) => conversion.capOf(account), inHand: conversion.inHand });
    return [...ordinary(ready, free - toConvert.length), ...toConvert];
  }

  /** Whether a message claimed now holds a conversion slot (its audio may need converting). */
  holdsConversionSlot(messageId: string): boolean {
    return this.#converting.has(messageId);
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
    const held = this.#converting.get(message.id);
    if (!held) return false;
    this.#converting.delete(message.id);
    this.#conversionSlots?.release(held.account, held.claimedAt);
    this.#slots.take(message.account_id);
    return true;
  }

  /**
   * A message still downloading its audio after DOWNLOAD_IN_CONVERSION_SLOT_MS: it gives its
   * conversion slot back (earning its account nothing) and waits in one of its account's slots.
   * True when it held a conversion slot.
   */
  downloadIsSlow(message: MessageRow): boolean {
    const held = this.#converting.get(message.id);
    if (!held) return false;
    this.#converting.delete(message.id);
    this.#conversionSlots?.giveBack(held.account);
    this.#slots.take(message.account_id);
    return true;
  }

  /** A message claimed at `claimedAt` (this process's clock) is done with (its outcome written or kept). */
  release(message: MessageRow, claimedAt: number): void {
    const held = this.#converting.get(message.id);
    if (held) {
      this.#converting.delete(message.id);
      this.#conversionSlots?.giveBack(held.account);
      return;
    }
    this.#slots.release(message.account_id, claimedAt);
  }
}
