import type { Kysely } from 'kysely';
import { newSuppressionId } from '../core/ids.js';
import { recipientKey } from '../core/recipient-key.js';
import { giveBackCanceled } from './cancel.js';
import { dbNow } from './dialect.js';
import type { MessageRow } from './messages.js';
import type { Database } from './schema.js';
import type { SuppressionsTable } from './schema-suppressions.js';

export type SuppressionRow = SuppressionsTable;
export const SUPPRESSION_SOURCES = ['api', 'reply', 'import', 'dashboard'] as const;
export type SuppressionSource = (typeof SUPPRESSION_SOURCES)[number];
/** `platform` of an entry that holds on every platform. */
export const EVERY_PLATFORM = '*';

export interface Owner {
  accountId: string;
  env: string;
}

/** One recipient to list: `key` already compared form (recipientKey). */
export interface NewSuppression {
  platform: string;
  key: string;
  note: string | null;
}

// Rows per insert statement: nine values each, well under SQLite's 32,766 bound parameters.
const INSERT_CHUNK = 500;

/**
 * Lists recipients (in the caller's transaction): a recipient already listed for that platform is kept as
 * it is, not listed twice. Returns each entry's row, new or already there, in the order given.
 */
export async function addSuppressions(
  db: Kysely<Database>,
  owner: Owner,
  entries: readonly NewSuppression[],
  how: { source: SuppressionSource; replyId?: string | null; now: number },
): Promise<SuppressionRow[]> {
  const byEntry = new Map<string, SuppressionRow>();
  for (let start = 0; start < entries.length; start += INSERT_CHUNK) {
    const chunk = entries.slice(start, start + INSERT_CHUNK);
    const rows: SuppressionRow[] = chunk.map((entry) => ({
      id: newSuppressionId(how.now),
      account_id: owner.accountId,
      env: owner.env,
      platform: entry.platform,
      recipient_key: entry.key,
      source: how.source,
      reply_id: how.replyId ?? null,
      note: entry.note,
      created_at: how.now,
    }));
    await db
      .insertInto('suppressions')
      .values(rows)
      .onConflict((oc) => oc.columns(['account_id', 'env', 'recipient_key', 'platform']).doNothing())
      .execute();
    const found = await db
      .selectFrom('suppressions')
      .selectAll()
      .where('account_id', '=', owner.accountId)
      .where('env', '=', owner.env)
      .where('recipient_key', 'in', [...new Set(chunk.map((e) => e.key))])
      .execute();
    for (const row of found) byEntry.set(entryKey(row.platform, row.recipient_key), row);
  }
  return entries.map((entry) => byEntry.get(entryKey(entry.platform, entry.key))!);
}

const entryKey = (platform: string, key: string): string => `${platform}\u0000${key}`;

/** The entry that keeps `recipient` from being written to on `platform` (its own, or one for every platform); undefined when none. */
export async function findSuppression(db: Kysely<Database>, owner: Owner, platform: string, recipient: string): Promise<SuppressionRow | undefined> {
  return db
    .selectFrom('suppressions')
    .selectAll()
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .where('recipient_key', '=', recipientKey(recipient))
    .where('platform', 'in', [platform, EVERY_PLATFORM])
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
}

export interface SuppressionFilter {
  platform?: string;
  source?: string;
  /** Compared as entries are (recipientKey); with `prefix`, every entry starting with it (the dashboard's search). */
  recipient?: string;
  prefix?: boolean;
}

export interface SuppressionPage {
  limit: number;
  startingAfter?: string;
  endingBefore?: string;
}

/** The list, newest first, filtered and paged by id (ids sort by creation time). */
export async function listSuppressions(db: Kysely<Database>, owner: Owner, filter: SuppressionFilter, page: SuppressionPage): Promise<{ data: SuppressionRow[]; hasMore: boolean }> {
  const backwards = page.endingBefore !== undefined;
  const key = filter.recipient !== undefined ? recipientKey(filter.recipient) : undefined;
  const rows = await db
    .selectFrom('suppressions')
    .selectAll()
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .$if(filter.platform !== undefined, (qb) => qb.where('platform', '=', filter.platform!))
    .$if(filter.source !== undefined, (qb) => qb.where('source', '=', filter.source!))
    .$if(key !== undefined && filter.prefix !== true, (qb) => qb.where('recipient_key', '=', key!))
    .$if(key !== undefined && filter.prefix === true, (qb) => qb.where('recipient_key', '>=', key!).where('recipient_key', '<', `${key!}\uffff`))
    .$if(page.startingAfter !== undefined, (qb) => qb.where('id', '<', page.startingAfter!))
    .$if(backwards, (qb) => qb.where('id', '>', page.endingBefore!))
    .orderBy('id', backwards ? 'asc' : 'desc')
    .limit(page.limit + 1)
    .execute();
  const hasMore = rows.length > page.limit;
  const data = rows.slice(0, page.limit);
  return { data: backwards ? data.reverse() : data, hasMore };
}

