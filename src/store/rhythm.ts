import { sql, type Kysely } from 'kysely';
import { allowanceOn, defaultRhythm, NO_RHYTHM, utcDay, type Rhythm } from '../core/rhythm.js';
import { dbNow } from './db.js';
import type { Database, RhythmSettingsTable } from './schema.js';

/**
 * An account's rhythm on a platform: its own setting, else the platform's default (`custom` says which).
 * `defaults`: tests' own defaults instead of the built-in ones.
 */
export async function findRhythm(
  db: Kysely<Database>,
  accountId: string,
  platform: string,
  defaults?: Readonly<Record<string, Rhythm>>,
): Promise<Rhythm & { custom: boolean }> {
  const row = await db.selectFrom('rhythm_settings').selectAll().where('account_id', '=', accountId).where('platform', '=', platform).executeTakeFirst();
  return rhythmOf(row, platform, defaults);
}

/** The key of an account's rhythm on a platform in findRhythms' answer. */
export const rhythmKey = (accountId: string, platform: string): string => `${accountId}\n${platform}`;

/**
 * The rhythms of several accounts and platforms at once (one statement: what one claim of the worker
 * needs), by rhythmKey.
 */
export async function findRhythms(
  db: Kysely<Database>,
  wanted: readonly { accountId: string; platform: string }[],
  defaults?: Readonly<Record<string, Rhythm>>,
): Promise<Map<string, Rhythm>> {
  const found = new Map<string, Rhythm>();
  if (wanted.length === 0) return found;
  const accounts = [...new Set(wanted.map((w) => w.accountId))];
  const rows = await db.selectFrom('rhythm_settings').selectAll().where('account_id', 'in', accounts).execute();
  const byKey = new Map(rows.map((row) => [rhythmKey(row.account_id, row.platform), row]));
  for (const { accountId, platform } of wanted) {
    const key = rhythmKey(accountId, platform);
    if (!found.has(key)) found.set(key, rhythmOf(byKey.get(key), platform, defaults));
  }
  return found;
}

function rhythmOf(row: RhythmSettingsTable | undefined, platform: string, defaults?: Readonly<Record<string, Rhythm>>): Rhythm & { custom: boolean } {
  if (!row) return { ...(defaults ? (defaults[platform] ?? NO_RHYTHM) : defaultRhythm(platform)), custom: false };
  const start = row.warmup_start === null ? null : Number(row.warmup_start);
  const days = row.warmup_days === null ? null : Number(row.warmup_days);
  return {
    dailyCap: row.daily_cap === null ? null : Number(row.daily_cap),
    warmup: start !== null && days !== null ? { start, days } : null,
    custom: true,
  };
}

/** Stores an account's rhythm on a platform; `null` puts the platform's defaults back. */
export async function saveRhythm(db: Kysely<Database>, accountId: string, platform: string, rhythm: Rhythm | null): Promise<void> {
  if (rhythm === null) {
    await db.deleteFrom('rhythm_settings').where('account_id', '=', accountId).where('platform', '=', platform).execute();
    return;
  }
  const values = {
    daily_cap: rhythm.dailyCap,
    warmup_start: rhythm.warmup?.start ?? null,
    warmup_days: rhythm.warmup?.days ?? null,
    updated_at: Date.now(),
  };
  await db
    .insertInto('rhythm_settings')
    .values({ account_id: accountId, platform, ...values })
    .onConflict((oc) => oc.columns(['account_id', 'platform']).doUpdateSet(values))
    .execute();
}

/** The database's time now, in epoch ms. */
async function databaseNow(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ now: number }>`select ${dbNow(db)} as now`.execute(db);
  return Number(rows[0]!.now);
}

export type Reservation = { ok: true; day: number } | { ok: false; day: number; now: number; allowance: number };

/**
 * Takes one place under the sender's cap for today (UTC, database clock) and marks the message as
 * holding it, in one transaction: the count only rises while below the day's allowance, so two
 * processes can never both take the last place. Not ok: the day's places are taken.
 */
export async function reserveSenderPlace(db: Kysely<Database>, input: { senderKey: string; rhythm: Rhythm; messageId: string; workerId: string }): Promise<Reservation> {
  return db.transaction().execute(async (trx) => {
    const taken = await takePlace(trx, input.senderKey, input.rhythm);
    if (!taken.ok) return taken;
    const marked = await trx
      .updateTable('messages')
      .set({ cap_day: taken.day })
      .where('id', '=', input.messageId)
      .where('lease_owner', '=', input.workerId)
      .executeTakeFirst();
    // The lease is gone (another worker has the message): take nothing.
    if (Number(marked.numUpdatedRows) === 0) throw new Error('the message is no longer held by this worker');
    return taken;
  });
}

/**
 * Takes one place under the sender's cap for today for something other than a note (a LinkedIn
 * listening look), in one transaction; never given back. Not ok: the day's places are taken.
 */
