import type { Kysely } from 'kysely';
import { FixedStatement, placeholders } from './fixed-statement.js';
import type { Database, MessageAttemptsTable, MessageAudioTable, MessageReceiptsTable, MessagesTable } from './schema.js';

export type MessageAttemptRow = MessageAttemptsTable;
export type MessageAudioRow = MessageAudioTable;
export type MessageReceiptRow = MessageReceiptsTable;

export interface Owner {
  accountId: string;
  env: string;
}

const ATTEMPT_COLUMNS = ['id', 'message_id', 'attempt', 'started_at', 'ended_at', 'outcome', 'error_code', 'error_message', 'next_attempt_at'] as const satisfies ReadonlyArray<
  keyof MessageAttemptRow
>;
const AUDIO_COLUMNS = [
  'message_id',
  'source_format',
  'source_codec',
  'source_duration',
  'source_size',
  'source_sha256',
  'converted_format',
  'converted_mime',
  'converted_duration',
  'converted_size',
  'waveform',
  'updated_at',
] as const satisfies ReadonlyArray<keyof MessageAudioRow>;

// Every attempt writes these two: written out once (fixed-statement.ts).
const INSERT_ATTEMPT = new FixedStatement(`insert into message_attempts (${ATTEMPT_COLUMNS.join(', ')}) values (${placeholders(ATTEMPT_COLUMNS.length)})`);
// The audio of the latest attempt replaces an earlier one's (a retry may have fetched a changed file).
const SAVE_AUDIO = new FixedStatement(
  `insert into message_audio (${AUDIO_COLUMNS.join(', ')}) values (${placeholders(AUDIO_COLUMNS.length)})
   on conflict (message_id) do update set ${AUDIO_COLUMNS.filter((c) => c !== 'message_id')
     .map((c) => `${c} = excluded.${c}`)
     .join(', ')}`,
);

export async function insertAttempt(db: Kysely<Database>, row: MessageAttemptRow): Promise<void> {
  await INSERT_ATTEMPT.execute(db, ATTEMPT_COLUMNS.map((column) => row[column] ?? null));
}

/** The audio of the latest attempt replaces an earlier one's (a retry may have fetched a changed file). */
export async function saveAudio(db: Kysely<Database>, row: MessageAudioRow): Promise<void> {
  await SAVE_AUDIO.execute(db, AUDIO_COLUMNS.map((column) => row[column] ?? null));
}

export interface MessageFilters {
  status?: string;
  platform?: string;
  recipient?: string;
  createdGte?: number;
  createdLte?: number;
  /** true: only notes their recipient answered; false: only notes not answered (yet). */
  replied?: boolean;
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
    .$if(filters.replied === true, (qb) => qb.where('first_replied_at', 'is not', null))
    .$if(filters.replied === false, (qb) => qb.where('first_replied_at', 'is', null))
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
