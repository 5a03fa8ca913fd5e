/**
 * Fair claiming: which of the due items a process with a few free slots takes, so that one account
 * (or one sender of an account) with a flood of slow or hanging work cannot hold every slot while
 * another account's work waits behind it. Shared by the delivery worker (messages; sender = the
 * message's affinity key, else its platform) and the webhook sender (deliveries; sender = the endpoint).
 *
 * The bounds:
 * - the share: one account holds at most `floor(slots × share)` of a process's slots (at least one),
 *   unless it has earned more (next point). The rest stays free for other accounts: a newcomer finds a
 *   free slot at once even when the first account's work hangs until its timeout.
 * - earned slots: beyond its share, an account may take one more slot for each of its attempts that
 *   ended quickly (within QUICK_MS) in the last EARNED_FOR_MS, up to all slots but a small reserve. Work
 *   that ends quickly gives its slots back before anyone waits long for them, so a lone bulk sender
 *   whose notes go through uses (nearly) every slot; work that hangs earns nothing and stays within the
 *   share. Slots already taken cannot be taken back, so the reserve (1 in 32, at least one) is what a
 *   newcomer still finds if an account's quick work turns into hanging work all at once.
 * - the fair share: while several accounts have work in hand or waiting, each first gets up to
 *   `ceil(slots / active accounts)` (within its own bound); slots left over after that go, still
 *   round-robin, to accounts below their bound (nothing idles while someone has work).
 * Within those, the pick goes round-robin across accounts (in the order of their earliest due item),
 * and within one account round-robin across its senders.
 */

// The default lives with the configuration (a lower layer), which reads WORKER_ACCOUNT_SHARE.
export { DEFAULT_ACCOUNT_SHARE_PERCENT } from '../config.js';

/** The most slots of `slots` one account may hold (`sharePercent` of them, at least one). */
export function accountCap(slots: number, sharePercent: number): number {
  return Math.max(1, Math.min(slots, Math.floor((slots * sharePercent) / 100)));
}

export interface FairCandidate {
  id: string;
  account: string;
  sender: string;
}

export interface FairPickOptions {
  /** How many to take at most (the free slots). */
  limit: number;
  /** Every slot of the process. */
  slots: number;
  /** The most slots an account may hold (AccountSlots.capOf). */
  capOf: (account: string) => number;
  /** What each account already holds in this process. */
  inHand: ReadonlyMap<string, number>;
  /** A per-sender bound (webhook endpoints); none when undefined. */
  senderCap?: number;
  /** What each sender already holds in this process (with senderCap). */
  senderInHand?: ReadonlyMap<string, number>;
}

/** The ids to claim, in claim order; `candidates` come in due order. */
export function pickFairly(candidates: readonly FairCandidate[], options: FairPickOptions): string[] {
  const { limit, slots, capOf, inHand, senderCap, senderInHand } = options;
  if (limit <= 0 || candidates.length === 0) return [];
  // Accounts in order of their earliest due candidate; each with its senders in the same order.
  const accounts = new Map<string, Map<string, FairCandidate[]>>();
  for (const candidate of candidates) {
    let senders = accounts.get(candidate.account);
    if (!senders) accounts.set(candidate.account, (senders = new Map()));
    let queue = senders.get(candidate.sender);
    if (!queue) senders.set(candidate.sender, (queue = []));
    queue.push(candidate);
  }
  const active = new Set<string>(accounts.keys());
  for (const [account, n] of inHand) if (n > 0) active.add(account);
  const fairShare = Math.max(1, Math.ceil(slots / active.size));

  const taken = new Map<string, number>();
  const takenBySender = new Map<string, number>();
  const picked: string[] = [];
  const held = (account: string) => (inHand.get(account) ?? 0) + (taken.get(account) ?? 0);
  const senderHeld = (sender: string) => (senderInHand?.get(sender) ?? 0) + (takenBySender.get(sender) ?? 0);
  /** Next candidate of one account, round-robin over its senders (the sender goes to the back). */
  const nextOf = (senders: Map<string, FairCandidate[]>): FairCandidate | undefined => {
    for (const [sender, queue] of senders) {
      senders.delete(sender);
      if (senderCap !== undefined && senderHeld(sender) >= senderCap) continue; // this sender is full: drop it
      const candidate = queue.shift();
      if (queue.length > 0) senders.set(sender, queue);
      if (candidate) return candidate;
    }
    return undefined;
  };
  const bounds = [(account: string) => Math.min(capOf(account), fairShare), capOf];
  for (const cap of bounds) {
    let progress = true;
    while (progress && picked.length < limit) {
      progress = false;
      for (const [account, senders] of accounts) {
        if (picked.length >= limit) break;
        if (held(account) >= cap(account)) continue;
        const candidate = nextOf(senders);
        if (!candidate) {
          accounts.delete(account);
          continue;
        }
        picked.push(candidate.id);
        taken.set(account, (taken.get(account) ?? 0) + 1);
        takenBySender.set(candidate.sender, (takenBySender.get(candidate.sender) ?? 0) + 1);
        progress = true;
      }
    }
  }
  return picked;
}

