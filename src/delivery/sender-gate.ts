import type { Logger } from 'pino';
import type { Kysely } from 'kysely';
import { DeliveryError, SenderRestricted, UNKNOWN_HOLD_RECHECK_MS, type FailureCode } from '../platforms/platform.js';
import type { MessageRow } from '../store/messages.js';
import type { Database } from '../store/schema.js';
import { findSenderHolds, senderHoldKey, senderWroteTo, setSenderStatus, type SenderChange, type SenderRef, type SenderRow } from '../store/senders.js';
import { Deferral } from './rhythm-gate.js';

/**
 * A sender's status, before and after a note's platform call (docs/senders.md, "Senders"). Before: an `expired`
 * sender's notes fail with the error that killed it, without trying the platform; a `resting` one's wait
 * in the queue until its rest ends, and a `restricted` one's (WhatsApp's reachout lock) too when they go
 * to someone it never wrote to. After: what the platform's answer says of the sender.
 */

/** The senders not `ok` among a claim's notes, read in one statement right after the claim, by senderHoldKey. */
export type ClaimedSenders = ReadonlyMap<string, SenderRow>;

export function senderOf(message: MessageRow): SenderRef | undefined {
  if (!message.sender_key) return undefined;
  return { accountId: message.account_id, env: message.env, platform: message.platform, senderKey: message.sender_key };
}

export async function readSenderHolds(db: Kysely<Database>, messages: readonly MessageRow[]): Promise<ClaimedSenders> {
  return findSenderHolds(db, messages.flatMap((m) => senderOf(m) ?? []));
}

/** Throws what the sender's status means for this note before its platform call; returns when it may go. */
export async function checkSender(deps: { db: Kysely<Database>; logger: Logger }, message: MessageRow, holds: ClaimedSenders | undefined, now: number): Promise<void> {
  const ref = senderOf(message);
  const hold = ref && holds?.get(senderHoldKey(ref));
  if (!ref || !hold) return;
  if (hold.status === 'expired') {
    const code = (hold.failure_code ?? 'session_expired') as FailureCode;
    throw new DeliveryError(code, hold.reason ?? 'the sender has expired', false);
  }
  if (hold.status !== 'resting' && hold.status !== 'restricted') return;
  const until = hold.until === null ? null : Number(hold.until);
  if (until !== null && until <= now) {
    // The rest or the lock is over: written once (compare-and-set), with its sender.updated event.
    await setSenderStatus(deps.db, ref, { status: 'ok', reason: null, until: null }, { endedBy: now }).catch((err: unknown) =>
      deps.logger.warn({ err, message_id: message.id }, "could not record the end of a sender's rest"),
    );
    return;
  }
  const waitMs = until === null ? UNKNOWN_HOLD_RECHECK_MS : until - now;
  if (hold.status === 'resting') {
    throw new Deferral('sender_rest', `the sender is resting${hold.reason ? ` (${hold.reason})` : ''}; the note waits for the rest to end`, waitMs);
  }
  // Restricted: chats that exist go on; a first note to someone new waits for the lock to end.
  if (await senderWroteTo(deps.db, ref, message.recipient)) return;
  throw new Deferral(
    'sender_restricted',
    `the sender may not start new chats for now${hold.reason ? ` (${hold.reason})` : ''}; the note to a new recipient waits for the restriction to end`,
    waitMs,
  );
}

/**
 * What a live delivery's failure says of its sender, if anything: a dead credential, a rest the platform
 * asked for, a session not connected. Sandbox outcomes are simulated per recipient and say nothing of the
 * sender; nor does an error before the platform was reached.
 */
export function senderChangeOf(message: MessageRow, error: DeliveryError, reachedPlatform: boolean, now: number): SenderChange | undefined {
  if (message.env !== 'live' || !message.sender_key || !reachedPlatform || error instanceof Deferral) return undefined;
  if (error instanceof SenderRestricted) return { status: 'restricted', reason: error.message, until: error.until };
  switch (error.code) {
    case 'session_expired':
    case 'invalid_session':
      return { status: 'expired', reason: error.message, until: null, failureCode: error.code };
    case 'session_not_connected':
      // Not a handover to the process that holds the session (not attempted): not connected at all.
      return error.notAttempted ? undefined : { status: 'disconnected', reason: error.message, until: null };
    case 'proxy_unreachable':
      // The proxy did not carry the connection: the sender is cut off until it does (its next delivered note makes it ok).
      return { status: 'disconnected', reason: 'proxy_unreachable', until: null };
    case 'platform_rate_limited':
      // A rest the platform imposed (`waits`: Telegram's FLOOD_WAIT, PEER_FLOOD) is the sender's, though no attempt is counted.
      if ((error.notAttempted && !error.waits) || !error.retryAfterMs) return undefined;
      return { status: 'resting', reason: error.message, until: now + error.retryAfterMs };
    default:
      return undefined;
  }
}
