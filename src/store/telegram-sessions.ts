import type { Kysely } from 'kysely';
import { forgetSessionProxy } from './sender-proxy.js';
import { telegramSessionView } from '../core/telegram-session-views.js';
import { claimAffinity, dropAffinity, lockHeldAffinity } from './affinity.js';
import { checkSessionRoom, withinLimit } from './limits.js';
import type { Database, TelegramSessionsTable } from './schema.js';
import { deleteAccountState } from './telegram-account-state.js';
import { enqueueEvent } from './webhook-outbox.js';

/**
 * Telegram account sessions (`ts_…`): their rows, their status moves (each with its
 * telegram_session.updated event), and the sealed MTProto authorization. Values arrive and leave
 * sealed: this module never sees a key in clear.
 */

export type TelegramSessionRow = TelegramSessionsTable;
export type TelegramSessionStatus = 'qr_pending' | 'password_needed' | 'connected' | 'disconnected' | 'qr_expired';
export interface Owner {
  accountId: string;
  env: string;
}

type Change = Partial<Pick<TelegramSessionRow, 'status' | 'user_id' | 'username' | 'phone_number' | 'auth_key' | 'qr_payload' | 'qr_expires_at' | 'auto_connect_at' | 'last_connected_at' | 'resting_until'>>;

/**
 * Stores a new session, within its account's cap on sessions linking or linked (by plan, as WhatsApp's:
 * core/plans.ts): throws LimitReachedError, storing nothing, when the account and environment have as
 * many as allowed.
 */
export async function insertTelegramSession(db: Kysely<Database>, row: TelegramSessionRow): Promise<void> {
  await withinLimit(
    db,
    row.account_id,
    (trx) => checkSessionRoom(trx, 'telegram_sessions', row.account_id, row.env),
    async (trx) => void (await trx.insertInto('telegram_sessions').values(row).execute()),
  );
}

export async function findTelegramSession(db: Kysely<Database>, owner: Owner, id: string): Promise<TelegramSessionRow | undefined> {
  return db
    .selectFrom('telegram_sessions')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .executeTakeFirst();
}

export async function findTelegramSessionById(db: Kysely<Database>, id: string): Promise<TelegramSessionRow | undefined> {
  return db.selectFrom('telegram_sessions').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function listTelegramSessions(db: Kysely<Database>, owner: Owner): Promise<TelegramSessionRow[]> {
  return db.selectFrom('telegram_sessions').selectAll().where('account_id', '=', owner.accountId).where('env', '=', owner.env).orderBy('id').execute();
}

/**
 * Moves a session only if it is still in one of `from` (compare-and-set, so two processes seeing the
 * same timeout cannot both apply it); a move of the status enqueues telegram_session.updated in the
 * same transaction. True when it moved.
 */
export async function transitionTelegramSession(db: Kysely<Database>, id: string, from: TelegramSessionStatus[], change: Change, now = Date.now()): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const result = await trx.updateTable('telegram_sessions').set({ ...change, updated_at: now }).where('id', '=', id).where('status', 'in', from).executeTakeFirst();
    const moved = Number(result.numUpdatedRows) > 0;
    if (moved && change.status !== undefined) {
      const row = await findTelegramSessionById(trx, id);
      if (row) await enqueueEvent(trx, { accountId: row.account_id, env: row.env, type: 'telegram_session.updated', data: telegramSessionView(row), at: now });
    }
    return moved;
  });
}

/** Writes a change (the sealed key after linking, a rest) only while `holder` holds the session's lease. */
export async function updateHeldTelegramSession(db: Kysely<Database>, id: string, holder: string, change: Change, now = Date.now()): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    if (!(await lockHeldAffinity(trx, id, holder))) return false;
    const result = await trx.updateTable('telegram_sessions').set({ ...change, updated_at: now }).where('id', '=', id).executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  });
}

/** Erases the session and its sealed key, and forgets its lease. */
export async function deleteTelegramSession(db: Kysely<Database>, owner: Owner, id: string): Promise<boolean> {
  const result = await db
    .deleteFrom('telegram_sessions')
    .where('id', '=', id)
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .executeTakeFirst();
  const deleted = Number(result.numDeletedRows) > 0;
  if (deleted) {
    await dropAffinity(db, id);
    await deleteAccountState(db, id);
    await forgetSessionProxy(db, 'telegram', id);
  }
  return deleted;
}

/** Live connected sessions whose lease is free or ran out: a process should take them over. */
export async function findOrphanedTelegramSessions(db: Kysely<Database>, now: number, limit: number): Promise<string[]> {
  const rows = await db
    .selectFrom('telegram_sessions')
    .leftJoin('affinity_leases', 'affinity_leases.key', 'telegram_sessions.id')
    .select('telegram_sessions.id')
    .where('telegram_sessions.env', '=', 'live')
    .where('telegram_sessions.status', '=', 'connected')
    .where('telegram_sessions.auth_key', 'is not', null)
    .where((eb) => eb.or([eb('affinity_leases.key', 'is', null), eb('affinity_leases.expires_at', '<', now)]))
    .orderBy('telegram_sessions.id')
    .limit(limit)
    .execute();
  return rows.map((r) => r.id);
}

export const claimTelegramSession = (db: Kysely<Database>, id: string, holder: string, now: number, leaseMs: number): Promise<boolean> =>
  claimAffinity(db, id, holder, now, leaseMs);
