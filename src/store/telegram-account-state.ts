import type { Kysely } from 'kysely';
import { lockHeldAffinity } from './affinity.js';
import type { Database } from './schema.js';

/**
 * What a linked Telegram account keeps beside its session row: its update state (where
 * updates.getDifference starts after a gap), the length of its last PEER_FLOOD rest, and the
 * recipients it has resolved (user id and access hash).
 */

/** Telegram's update state of an account (core.telegram.org/api/updates). */
export interface UpdateState {
  pts: number;
  qts: number;
  date: number;
  seq: number;
}

export async function findUpdateState(db: Kysely<Database>, sessionId: string): Promise<UpdateState | undefined> {
  const row = await db.selectFrom('telegram_update_states').select(['pts', 'qts', 'date', 'seq']).where('session_id', '=', sessionId).executeTakeFirst();
  if (!row || row.pts === null || row.date === null) return undefined;
  return { pts: Number(row.pts), qts: Number(row.qts ?? 0), date: Number(row.date), seq: Number(row.seq ?? 0) };
}

/** Keeps the state, only while `holder` holds the session's lease (a process that lost it must not set it back). */
export async function saveUpdateState(db: Kysely<Database>, sessionId: string, holder: string, state: UpdateState, now = Date.now()): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    if (!(await lockHeldAffinity(trx, sessionId, holder))) return false;
    await trx
      .insertInto('telegram_update_states')
      .values({ session_id: sessionId, ...state, peer_flood_rest_ms: null, updated_at: now })
      .onConflict((oc) => oc.column('session_id').doUpdateSet({ pts: state.pts, qts: state.qts, date: state.date, seq: state.seq, updated_at: now }))
      .execute();
    return true;
  });
}

/** The length of the account's last PEER_FLOOD rest, if one is remembered. */
export async function findPeerFloodRest(db: Kysely<Database>, sessionId: string): Promise<number | undefined> {
  const row = await db.selectFrom('telegram_update_states').select('peer_flood_rest_ms').where('session_id', '=', sessionId).executeTakeFirst();
  return row?.peer_flood_rest_ms === null || row?.peer_flood_rest_ms === undefined ? undefined : Number(row.peer_flood_rest_ms);
}

/** A note went out: the next PEER_FLOOD is a first one again (one statement that changes nothing most times). */
export async function clearPeerFloodRest(db: Kysely<Database>, sessionId: string): Promise<void> {
  await db.updateTable('telegram_update_states').set({ peer_flood_rest_ms: null }).where('session_id', '=', sessionId).where('peer_flood_rest_ms', 'is not', null).execute();
}

/** Remembers the length of the rest just begun. */
export async function savePeerFloodRest(db: Kysely<Database>, sessionId: string, restMs: number, now = Date.now()): Promise<void> {
  await db
    .insertInto('telegram_update_states')
    .values({ session_id: sessionId, pts: null, qts: null, date: null, seq: null, peer_flood_rest_ms: restMs, updated_at: now })
    .onConflict((oc) => oc.column('session_id').doUpdateSet({ peer_flood_rest_ms: restMs, updated_at: now }))
    .execute();
}

/** A recipient as this account resolved it before. */
export interface KeptPeer {
  userId: string;
  accessHash: string;
}

export async function findPeer(db: Kysely<Database>, sessionId: string, recipient: string): Promise<KeptPeer | undefined> {
  const row = await db.selectFrom('telegram_peers').select(['user_id', 'access_hash']).where('session_id', '=', sessionId).where('recipient', '=', recipient).executeTakeFirst();
  return row ? { userId: row.user_id, accessHash: row.access_hash } : undefined;
}

export async function savePeer(db: Kysely<Database>, sessionId: string, recipient: string, peer: KeptPeer, now = Date.now()): Promise<void> {
  await db
    .insertInto('telegram_peers')
    .values({ session_id: sessionId, recipient, user_id: peer.userId, access_hash: peer.accessHash, resolved_at: now })
    .onConflict((oc) => oc.columns(['session_id', 'recipient']).doUpdateSet({ user_id: peer.userId, access_hash: peer.accessHash, resolved_at: now }))
    .execute();
}

export async function forgetPeer(db: Kysely<Database>, sessionId: string, recipient: string): Promise<void> {
  await db.deleteFrom('telegram_peers').where('session_id', '=', sessionId).where('recipient', '=', recipient).execute();
}

/** Everything kept for a session, erased with it. */
export async function deleteAccountState(db: Kysely<Database>, sessionId: string): Promise<void> {
  await db.deleteFrom('telegram_peers').where('session_id', '=', sessionId).execute();
  await db.deleteFrom('telegram_update_states').where('session_id', '=', sessionId).execute();
}
