import type { Kysely } from 'kysely';
import { makeQueuedNotesDue } from './queued-notes.js';
import type { Database } from './schema.js';
import { newSenderRecord, type SenderRef } from './sender-record.js';

/**
 * WhatsApp's new-chat message cap of a sender, as last read (README, "Senders"): kept on its record so
 * every process shows it in GET /senders.
 */

/** Baileys 7's NewChatMessageCappingStatusType, in the order the cap tightens. */
export const NEW_CHAT_CAP_STATUSES = ['NONE', 'FIRST_WARNING', 'SECOND_WARNING', 'CAPPED'] as const;
export type NewChatCapStatus = (typeof NEW_CHAT_CAP_STATUSES)[number];

export interface NewChatCap {
  status: NewChatCapStatus;
  used: number | null;
  total: number | null;
  /** When the cap's cycle ends (epoch ms), if WhatsApp said. */
  cycleEndsAt: number | null;
}

/** Writes the cap on the sender's record, making the record when the session has not sent yet. */
export async function saveNewChatCap(db: Kysely<Database>, ref: SenderRef, kind: string, cap: NewChatCap, now = Date.now()): Promise<void> {
  const value = JSON.stringify(cap);
  await db
    .insertInto('sender_records')
    .values({ ...newSenderRecord(ref, kind, now), new_chat_cap: value })
    .onConflict((oc) => oc.columns(['sender_key', 'platform', 'account_id', 'env']).doUpdateSet({ new_chat_cap: value, updated_at: now }))
    .execute();
}

/** The kept cap of a record; null when none was read (or it is not readable). */
export function parseNewChatCap(text: string | null | undefined): NewChatCap | null {
  if (!text) return null;
  try {
    const cap = JSON.parse(text) as NewChatCap;
    return NEW_CHAT_CAP_STATUSES.includes(cap.status) ? cap : null;
  } catch {
    return null;
  }
}

/**
 * The sender's notes held for its restriction (`waiting_for: sender_restricted`) made due now, once the
 * restriction is lifted before the time they were told to come back at. Scheduled ones keep their time.
 */
export async function releaseRestrictedNotes(db: Kysely<Database>, ref: SenderRef): Promise<void> {
  await makeQueuedNotesDue(db, ref, 'sender_restricted');
}
