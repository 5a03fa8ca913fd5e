import type { Kysely } from 'kysely';
import type { Database, IdempotencyKeysTable } from './schema.js';

export type IdempotencyRow = IdempotencyKeysTable;

/** How long a stored response is replayed for the same Idempotency-Key. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

export async function findIdempotent(
  db: Kysely<Database>,
  scope: { accountId: string; env: string; key: string },
  now = Date.now(),
): Promise<IdempotencyRow | undefined> {
  return db
    .selectFrom('idempotency_keys')
    .selectAll()
    .where('account_id', '=', scope.accountId)
    .where('env', '=', scope.env)
    .where('key', '=', scope.key)
    .where('created_at', '>', now - IDEMPOTENCY_TTL_MS)
    .executeTakeFirst();
}

/** Stores a response; false when a concurrent request stored one under the same key first. */
export async function storeIdempotent(db: Kysely<Database>, row: IdempotencyRow): Promise<boolean> {
  // A row for the same key older than the TTL is dead: replace it.
  await db
    .deleteFrom('idempotency_keys')
    .where('account_id', '=', row.account_id)
    .where('env', '=', row.env)
    .where('key', '=', row.key)
    .where('created_at', '<=', row.created_at - IDEMPOTENCY_TTL_MS)
    .execute();
  const result = await db
    .insertInto('idempotency_keys')
    .values(row)
    .onConflict((oc) => oc.columns(['account_id', 'env', 'key']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n) > 0;
}

export async function purgeExpiredIdempotency(db: Kysely<Database>, now = Date.now()): Promise<void> {
  await db.deleteFrom('idempotency_keys').where('created_at', '<=', now - IDEMPOTENCY_TTL_MS).execute();
}
