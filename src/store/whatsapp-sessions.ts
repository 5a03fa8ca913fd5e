import type { Kysely } from 'kysely';
import { forgetSessionProxy } from './sender-proxy.js';
import type { Database, WhatsappSessionsTable } from './schema.js';
import { checkSessionRoom, withinLimit } from './limits.js';
import { followWhatsappSession } from './senders.js';
import { recordSessionStatusChange } from './webhook-outbox.js';

export type WhatsappSessionRow = WhatsappSessionsTable;
export type WhatsappSessionStatus = 'qr_pending' | 'connected' | 'disconnected' | 'qr_expired';
export interface Owner {
  accountId: string;
  env: string;
}

/**
 * Stores a new session, within its account's cap on sessions linking or linked (by plan, core/plans.ts):
 * throws LimitReachedError, storing nothing, when the account and environment have as many as allowed.
 */
export async function insertWhatsappSession(db: Kysely<Database>, row: WhatsappSessionRow): Promise<void> {
  await withinLimit(
    db,
    row.account_id,
    (trx) => checkSessionRoom(trx, 'whatsapp_sessions', row.account_id, row.env),
    async (trx) => void (await trx.insertInto('whatsapp_sessions').values(row).execute()),
  );
}

export async function findWhatsappSession(db: Kysely<Database>, owner: Owner, id: string): Promise<WhatsappSessionRow | undefined> {
  return db
    .selectFrom('whatsapp_sessions')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .executeTakeFirst();
}

export async function listWhatsappSessions(db: Kysely<Database>, owner: Owner): Promise<WhatsappSessionRow[]> {
  return db
    .selectFrom('whatsapp_sessions')
    .selectAll()
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .orderBy('id')
    .execute();
}

/**
 * Moves a session to a new status only if it is still in `from` (compare-and-set), so two nodes
 * observing the same timeout cannot both apply it. Returns the row as it is afterwards.
 */
export async function transitionWhatsappSession(
  db: Kysely<Database>,
  id: string,
  from: WhatsappSessionStatus[],
  change: Partial<Pick<WhatsappSessionRow, 'status' | 'phone_number' | 'last_connected_at' | 'qr_expires_at' | 'auto_connect_at' | 'auth_state'>>,
  now = Date.now(),
): Promise<boolean> {
  const result = await db
    .updateTable('whatsapp_sessions')
    .set({ ...change, updated_at: now })
    .where('id', '=', id)
    .where('status', 'in', from)
    .executeTakeFirst();
  const moved = Number(result.numUpdatedRows) > 0;
  // Webhooks: whatsapp_session.updated on every move of the status.
  if (moved && change.status !== undefined) await recordSessionStatusChange(db, id, now);
  // Its sender (docs/senders.md, "Senders"): linked again is ok again; a disconnected session's notes cannot go.
  if (moved && change.status === 'connected') await followWhatsappSession(db, id, { status: 'ok', reason: null });
  if (moved && change.status === 'disconnected') await followWhatsappSession(db, id, { status: 'disconnected', reason: 'the WhatsApp session is disconnected' });
  return moved;
}

export async function deleteWhatsappSession(db: Kysely<Database>, owner: Owner, id: string): Promise<boolean> {
  const result = await db
    .deleteFrom('whatsapp_sessions')
    .where('id', '=', id)
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .executeTakeFirst();
  const deleted = Number(result.numDeletedRows) > 0;
  if (deleted) await forgetSessionProxy(db, 'whatsapp', id);
  return deleted;
}
