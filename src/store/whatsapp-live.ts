import type { Kysely } from 'kysely';
import { forgetSessionProxy } from './sender-proxy.js';
import { claimAffinity, dropAffinity, lockHeldAffinity, releaseAffinity, renewAffinities } from './affinity.js';
import { followWhatsappSession, type SenderStatus } from './senders.js';
import { recordSessionStatusChange } from './webhook-outbox.js';
import type { Database } from './schema.js';
import type { WhatsappSessionRow, WhatsappSessionStatus } from './whatsapp-sessions.js';
import { forgetSentMessages } from './whatsapp-sent-messages.js';

/**
 * Live WhatsApp sessions: the lease that gives one process the session's socket (an affinity lease keyed
 * by the session id, so the messages of the session go to that process), and the sealed auth
 * state (creds in `whatsapp_sessions.auth_state`, signal keys in `whatsapp_keys`; what the session
 * sent, for resend requests, in `whatsapp_sent_messages`). Values arrive and
 * leave sealed; this module never sees a secret in clear.
 */

export type LiveSessionRow = WhatsappSessionRow & { holder: string | null; holder_expires_at: number | null };

/** The session with the lease of its socket (affinity key = the session id). */
export async function findSessionById(db: Kysely<Database>, id: string): Promise<LiveSessionRow | undefined> {
  const row = await db
    .selectFrom('whatsapp_sessions')
    .leftJoin('affinity_leases', 'affinity_leases.key', 'whatsapp_sessions.id')
    .selectAll('whatsapp_sessions')
    .select(['affinity_leases.holder as holder', 'affinity_leases.expires_at as holder_expires_at'])
    .where('whatsapp_sessions.id', '=', id)
    .executeTakeFirst();
  return row ? { ...row, holder: row.holder ?? null, holder_expires_at: row.holder_expires_at ?? null } : undefined;
}

/** Takes the session if nobody holds it, its holder's lease ran out, or it is ours already (compare-and-set). */
export const claimSession = (db: Kysely<Database>, id: string, holder: string, now: number, leaseMs: number): Promise<boolean> =>
  claimAffinity(db, id, holder, now, leaseMs);

/** Extends the leases this holder still has; returns the ids it still holds. */
export const renewLeases = (db: Kysely<Database>, holder: string, ids: string[], until: number): Promise<Set<string>> =>
  renewAffinities(db, holder, ids, until);

export const releaseLease = (db: Kysely<Database>, id: string, holder: string): Promise<void> => releaseAffinity(db, id, holder);

/**
 * Live sessions that should have a socket somewhere but whose lease is free or ran out: connected ones,
 * and ones that were scanned (no QR deadline any more) but not yet open.
 */
export async function findOrphanedSessions(db: Kysely<Database>, now: number, limit: number): Promise<string[]> {
  const rows = await db
    .selectFrom('whatsapp_sessions')
    .leftJoin('affinity_leases', 'affinity_leases.key', 'whatsapp_sessions.id')
    .select('whatsapp_sessions.id')
    .where('whatsapp_sessions.env', '=', 'live')
    .where('whatsapp_sessions.auth_state', 'is not', null)
    .where((eb) =>
      eb.or([
        eb('whatsapp_sessions.status', '=', 'connected'),
        eb.and([eb('whatsapp_sessions.status', '=', 'qr_pending'), eb('whatsapp_sessions.qr_expires_at', 'is', null)]),
      ]),
    )
    .where((eb) => eb.or([eb('affinity_leases.key', 'is', null), eb('affinity_leases.expires_at', '<', now)]))
    .orderBy('affinity_leases.expires_at')
    .limit(limit)
    .execute();
  return rows.map((r) => r.id);
}

/** Writes the sealed creds, only while `holder` holds the session. */
export async function saveSealedCreds(db: Kysely<Database>, id: string, holder: string, sealed: string): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    if (!(await lockHeldAffinity(trx, id, holder))) return false;
    const result = await trx.updateTable('whatsapp_sessions').set({ auth_state: sealed }).where('id', '=', id).executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  });
}

export async function readSealedKeys(db: Kysely<Database>, sessionId: string, type: string, keyIds: string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for (let i = 0; i < keyIds.length; i += KEY_BATCH) {
    const rows = await db
      .selectFrom('whatsapp_keys')
      .select(['key_id', 'value'])
      .where('session_id', '=', sessionId)
      .where('type', '=', type)
      .where('key_id', 'in', keyIds.slice(i, i + KEY_BATCH))
      .execute();
    for (const row of rows) found.set(row.key_id, row.value);
  }
  return found;
}