/** Accounts (or senders) that hold `cap` or more: the claim query leaves their items out. */
export function atCap(inHand: ReadonlyMap<string, number>, cap: number): string[] {
  const full: string[] = [];
  for (const [key, n] of inHand) if (n >= cap) full.push(key);
  return full;
}

/** An attempt that ended within this long of its start counts as quick. */
export const QUICK_MS = 2_000;
/** For how long a quick end earns its account a slot beyond the share. */
export const EARNED_FOR_MS = 2_000;

/** Slots no account may take, however quick its work: 1 in 32, at least one (none with one slot). */
export function reservedSlots(slots: number): number {
  return slots <= 1 ? 0 : Math.max(1, Math.floor(slots / 32));
}

/**
 * One process's slots by account: what each holds, and the most it may hold (its share, plus what its
 * quick ends earned: see the top of this file).
 */
export class AccountSlots {
  /** Slots in hand per account. */
  readonly inHand = new Map<string, number>();
  readonly #share: number;
  readonly #ceiling: number;
  /** Per account, when its recent quick attempts ended (oldest first; at most what can be earned). */
  readonly #quickEnds = new Map<string, number[]>();
  #lastSweep = 0;

  constructor(
    readonly slots: number,
    sharePercent: number,
    readonly clock: () => number = Date.now,
  ) {
    this.#share = accountCap(slots, sharePercent);
    this.#ceiling = Math.max(this.#share, slots - reservedSlots(slots));
  }

  /** The most slots `account` may hold now. */
  capOf(account: string): number {
    if (this.#ceiling === this.#share) return this.#share;
    const ends = this.#quickEnds.get(account);
    if (!ends) return this.#share;
    const since = this.clock() - EARNED_FOR_MS;
    while (ends.length > 0 && ends[0]! < since) ends.shift();
    if (ends.length === 0) this.#quickEnds.delete(account);
    return this.#share + ends.length;
  }

  /** Accounts that hold their bound or more (the claim leaves their items out). */
  full(): string[] {
    const full: string[] = [];
    for (const [account, n] of this.inHand) if (n >= this.capOf(account)) full.push(account);
    return full;
  }

  take(account: string): void {
    this.inHand.set(account, (this.inHand.get(account) ?? 0) + 1);
  }

  /** An attempt of `account` that started at `startedAt` (this clock) ended. */
  release(account: string, startedAt: number): void {
    this.giveBack(account);
    const now = this.clock();
    this.#sweep(now);
    if (this.#ceiling === this.#share || now - startedAt > QUICK_MS) return;
    let ends = this.#quickEnds.get(account);
    if (!ends) this.#quickEnds.set(account, (ends = []));
    ends.push(now);
    // More than the ceiling allows would earn nothing more.
    if (ends.length > this.#ceiling - this.#share) ends.shift();
  }

  /** A slot of `account` is given back without its work having ended (it earns nothing). */
  giveBack(account: string): void {
    const held = (this.inHand.get(account) ?? 1) - 1;
    if (held > 0) this.inHand.set(account, held);
    else this.inHand.delete(account);
  }

  /** Forgets, now and then, the accounts whose quick ends all expired (they would pile up over months). */
  #sweep(now: number): void {
    if (now - this.#lastSweep < EARNED_FOR_MS) return;
    this.#lastSweep = now;
    for (const [account, ends] of this.#quickEnds) if (ends[ends.length - 1]! < now - EARNED_FOR_MS) this.#quickEnds.delete(account);
  }
}
