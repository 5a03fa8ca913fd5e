import type { Kysely } from 'kysely';
import { FixedStatement } from './fixed-statement.js';
import type { Database } from './schema.js';
import type { ItemResult } from './turn-batch.js';

// Around every outcome the worker writes: written out once (fixed-statement.ts).
const SAVEPOINT = new FixedStatement('savepoint piece');
const RELEASE = new FixedStatement('release piece');
const ROLLBACK_TO = new FixedStatement('rollback to piece');

/**
 * Transactions run first without savepoints (outcome-batch.ts): in one, a piece of work that would
 * have run in a savepoint runs straight in the transaction, and its failure ends the whole transaction
 * (its owner rolls it back and runs it all again with savepoints). A savepoint and its release are two
 * statements (two round trips on PostgreSQL) and a sub-journal of every page they change on SQLite; a
 * failure they would contain is rare.
 */
const withoutSavepoints = new WeakSet<object>();

/** Thrown out of a transaction run without savepoints by a piece whose failure a savepoint would have contained. */
export class NeedsSavepoints extends Error {
  constructor(readonly reason: unknown) {
    super('a piece of the transaction failed: it runs again with a savepoint for each piece');
    this.name = 'NeedsSavepoints';
  }
}

/**
 * Runs `work` in the transaction `trx` with inSavepoint() leaving its savepoints out (see above): a
 * failure inside what would have been a savepoint comes out as NeedsSavepoints, after which the caller
 * rolls `trx` back and runs the same work again in a new transaction the ordinary way.
 */
export async function runWithoutSavepoints<T>(trx: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  withoutSavepoints.add(trx);
  try {
    return await work(trx);
  } finally {
    withoutSavepoints.delete(trx);
  }
}

/**
 * Runs `work` inside a savepoint of the transaction `trx`: when it throws, only its own changes are
 * rolled back and the transaction goes on; the error comes back as the result instead of being thrown.
 * In a transaction run without savepoints (runWithoutSavepoints), `work` runs straight in it and its
 * error ends the transaction as NeedsSavepoints.
 */
export async function inSavepoint<T>(trx: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<ItemResult<T>> {
  if (withoutSavepoints.has(trx)) {
    try {
      return { ok: true, value: await work(trx) };
    } catch (error) {
      throw new NeedsSavepoints(error);
    }
  }
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
