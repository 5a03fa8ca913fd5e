import type { Kysely } from 'kysely';
import type { Database, MessageAttemptsTable, MessageAudioTable, MessageReceiptsTable, MessagesTable } from './schema.js';

export type MessageAttemptRow = MessageAttemptsTable;
export type MessageAudioRow = MessageAudioTable;
export type MessageReceiptRow = MessageReceiptsTable;

export interface Owner {
  accountId: string;
  env: string;
}

export async function insertAttempt(db: Kysely<Database>, row: MessageAttemptRow): Promise<void> {
  await db.insertInto('message_attempts').values(row).execute();
}

/** The audio of the latest attempt replaces an earlier one's (a retry may have fetched a changed file). */
export async function saveAudio(db: Kysely<Database>, row: MessageAudioRow): Promise<void> {
  const { message_id: _id, ...rest } = row;
  await db
    .insertInto('message_audio')
    .values(row)
    .onConflict((oc) => oc.column('message_id').doUpdateSet(rest))
    .execute();
}

export interface MessageFilters {
  status?: string;
  platform?: string;
  recipient?: string;
  createdGte?: number;
  createdLte?: number;
}

export interface Page {
  limit: number;
  /** Messages older than this id (the next page, newest first). */
  startingAfter?: string;
  /** Messages newer than this id (the previous page). */
  endingBefore?: string;
}

/**
 * One page of the message log, newest first. Ids are time-sortable and unique, so they are the
 * cursor: no offset, and a page stays stable while new messages arrive.
 */
export async function listMessages(db: Kysely<Database>, owner: Owner, filters: MessageFilters, page: Page): Promise<{ rows: MessagesTable[]; hasMore: boolean }> {
  const backwards = page.endingBefore !== undefined && page.startingAfter === undefined;
  const rows = await db
    .selectFrom('messages')
    .selectAll()
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .$if(filters.status !== undefined, (qb) => qb.where('status', '=', filters.status!))
    .$if(filters.platform !== undefined, (qb) => qb.where('platform', '=', filters.platform!))
    .$if(filters.recipient !== undefined, (qb) => qb.where('recipient', '=', filters.recipient!))
    .$if(filters.createdGte !== undefined, (qb) => qb.where('created_at', '>=', filters.createdGte!))
    .$if(filters.createdLte !== undefined, (qb) => qb.where('created_at', '<=', filters.createdLte!))
    .$if(page.startingAfter !== undefined, (qb) => qb.where('id', '<', page.startingAfter!))
    .$if(backwards, (qb) => qb.where('id', '>', page.endingBefore!))
    .orderBy('id', backwards ? 'asc' : 'desc')
    .limit(page.limit + 1)
    .execute();
  const hasMore = rows.length > page.limit;
  const kept = rows.slice(0, page.limit);
  return { rows: backwards ? kept.reverse() : kept, hasMore };
}

export async function findAttempts(db: Kysely<Database>, messageId: string): Promise<MessageAttemptRow[]> {
  return db.selectFrom('message_attempts').selectAll().where('message_id', '=', messageId).orderBy('started_at').orderBy('id').execute();
}

export async function findAudio(db: Kysely<Database>, messageId: string): Promise<MessageAudioRow | undefined> {
  return db.selectFrom('message_audio').selectAll().where('message_id', '=', messageId).executeTakeFirst();
}

/** Receipts that have happened by `now` (the sandbox writes its plays ahead of time). */
export async function findReceipts(db: Kysely<Database>, messageId: string, now = Date.now()): Promise<MessageReceiptRow[]> {
  return db.selectFrom('message_receipts').selectAll().where('message_id', '=', messageId).where('at', '<=', now).orderBy('at').execute();
}

/** Records a receipt once (the first time it is reported wins); true when it is new. */
export async function insertReceipt(db: Kysely<Database>, row: MessageReceiptRow): Promise<boolean> {
  const result = await db.insertInto('message_receipts').values(row).onConflict((oc) => oc.doNothing()).executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n) > 0;
}
