import { sql, type Kysely } from 'kysely';
import { dbNow } from './dialect.js';
import type { MessageRow } from './messages.js';
import type { Database, MessageRepliesTable } from './schema.js';

export type ReplyRow = MessageRepliesTable;

/** How long after its delivery a voice note can still be answered (older notes are not looked at). */
export const REPLY_WINDOW_MS = 30 * 24 * 60 * 60 * 1000;
/**
 * A platform's clock and ours differ a little (Telegram's dates are whole seconds): a reply stamped up to
 * this long before the note's delivery still answers it.
 */
export const REPLY_CLOCK_SLACK_MS = 5_000;
/**
 * voice_note.replied is announced for at most this many replies of one note within REPLIED_EVENTS_WINDOW_MS
 * (by the replies' own times): 300 messages in a row are 300 rows, not 300 webhooks. The rest are kept
 * and shown in the message's detail; the next reply after the window is announced again.
 */
export const MAX_REPLIED_EVENTS = 10;
export const REPLIED_EVENTS_WINDOW_MS = 60 * 60 * 1000;
/** Replies a message's detail shows, oldest first. */
export const MAX_REPLIES_SHOWN = 20;

/** Who wrote, to whom: a recipient answering one sender on one platform (optionally within one account and environment). */
export interface Conversation {
  platform: string;
  senderKey: string;
  recipient: string;
  /** When the listener knows whose sender it is (a WhatsApp session belongs to one account); otherwise any. */
  accountId?: string | undefined;
  env?: string | undefined;
}

/**
 * The voice note a reply heard at `at` answers: the latest one delivered to that recipient from that
 * sender in the 30 days before; undefined when there is none (nobody we wrote to: nothing is recorded).
 */
export async function findRepliedNote(db: Kysely<Database>, chat: Conversation, at: number): Promise<MessageRow | undefined> {
  return db
    .selectFrom('messages')
    .selectAll()
    .where('sender_key', '=', chat.senderKey)
    .where('recipient', '=', chat.recipient)
    .where('platform', '=', chat.platform)
    .$if(chat.accountId !== undefined, (qb) => qb.where('account_id', '=', chat.accountId!))
    .$if(chat.env !== undefined, (qb) => qb.where('env', '=', chat.env!))
    .where('status', '=', 'delivered')
    .where('delivered_at', '>=', at - REPLY_WINDOW_MS)
    .where('delivered_at', '<=', at + REPLY_CLOCK_SLACK_MS)
    .orderBy('delivered_at', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/**
 * The delivered note a reply quotes (the platform said which: `platformMessageId`), within the same bounds
 * as findRepliedNote (sender, recipient, platform, account and environment); undefined when it is not one
 * of ours, or older than the window.
 */
export async function findQuotedNote(db: Kysely<Database>, chat: Conversation, platformMessageId: string, at: number): Promise<MessageRow | undefined> {
  return db
    .selectFrom('messages')
    .selectAll()
    .where('platform_message_id', '=', platformMessageId)
    .where('sender_key', '=', chat.senderKey)
    .where('recipient', '=', chat.recipient)
    .where('platform', '=', chat.platform)
    .$if(chat.accountId !== undefined, (qb) => qb.where('account_id', '=', chat.accountId!))
    .$if(chat.env !== undefined, (qb) => qb.where('env', '=', chat.env!))
    .where('status', '=', 'delivered')
    .where('delivered_at', '>=', at - REPLY_WINDOW_MS)
    .executeTakeFirst();
}

/** Writes a reply once (the platform's id is unique within the chat); true when it is new. */
export async function insertReply(db: Kysely<Database>, row: ReplyRow): Promise<boolean> {
  const result = await db
    .insertInto('message_replies')
    .values(row)
    .onConflict((oc) => oc.columns(['platform', 'sender_key', 'recipient', 'platform_reply_id', 'account_id', 'env']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n) > 0;
}

/** The note was answered at `at`: kept as its first answer unless an earlier one is known. */
export async function markReplied(db: Kysely<Database>, messageId: string, at: number): Promise<void> {
  await db
    .updateTable('messages')
    .set({ first_replied_at: sql<number>`case when first_replied_at is null or first_replied_at > cast(${at} as bigint) then cast(${at} as bigint) else first_replied_at end` })
    .where('id', '=', messageId)
    .execute();
}

/**
 * Cancels the notes waiting for a worker that asked for it (`cancel_on_reply`) and that the recipient
 * answered after they were accepted: one statement whose `status = 'queued'` condition a worker's claim
 * (which moves the note to `processing`) also changes, so exactly one of the two wins. Returns them as
 * canceled; their quota and events are the caller's (cancel.ts giveBackCanceled).
 */
export async function cancelAnsweredNotes(db: Kysely<Database>, chat: Conversation, at: number): Promise<MessageRow[]> {
  const now = dbNow(db);
  return db
    .updateTable('messages')
    .set({ status: 'canceled', canceled_at: now, cancel_reason: 'replied', updated_at: now, credentials: null, lease_owner: null, lease_expires_at: null })
    .where('sender_key', '=', chat.senderKey)
    .where('recipient', '=', chat.recipient)
    .where('platform', '=', chat.platform)
    .$if(chat.accountId !== undefined, (qb) => qb.where('account_id', '=', chat.accountId!))
    .$if(chat.env !== undefined, (qb) => qb.where('env', '=', chat.env!))
    .where('status', '=', 'queued')
    // Written out, not bound: the planner picks the partial index (cancel_on_reply = 1) only for a literal.
    .where(sql<boolean>`cancel_on_reply = 1`)
    // The same slack as findRepliedNote: a reply dated in the note's own second (Telegram's dates are whole seconds) answers it.
    .where('created_at', '<=', at + REPLY_CLOCK_SLACK_MS)
    .returningAll()
    .execute();
}

/** A message's replies, oldest first, at most MAX_REPLIES_SHOWN. */
export async function findReplies(db: Kysely<Database>, messageId: string): Promise<ReplyRow[]> {
  return db.selectFrom('message_replies').selectAll().where('message_id', '=', messageId).orderBy('received_at').orderBy('id').limit(MAX_REPLIES_SHOWN).execute();
}

/** How many replies of the note were received in the window before `at` (`at` included): whether one more is announced. */
export async function repliesInEventWindow(db: Kysely<Database>, messageId: string, at: number): Promise<number> {
  const row = await db
    .selectFrom('message_replies')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('message_id', '=', messageId)
    .where('received_at', '>', at - REPLIED_EVENTS_WINDOW_MS)
    .where('received_at', '<=', at)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}
