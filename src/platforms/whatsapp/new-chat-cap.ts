import type { Kysely } from 'kysely';
import { NEW_CHAT_CAP_STATUSES, releaseRestrictedNotes, saveNewChatCap, type NewChatCap, type NewChatCapStatus } from '../../store/new-chat-cap.js';
import type { Database } from '../../store/schema.js';
import { findSenderByRef, setSenderStatus } from '../../store/senders.js';
import type { NewChatCapInfo, WhatsappSocket } from './socket.js';

/**
 * WhatsApp's new-chat message cap (Baileys 7: `fetchNewChatMessageCap()` and the `message-capping.update`
 * event, rc14 `lib/Socket/socket.js` and `lib/Socket/messages-recv.js`): how many chats with new people
 * the number may start in a cycle, and a status that tightens NONE → FIRST_WARNING → SECOND_WARNING →
 * CAPPED. Read when a session connects and followed as WhatsApp announces it; shown in GET /senders.
 * At the warnings the session's sends are spaced further apart; at CAPPED its sender is `restricted`
 * until the cycle ends, so notes to new chats wait (delivery/sender-gate.ts) while existing chats go on.
 */

export const NEW_CHAT_CAP_REASON = "WhatsApp's new-chat message cap is reached (CAPPED): notes to new chats wait for its cycle to end";

/** How much further apart a session's sends are spaced at each status of the cap. */
const PACE_FACTOR: Record<NewChatCapStatus, number> = { NONE: 1, FIRST_WARNING: 2, SECOND_WARNING: 4, CAPPED: 4 };
export const paceFactorOf = (status: NewChatCapStatus | undefined): number => (status ? PACE_FACTOR[status] : 1);

const count = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null);

/** Unix seconds as WhatsApp writes them (a string), as epoch ms. */
function epochMs(value: unknown): number | null {
  const seconds = Number(value);
  return value !== undefined && value !== null && value !== '' && Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : null;
}

/** Baileys' info as the service keeps it; undefined when it names no status we know. */
export function newChatCapOf(info: NewChatCapInfo | undefined): NewChatCap | undefined {
  const status = info?.capping_status as NewChatCapStatus | undefined;
  if (!status || !NEW_CHAT_CAP_STATUSES.includes(status)) return undefined;
  return { status, used: count(info!.used_quota), total: count(info!.total_quota), cycleEndsAt: epochMs(info!.cycle_end_timestamp) };
}

/** The cap as the session's socket reads it now; undefined when this Baileys has no such call or it failed. */
export async function readNewChatCap(socket: WhatsappSocket): Promise<NewChatCap | undefined> {
  if (!socket.fetchNewChatMessageCap) return undefined;
  try {
    return newChatCapOf(await socket.fetchNewChatMessageCap());
  } catch {
    return undefined;
  }
}

/** The session's sender follows the cap: kept for GET /senders, `restricted` while CAPPED, `ok` again after. */
export async function applyNewChatCap(db: Kysely<Database>, sessionId: string, cap: NewChatCap): Promise<void> {
  const session = await db.selectFrom('whatsapp_sessions').select(['account_id', 'env']).where('id', '=', sessionId).executeTakeFirst();
  if (!session) return;
  const ref = { accountId: session.account_id, env: session.env, platform: 'whatsapp', senderKey: sessionId };
  await saveNewChatCap(db, ref, 'whatsapp_session', cap);
  if (cap.status === 'CAPPED') {
    await setSenderStatus(db, ref, { status: 'restricted', reason: NEW_CHAT_CAP_REASON, until: cap.cycleEndsAt }, { kind: 'whatsapp_session' });
    return;
  }
  const current = await findSenderByRef(db, ref);
  if (current?.status !== 'restricted' || current.reason !== NEW_CHAT_CAP_REASON) return;
  // Eased before the cycle's end the notes were told to wait for: they go now.
  if (await setSenderStatus(db, ref, { status: 'ok', reason: null, until: null })) await releaseRestrictedNotes(db, ref);
}
