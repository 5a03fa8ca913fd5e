import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * Process affinity: which process holds a resource a message needs (an opaque key, such as a platform
 * session whose connection lives in one process), under a lease that runs out when that process dies.
 * The claim query leaves a message whose `affinity` key another process holds to that process; code
 * that owns such a resource takes, renews and lets go of its lease here.
 */

export interface AffinityLease {
  holder: string;
  expiresAt: number;
}

/** Takes the key if nobody holds it, its holder's lease ran out, or it is ours already (compare-and-set). */
export async function claimAffinity(db: Kysely<Database>, key: string, holder: string, now: number, leaseMs: number): Promise<boolean> {
  const row = await db
    .insertInto('affinity_leases')
    .values({ key, holder, expires_at: now + leaseMs })
    .onConflict((oc) =>
      oc
        .column('key')
        .doUpdateSet((eb) => ({ holder: eb.ref('excluded.holder'), expires_at: eb.ref('excluded.expires_at') }))
        .where((eb) => eb.or([eb('affinity_leases.holder', '=', holder), eb('affinity_leases.expires_at', '<', now)])),
    )
    .returning('key')
    .executeTakeFirst();
  return row !== undefined;
}

/** Extends the leases this holder still has; returns the keys it still holds. */
export async function renewAffinities(db: Kysely<Database>, holder: string, keys: string[], until: number): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const rows = await db
    .updateTable('affinity_leases')
    .set({ expires_at: until })
    .where('holder', '=', holder)
    .where('key', 'in', keys)
    .returning('key')
    .execute();
  return new Set(rows.map((r) => r.key));
}

export async function releaseAffinity(db: Kysely<Database>, key: string, holder: string): Promise<void> {
  await db.deleteFrom('affinity_leases').where('key', '=', key).where('holder', '=', holder).execute();
}

/** Forgets the key whoever holds it (the resource is gone). */
export async function dropAffinity(db: Kysely<Database>, key: string): Promise<void> {
  await db.deleteFrom('affinity_leases').where('key', '=', key).execute();
}

/**
 * Inside a transaction: proves `holder` holds the key and locks its lease row (PostgreSQL) until the
 * transaction ends, so a concurrent takeover or deletion waits for the writes that depend on it.
 */
export async function lockHeldAffinity(trx: Kysely<Database>, key: string, holder: string): Promise<boolean> {
  const result = await trx.updateTable('affinity_leases').set({ holder }).where('key', '=', key).where('holder', '=', holder).executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export async function findAffinity(db: Kysely<Database>, key: string): Promise<AffinityLease | undefined> {
  const row = await db.selectFrom('affinity_leases').select(['holder', 'expires_at']).where('key', '=', key).executeTakeFirst();
  return row ? { holder: row.holder, expiresAt: Number(row.expires_at) } : undefined;
}

/** Held by a process other than `holder` under a lease that has not run out. */
export const heldElsewhere = (lease: AffinityLease | undefined, holder: string, now: number): boolean =>
  lease !== undefined && lease.holder !== holder && lease.expiresAt > now;
