import type { Kysely } from 'kysely';
import { newSenderId } from '../core/ids.js';
import { makeQueuedNotesDue } from './queued-notes.js';
import type { Database } from './schema.js';

/**
 * WhatsApp's new-chat message cap of a sender, as last read (README, "Senders"): kept on its record so
 * every process shows it in GET /senders.
 */

/** A sender as a note names it (senders.ts SenderRef; written out here, as senders.ts shows this module's views). */
interface SenderRef {
  accountId: string;
  env: string;
  platform: string;
  senderKey: string;
}

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
    .values({
      id: newSenderId(now),
      account_id: ref.accountId,
      env: ref.env,
      platform: ref.platform,
      sender_key: ref.senderKey,
      kind,
      label: null,
      status: 'ok',
      reason: null,
      until: null,
      failure_code: null,
      last_sent_at: null,
      sent_day: null,
      sent_today: 0,
      new_chat_cap: value,
      created_at: now,
      updated_at: now,
    })
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
