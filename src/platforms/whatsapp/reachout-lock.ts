import type { Kysely } from 'kysely';
import type { Database } from '../../store/schema.js';
import { findSenderByRef, setSenderStatus } from '../../store/senders.js';
import type { ReachoutLock, WhatsappSocket } from './socket.js';

/**
 * WhatsApp's reachout timelock (docs/senders.md, "WhatsApp's reachout lock"): a number that wrote to too many
 * strangers may not start new chats for a while; WhatsApp answers a first message to someone new with
 * error 463. Baileys reads the lock with `fetchAccountReachoutTimelock` and announces its start and end
 * in `connection.update`; the session's sender is `restricted` until it ends, and its notes to numbers it
 * never wrote to wait (delivery/sender-gate.ts) while notes into existing chats go on.
 */

export const REACHOUT_LOCK_REASON = 'WhatsApp does not let this number start new chats for now (its reachout timelock, error 463)';
/** How soon a note held by a lock whose end WhatsApp did not say is looked at again. */
export const UNKNOWN_LOCK_END_MS = 15 * 60_000;

/** The lock as the session's socket reads it now; undefined when this Baileys has no such call or it failed. */
export async function readReachoutLock(socket: WhatsappSocket): Promise<ReachoutLock | undefined> {
  if (!socket.fetchAccountReachoutTimelock) return undefined;
  try {
    return await socket.fetchAccountReachoutTimelock();
  } catch {
    return undefined;
  }
}

/** The session's sender follows the lock: `restricted` until it ends, `ok` again once WhatsApp lifts it. */
export async function applyReachoutLock(db: Kysely<Database>, sessionId: string, lock: ReachoutLock): Promise<void> {
  const session = await db.selectFrom('whatsapp_sessions').select(['account_id', 'env']).where('id', '=', sessionId).executeTakeFirst();
  if (!session) return;
  const ref = { accountId: session.account_id, env: session.env, platform: 'whatsapp', senderKey: sessionId };
  if (lock.isActive) {
    const until = lock.timeEnforcementEnds ? lock.timeEnforcementEnds.getTime() : null;
    await setSenderStatus(db, ref, { status: 'restricted', reason: REACHOUT_LOCK_REASON, until }, { kind: 'whatsapp_session' });
    return;
  }
  const current = await findSenderByRef(db, ref);
  if (current?.status === 'restricted') await setSenderStatus(db, ref, { status: 'ok', reason: null, until: null });
}
