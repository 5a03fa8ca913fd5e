import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { ItemResult } from './turn-batch.js';

/**
 * Runs `work` inside a savepoint of the transaction `trx`: when it throws, only its own changes are
 * rolled back and the transaction goes on; the error comes back as the result instead of being thrown.
 */
export async function inSavepoint<T>(trx: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<ItemResult<T>> {
  await sql`savepoint piece`.execute(trx);
  try {
    const value = await work(trx);
    await sql`release piece`.execute(trx);
    return { ok: true, value };
  } catch (error) {
    await sql`rollback to piece`.execute(trx);
    await sql`release piece`.execute(trx);
    return { ok: false, error };
  }
}