export interface SealedKeyWrite {
  type: string;
  keyId: string;
  /** null deletes the key. */
  value: string | null;
}

// Rows per statement: four parameters each stays far below both dialects' parameter limits.
const KEY_BATCH = 200;

/**
 * Applies key writes in one transaction, only while `holder` holds the session: a process that lost
 * its lease must not overwrite the keys of the one that took over. Returns false when it did not hold it.
 */
export async function writeSealedKeys(db: Kysely<Database>, sessionId: string, holder: string, writes: SealedKeyWrite[]): Promise<boolean> {
  if (writes.length === 0) return true;
  return db.transaction().execute(async (trx) => {
    // Proves the lease and locks it (PostgreSQL) in the same step: a deletion waits for these writes.
    if (!(await lockHeldAffinity(trx, sessionId, holder))) return false;
    const exists = await trx.selectFrom('whatsapp_sessions').select('id').where('id', '=', sessionId).executeTakeFirst();
    if (!exists) return false;
    const upserts = new Map<string, { session_id: string; type: string; key_id: string; value: string }>();
    const deletes: SealedKeyWrite[] = [];
    for (const write of writes) {
      const slot = `${write.type}\u0000${write.keyId}`;
      upserts.delete(slot);
      if (write.value === null) deletes.push(write);
      else upserts.set(slot, { session_id: sessionId, type: write.type, key_id: write.keyId, value: write.value });
    }
    for (const del of deletes) {
      await trx
        .deleteFrom('whatsapp_keys')
        .where('session_id', '=', sessionId)
        .where('type', '=', del.type)
        .where('key_id', '=', del.keyId)
        .execute();
    }
    const rows = [...upserts.values()];
    for (let i = 0; i < rows.length; i += KEY_BATCH) {
      await trx
        .insertInto('whatsapp_keys')
        .values(rows.slice(i, i + KEY_BATCH))
        .onConflict((oc) => oc.columns(['session_id', 'type', 'key_id']).doUpdateSet((eb) => ({ value: eb.ref('excluded.value') })))
        .execute();
    }
    return true;
  });
}

/**
 * Ends a session for good in one step: the final status (when it is still in `from`), its credentials
 * voided, its lease let go — so nobody can read the status without the erasure having happened.
 */
export async function endLiveSession(
  db: Kysely<Database>,
  id: string,
  from: WhatsappSessionStatus[],
  status: WhatsappSessionStatus,
  now: number,
  /** What it means for the session's sender, if a note used it (docs/senders.md, "Senders"). */
  sender?: { status: SenderStatus; reason: string },
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await dropAffinity(trx, id);
    await trx.deleteFrom('whatsapp_keys').where('session_id', '=', id).execute();
    // The session's row before what it sent: a copy being kept holds that row (FOR SHARE) until it is
    // committed, so the delete below, which waits behind it, sees the copy (whatsapp-sent-messages.ts).
    await trx.updateTable('whatsapp_sessions').set({ auth_state: null }).where('id', '=', id).execute();
    // Nothing can resend for a device that is gone: what it sent goes with its credentials.
    await forgetSentMessages(trx, id);
    const ended = await trx.updateTable('whatsapp_sessions').set({ status, updated_at: now }).where('id', '=', id).where('status', 'in', from).executeTakeFirst();
    // Webhooks: whatsapp_session.updated, committed with the status it reports.
    if (Number(ended.numUpdatedRows) > 0) await recordSessionStatusChange(trx, id, now);
    if (Number(ended.numUpdatedRows) > 0 && sender) await followWhatsappSession(trx, id, sender);
  });
}

/** Removes a session and everything stored for it. */
export async function deleteSessionAndAuth(db: Kysely<Database>, sessionId: string): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    // The lease first: a holder's key writes lock it, so they finish before the session goes.
    await dropAffinity(trx, sessionId);
    await trx.deleteFrom('whatsapp_keys').where('session_id', '=', sessionId).execute();
    await forgetSentMessages(trx, sessionId);
    const result = await trx.deleteFrom('whatsapp_sessions').where('id', '=', sessionId).executeTakeFirst();
    await forgetSessionProxy(trx, 'whatsapp', sessionId);
    return Number(result.numDeletedRows) > 0;
  });
}
