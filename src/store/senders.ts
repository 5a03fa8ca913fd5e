import type { Page } from './message-log.js';
import type { Kysely } from 'kysely';
import { newSenderId } from '../core/ids.js';
import { utcDay, type Rhythm } from '../core/rhythm.js';
import { makeQueuedNotesDue } from './queued-notes.js';
import { newSenderRecord, type SenderRef } from './sender-record.js';
import { FixedStatement } from './fixed-statement.js';
import type { Database, SenderRecordsTable } from './schema.js';
import { senderViews, type SenderView } from './sender-view.js';
import { enqueueEvent } from './webhook-outbox.js';

/**
 * Each sender's health in one place (docs/senders.md, "Senders"): a WhatsApp session, a Telegram bot, a LinkedIn
 * cookie, as one account uses it in one environment. Named by the platform's own `sender_key` (never the
 * credential). Its status comes from what the platforms say: a delivery's outcome, a session's listener.
 */

export type SenderRow = SenderRecordsTable;
export const SENDER_STATUSES = ['ok', 'resting', 'restricted', 'expired', 'disconnected'] as const;
export type SenderStatus = (typeof SENDER_STATUSES)[number];

export type { SenderRef } from './sender-record.js';

export interface SenderChange {
  status: SenderStatus;
  reason: string | null;
  /** When a rest or a lock ends (epoch ms), if known. */
  until: number | null;
  /** `expired`: the delivery error its other notes fail with (session_expired, invalid_session). */
  failureCode?: string | null;
}

// The worker writes this with every settled note, in the settle's transaction: one statement that
// creates the record on first use and counts the note when it was delivered (`sent_today` 1 and its
// UTC day in `sent_day`; a failed note has 0 and no day). Written out once (fixed-statement.ts).
//
// On PostgreSQL an outcome batch's notes are counted by ONE statement (statement-batch.ts), with one row
// per sender, as one statement may not change a row twice. It comes to what the calls one after the
// other would: the first call's id, kind and creation time; the last label given; the latest send; and
// the notes delivered on the latest day among them, added to the record's count when the record is of
// that day (a batch that spans midnight counts only the new day's notes, as the last call would).
// `last_sent_at` only moves forward: a note's time is taken when its attempt ends, and outcomes that end
// together may commit in another order (a later batch can carry only earlier notes).
const TOUCH_UPDATE = `on conflict (sender_key, platform, account_id, env) do update set
     label = coalesce(excluded.label, sender_records.label),
     sent_today = case when excluded.sent_day is null then sender_records.sent_today
                       when sender_records.sent_day = excluded.sent_day then sender_records.sent_today + excluded.sent_today
                       else excluded.sent_today end,
     sent_day = coalesce(excluded.sent_day, sender_records.sent_day),
     last_sent_at = case when sender_records.last_sent_at is null or excluded.last_sent_at > sender_records.last_sent_at
                         then excluded.last_sent_at else sender_records.last_sent_at end,
     updated_at = excluded.updated_at`;
const TOUCH = new FixedStatement(
  `insert into sender_records (id, account_id, env, platform, sender_key, kind, label, status, last_sent_at, sent_day, sent_today, created_at, updated_at)
   values (?, ?, ?, ?, ?, ?, ?, 'ok', cast(? as bigint), cast(? as bigint), ?, cast(? as bigint), cast(? as bigint))
   ${TOUCH_UPDATE}`,
  {
    text: `insert into sender_records (id, account_id, env, platform, sender_key, kind, label, status, last_sent_at, sent_day, sent_today, created_at, updated_at)
      select (array_agg(id order by i))[1], account_id, env, platform, sender_key, (array_agg(kind order by i))[1],
        (array_agg(label order by i desc) filter (where label is not null))[1], 'ok', max(last_sent_at), max(sent_day),
        coalesce(sum(sent_today) filter (where sent_day = latest_day), 0)::integer, (array_agg(created_at order by i))[1], max(updated_at)
      from (
        select u.*, max(u.sent_day) over (partition by u.sender_key, u.platform, u.account_id, u.env) as latest_day
        from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::integer[], $11::bigint[], $12::bigint[])
          with ordinality as u(id, account_id, env, platform, sender_key, kind, label, last_sent_at, sent_day, sent_today, created_at, updated_at, i)
      ) as v
      group by sender_key, platform, account_id, env
      -- Rows locked in one order by every batch: two batches at once never wait for each other in a circle.
      order by sender_key, platform, account_id, env
      ${TOUCH_UPDATE}`,
    arrays: [[0, 'text[]'], [1, 'text[]'], [2, 'text[]'], [3, 'text[]'], [4, 'text[]'], [5, 'text[]'], [6, 'text[]'], [7, 'bigint[]'], [8, 'bigint[]'], [9, 'integer[]'], [10, 'bigint[]'], [11, 'bigint[]']],
    perCall: 'none',
  },
);

