/**
 * Fair claiming: which of the due items a process with a few free slots takes, so that one account
 * (or one sender of an account) with a flood of slow or hanging work cannot hold every slot while
 * another account's work waits behind it. Shared by the delivery worker (messages; sender = the
 * message's affinity key, else its platform) and the webhook sender (deliveries; sender = the endpoint).
 *
 * Two bounds:
 * - the hard cap: one account never holds more than `floor(slots × share)` of a process's slots (at
 *   least one), however idle the others are. The rest is kept for other accounts: a newcomer finds a
 *   free slot at once even when the first account's work hangs until its timeout.
 * - the fair share: while several accounts have work in hand or waiting, each first gets up to
 *   `ceil(slots / active accounts)`; slots left over after that go, still round-robin, to accounts
 *   below their hard cap (nothing idles while someone has work).
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
  /** accountCap(slots, share). */
  hardCap: number;
  /** What each account already holds in this process. */
  inHand: ReadonlyMap<string, number>;
  /** A per-sender bound (webhook endpoints); none when undefined. */
  senderCap?: number;
  /** What each sender already holds in this process (with senderCap). */
  senderInHand?: ReadonlyMap<string, number>;
}

/** The ids to claim, in claim order; `candidates` come in due order. */
export function pickFairly(candidates: readonly FairCandidate[], options: FairPickOptions): string[] {
  const { limit, slots, hardCap, inHand, senderCap, senderInHand } = options;
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
  const fairShare = Math.max(1, Math.min(hardCap, Math.ceil(slots / active.size)));

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
  for (const cap of [fairShare, hardCap]) {
    let progress = true;
    while (progress && picked.length < limit) {
      progress = false;
      for (const [account, senders] of accounts) {
        if (picked.length >= limit) break;
        if (held(account) >= cap) continue;
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
