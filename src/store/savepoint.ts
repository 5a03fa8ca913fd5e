import type { Kysely } from 'kysely';
import { FixedStatement } from './fixed-statement.js';
import type { Database } from './schema.js';
import type { ItemResult } from './turn-batch.js';

// Around every outcome the worker writes: written out once (fixed-statement.ts).
const SAVEPOINT = new FixedStatement('savepoint piece');
const RELEASE = new FixedStatement('release piece');
const ROLLBACK_TO = new FixedStatement('rollback to piece');

/**
 * Runs `work` inside a savepoint of the transaction `trx`: when it throws, only its own changes are
 * rolled back and the transaction goes on; the error comes back as the result instead of being thrown.
 */
export async function inSavepoint<T>(trx: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<ItemResult<T>> {
  await SAVEPOINT.execute(trx);
  try {
    const value = await work(trx);
    await RELEASE.execute(trx);
    return { ok: true, value };
  } catch (error) {
    await ROLLBACK_TO.execute(trx);
    await RELEASE.execute(trx);
    return { ok: false, error };
  }
}