export async function takeSenderPlace(db: Kysely<Database>, input: { senderKey: string; rhythm: Rhythm }): Promise<Reservation> {
  return db.transaction().execute((trx) => takePlace(trx, input.senderKey, input.rhythm));
}

/** One place under the sender's cap for today (UTC, database clock), only while the count is below the day's allowance. */
async function takePlace(trx: Kysely<Database>, senderKey: string, rhythm: Rhythm): Promise<Reservation> {
  const now = await databaseNow(trx);
  const day = utcDay(now);
  await trx.insertInto('senders').values({ sender_key: senderKey, first_day: day }).onConflict((oc) => oc.column('sender_key').doNothing()).execute();
  const sender = await trx.selectFrom('senders').select('first_day').where('sender_key', '=', senderKey).executeTakeFirstOrThrow();
  const allowance = allowanceOn(rhythm, Number(sender.first_day), day) ?? Number.MAX_SAFE_INTEGER;
  await trx.insertInto('sender_days').values({ sender_key: senderKey, day, sent: 0 }).onConflict((oc) => oc.columns(['sender_key', 'day']).doNothing()).execute();
  const taken = await trx
    .updateTable('sender_days')
    .set((eb) => ({ sent: eb('sent', '+', 1) }))
    .where('sender_key', '=', senderKey)
    .where('day', '=', day)
    .where('sent', '<', allowance)
    .executeTakeFirst();
  if (Number(taken.numUpdatedRows) === 0) return { ok: false, day, now, allowance };
  return { ok: true, day };
}

/** Gives a message's place under its sender's cap back (its delivery did not go through), once. */
export async function releaseSenderPlace(db: Kysely<Database>, input: { senderKey: string; messageId: string }): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('messages').select('cap_day').where('id', '=', input.messageId).executeTakeFirst();
    if (row?.cap_day == null) return;
    await trx.updateTable('messages').set({ cap_day: null }).where('id', '=', input.messageId).execute();
    await trx
      .updateTable('sender_days')
      .set((eb) => ({ sent: eb('sent', '-', 1) }))
      .where('sender_key', '=', input.senderKey)
      .where('day', '=', Number(row.cap_day))
      .where('sent', '>', 0)
      .execute();
  });
}

/**
 * Deletes the counts of UTC days before `cutoffDay`, one day per statement (a day has a row per sender
 * that sent on it: a short write); returns how many rows went. No index on `day`: once purged the table
 * holds a few weeks of rows per sender, and this runs once an hour.
 */
export async function purgeSenderDaysBefore(
  db: Kysely<Database>,
  cutoffDay: number,
  options: { shouldStop?: () => boolean; pause?: () => Promise<void> } = {},
): Promise<number> {
  let purged = 0;
  for (;;) {
    if (options.shouldStop?.()) return purged;
    const oldest = await db
      .selectFrom('sender_days')
      .select((eb) => eb.fn.min('day').as('day'))
      .where('day', '<', cutoffDay)
      .executeTakeFirst();
    if (oldest?.day == null) return purged;
    const result = await db.deleteFrom('sender_days').where('day', '=', Number(oldest.day)).executeTakeFirst();
    purged += Number(result.numDeletedRows);
    await options.pause?.();
  }
}

/** Writes, before it is shown, that the message's indicator is shown from now for `ms`: never shown twice. False when the lease is gone. */
export async function markIndicatorShown(db: Kysely<Database>, input: { messageId: string; workerId: string; ms: number }): Promise<boolean> {
  const result = await db
    .updateTable('messages')
    .set({ indicator_started_at: dbNow(db), indicator_ms: input.ms })
    .where('id', '=', input.messageId)
    .where('lease_owner', '=', input.workerId)
    .where('indicator_started_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Notes counted today (UTC) per sender of an account on a platform, for the dashboard and the CLI. */
export async function senderCountsToday(db: Kysely<Database>, senderKeyPrefix: string): Promise<Array<{ sender_key: string; sent: number; first_day: number }>> {
  const now = await databaseNow(db);
  const rows = await db
    .selectFrom('senders')
    .leftJoin('sender_days', (join) => join.onRef('sender_days.sender_key', '=', 'senders.sender_key').on('sender_days.day', '=', utcDay(now)))
    .select(['senders.sender_key', 'senders.first_day', 'sender_days.sent'])
    // A prefix compared as text (LIKE would read the ids' `_` as a wildcard).
    .where(sql<string>`substr(senders.sender_key, 1, ${senderKeyPrefix.length})`, '=', senderKeyPrefix)
    .orderBy('senders.sender_key')
    .execute();
  return rows.map((r) => ({ sender_key: r.sender_key, first_day: Number(r.first_day), sent: Number(r.sent ?? 0) }));
}