/** A note of this sender was settled at `at` (delivered or failed): the record made or brought up to date. */
export async function touchSender(db: Kysely<Database>, ref: SenderRef, kind: string, outcome: { delivered: boolean; at: number; label?: string | null }): Promise<void> {
  const sentAt = outcome.delivered ? outcome.at : null;
  await TOUCH.execute(db, [
    newSenderId(outcome.at),
    ref.accountId,
    ref.env,
    ref.platform,
    ref.senderKey,
    kind,
    outcome.label ?? null,
    sentAt,
    sentAt === null ? null : utcDay(sentAt),
    sentAt === null ? 0 : 1,
    outcome.at,
    outcome.at,
  ]);
}

const byRef = (db: Kysely<Database>, ref: SenderRef) =>
  db
    .selectFrom('sender_records')
    .selectAll()
    .where('sender_key', '=', ref.senderKey)
    .where('platform', '=', ref.platform)
    .where('account_id', '=', ref.accountId)
    .where('env', '=', ref.env);

export async function findSenderByRef(db: Kysely<Database>, ref: SenderRef): Promise<SenderRow | undefined> {
  return byRef(db, ref).executeTakeFirst();
}

/**
 * Sets a sender's status; when the status changed, its `sender.updated` event is written in the same
 * transaction. The record is made when missing, unless `onlyIfKnown` (a listener's news of a sender no
 * note used yet). Compare-and-set on the status read: of two processes making the same change, one
 * writes it and its event. When a sender becomes `expired`, its queued notes waiting for a retry are made
 * due now, to fail at once with the same error (delivery/sender-gate.ts). True when the status changed.
 */
export async function setSenderStatus(
  db: Kysely<Database>,
  ref: SenderRef,
  change: SenderChange,
  /** `endedBy`: only if the record's rest or lock ends by then (writing its end never undoes a newer one). */
  options: { kind?: string; onlyIfKnown?: boolean; now?: number; endedBy?: number } = {},
): Promise<boolean> {
  const work = async (trx: Kysely<Database>): Promise<boolean> => {
    const now = options.now ?? Date.now();
    let row = await findSenderByRef(trx, ref);
    if (!row) {
      if (options.onlyIfKnown) return false;
      const fresh = newSenderRecord(ref, options.kind ?? ref.platform, now);
      await trx
        .insertInto('sender_records')
        .values(fresh)
        .onConflict((oc) => oc.columns(['sender_key', 'platform', 'account_id', 'env']).doNothing())
        .execute();
      row = await findSenderByRef(trx, ref);
      if (!row) return false;
    }
    const failureCode = change.status === 'expired' ? (change.failureCode ?? row.failure_code ?? 'session_expired') : null;
    const same = row.status === change.status && row.reason === change.reason && numberOrNull(row.until) === change.until && row.failure_code === failureCode;
    if (same) return false;
    const result = await trx
      .updateTable('sender_records')
      .set({ status: change.status, reason: change.reason, until: change.until, failure_code: failureCode, updated_at: now })
      .where('id', '=', row.id)
      .where('status', '=', row.status)
      .$if(options.endedBy !== undefined, (qb) => qb.where('until', '<=', options.endedBy!))
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0 || row.status === change.status) return false;
    const [view] = await senderViews(trx, [{ ...row, status: change.status, reason: change.reason, until: change.until, updated_at: now }], now);
    await enqueueEvent(trx, { accountId: ref.accountId, env: ref.env, type: 'sender.updated', data: view, at: now });
    if (change.status === 'expired') await hurryQueuedNotes(trx, ref);
    return true;
  };
  return db.isTransaction ? work(db) : db.transaction().execute(work);
}

const numberOrNull = (value: number | null): number | null => (value === null ? null : Number(value));

/**
 * An expired sender's queued notes that wait for a retry or a rest are made due now, so that they fail
 * at once (without trying the platform). Scheduled ones (`send_at` ahead) keep their time: a session
 * linked again by then sends them.
 */
async function hurryQueuedNotes(trx: Kysely<Database>, ref: SenderRef): Promise<void> {
  await makeQueuedNotesDue(trx, ref);
}