export async function findSuppressionById(db: Kysely<Database>, owner: Owner, id: string): Promise<SuppressionRow | undefined> {
  return db.selectFrom('suppressions').selectAll().where('id', '=', id).where('account_id', '=', owner.accountId).where('env', '=', owner.env).executeTakeFirst();
}

/** Takes a recipient off the list; false when there was no such entry (of this account and environment). */
export async function deleteSuppression(db: Kysely<Database>, owner: Owner, id: string): Promise<boolean> {
  const result = await db.deleteFrom('suppressions').where('id', '=', id).where('account_id', '=', owner.accountId).where('env', '=', owner.env).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/**
 * Cancels the notes of this account and environment waiting for a worker (`queued`: due, scheduled or
 * waiting for a retry or a cap) whose recipient is now listed, in the caller's transaction: each with
 * cancel_reason "suppressed", voice_note.canceled and its quota given back (cancel.ts). A note a worker
 * has already taken is stopped by the worker's own check before the platform call (delivery/attempt.ts).
 * The `status = 'queued'` condition of the update is also what a worker's claim changes: one of the two wins.
 */
export async function cancelSuppressedNotes(db: Kysely<Database>, owner: Owner, entries: readonly Pick<NewSuppression, 'platform' | 'key'>[]): Promise<Array<{ message: MessageRow; sent: number | undefined }>> {
  if (entries.length === 0) return [];
  const everywhere = new Set(entries.filter((e) => e.platform === EVERY_PLATFORM).map((e) => e.key));
  const onPlatform = new Set(entries.filter((e) => e.platform !== EVERY_PLATFORM).map((e) => entryKey(e.platform, e.key)));
  const platforms = new Set(entries.map((e) => e.platform));
  // The notes waiting are few beside the whole log: read their recipients, compare them as the list does.
  const waiting = await db
    .selectFrom('messages')
    .select(['id', 'platform', 'recipient'])
    .where('status', '=', 'queued')
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .$if(!platforms.has(EVERY_PLATFORM), (qb) => qb.where('platform', 'in', [...platforms]))
    .execute();
  const ids = waiting
    .filter((m) => {
      const key = recipientKey(m.recipient);
      return everywhere.has(key) || onPlatform.has(entryKey(m.platform, key));
    })
    .map((m) => m.id);
  const canceled: Array<{ message: MessageRow; sent: number | undefined }> = [];
  for (let start = 0; start < ids.length; start += INSERT_CHUNK) {
    const now = dbNow(db);
    const rows = await db
      .updateTable('messages')
      .set({ status: 'canceled', canceled_at: now, cancel_reason: 'suppressed', updated_at: now, credentials: null, lease_owner: null, lease_expires_at: null })
      .where('id', 'in', ids.slice(start, start + INSERT_CHUNK))
      .where('status', '=', 'queued')
      .returningAll()
      .execute();
    for (const message of rows) canceled.push({ message, sent: await giveBackCanceled(db, message, 'suppressed') });
  }
  return canceled;
}

/**
 * A note a worker holds whose recipient became listed after it was claimed: canceled (suppressed) before
 * the platform call, if this worker still holds it. Returns it canceled, or undefined (not ours any more).
 */
export async function cancelClaimedSuppressed(db: Kysely<Database>, messageId: string, workerId: string): Promise<{ message: MessageRow; sent: number | undefined } | undefined> {
  return db.transaction().execute(async (trx) => {
    const now = dbNow(trx);
    const message = await trx
      .updateTable('messages')
      .set({ status: 'canceled', canceled_at: now, cancel_reason: 'suppressed', updated_at: now, credentials: null, lease_owner: null, lease_expires_at: null })
      .where('id', '=', messageId)
      .where('status', '=', 'processing')
      .where('lease_owner', '=', workerId)
      .returningAll()
      .executeTakeFirst();
    if (!message) return undefined;
    return { message, sent: await giveBackCanceled(trx, message, 'suppressed') };
  });
}

export interface Suppressed {
  /** Each entry's row, new or already listed, in the order given. */
  rows: SuppressionRow[];
  /** Notes canceled because of it, each with its usage row's count after it was given back. */
  canceled: Array<{ message: MessageRow; sent: number | undefined }>;
}

/** Lists recipients and cancels what waits for them, in one transaction (an API call, an import, the dashboard). */
export async function suppress(db: Kysely<Database>, owner: Owner, entries: readonly NewSuppression[], how: { source: SuppressionSource; now: number }): Promise<Suppressed> {
  return db.transaction().execute(async (trx) => {
    const rows = await addSuppressions(trx, owner, entries, how);
    const canceled = await cancelSuppressedNotes(trx, owner, entries);
    return { rows, canceled };
  });
}