/** The senders not `ok` among those the notes of one claim name (one statement), by senderHoldKey. */
export async function findSenderHolds(db: Kysely<Database>, refs: readonly SenderRef[]): Promise<Map<string, SenderRow>> {
  const found = new Map<string, SenderRow>();
  if (refs.length === 0) return found;
  const keys = [...new Set(refs.map((r) => r.senderKey))];
  const rows = await db.selectFrom('sender_records').selectAll().where('sender_key', 'in', keys).where('status', '<>', 'ok').execute();
  for (const row of rows) found.set(senderHoldKey({ accountId: row.account_id, env: row.env, platform: row.platform, senderKey: row.sender_key }), row);
  return found;
}

export const senderHoldKey = (ref: SenderRef): string => `${ref.accountId}\n${ref.env}\n${ref.platform}\n${ref.senderKey}`;

/** Senders whose rest or lock has ended by `now` while their record still says so (to write the end, with its event). */
export async function findEndedHolds(db: Kysely<Database>, now: number, limit = 100): Promise<SenderRow[]> {
  return db.selectFrom('sender_records').selectAll().where('status', 'in', ['resting', 'restricted']).where('until', '<=', now).limit(limit).execute();
}

/** The sender delivered a note to this recipient before (its chat exists). */
export async function senderWroteTo(db: Kysely<Database>, ref: SenderRef, recipient: string): Promise<boolean> {
  const row = await db
    .selectFrom('messages')
    .select('id')
    .where('sender_key', '=', ref.senderKey)
    .where('recipient', '=', recipient)
    .where('account_id', '=', ref.accountId)
    .where('env', '=', ref.env)
    .where('status', '=', 'delivered')
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

export interface Owner {
  accountId: string;
  env: string;
}

/** The message log's cursor paging: ids are time-sortable, so they are the cursor. */
export type SenderPage = Page;

/** One page of an account's senders, newest first (ids are time-sortable: the cursor, as for messages). */
export async function listSenders(
  db: Kysely<Database>,
  owner: Owner,
  page: SenderPage,
  defaults?: Readonly<Record<string, Rhythm>>,
): Promise<{ data: SenderView[]; hasMore: boolean }> {
  const backwards = page.endingBefore !== undefined && page.startingAfter === undefined;
  const rows = await db
    .selectFrom('sender_records')
    .selectAll()
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .$if(page.startingAfter !== undefined, (qb) => qb.where('id', '<', page.startingAfter!))
    .$if(backwards, (qb) => qb.where('id', '>', page.endingBefore!))
    .orderBy('id', backwards ? 'asc' : 'desc')
    .limit(page.limit + 1)
    .execute();
  const hasMore = rows.length > page.limit;
  const kept = rows.slice(0, page.limit);
  return { data: await senderViews(db, backwards ? kept.reverse() : kept, Date.now(), defaults), hasMore };
}

export async function findSender(db: Kysely<Database>, owner: Owner, id: string, defaults?: Readonly<Record<string, Rhythm>>): Promise<SenderView | undefined> {
  const row = await db.selectFrom('sender_records').selectAll().where('id', '=', id).where('account_id', '=', owner.accountId).where('env', '=', owner.env).executeTakeFirst();
  if (!row) return undefined;
  return (await senderViews(db, [row], Date.now(), defaults))[0];
}

/**
 * A listener found a live credential dead (a LinkedIn li_at signed out on its realtime stream or a look):
 * every live sender record of it becomes `expired` with `session_expired`, as a delivery's 401 makes it,
 * with its `sender.updated` event. Records no note made yet stay unmade.
 */
export async function expireLiveSender(db: Kysely<Database>, platform: string, senderKey: string, reason: string): Promise<void> {
  const rows = await db.selectFrom('sender_records').select(['account_id', 'env']).where('platform', '=', platform).where('sender_key', '=', senderKey).where('env', '=', 'live').execute();
  for (const row of rows) {
    const ref = { accountId: row.account_id, env: row.env, platform, senderKey };
    await setSenderStatus(db, ref, { status: 'expired', reason, until: null, failureCode: 'session_expired' }, { onlyIfKnown: true });
  }
}

/**
 * A WhatsApp session's connection changed (docs/senders.md, "Senders"): its sender follows, if a note used it —
 * `expired` when the phone logged the device out, `disconnected` when it is not connected, `ok` when it is
 * connected (again).
 */
export async function followWhatsappSession(db: Kysely<Database>, sessionId: string, change: { status: SenderStatus; reason: string | null }): Promise<void> {
  const session = await db.selectFrom('whatsapp_sessions').select(['account_id', 'env']).where('id', '=', sessionId).executeTakeFirst();
  if (!session) return;
  const ref = { accountId: session.account_id, env: session.env, platform: 'whatsapp', senderKey: sessionId };
  const failureCode = change.status === 'expired' ? 'session_expired' : null;
  await setSenderStatus(db, ref, { status: change.status, reason: change.reason, until: null, failureCode }, { onlyIfKnown: true });
}
