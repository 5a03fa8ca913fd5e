import type { Kysely } from 'kysely';
import type { Db } from './db.js';
import type { Database } from './schema.js';
import { inSavepoint } from './savepoint.js';
import { TurnBatch, type ItemResult } from './turn-batch.js';

/** Database work that must run in a transaction, through the `trx` it is given only. */
export type Work<T> = (trx: Kysely<Database>) => Promise<T>;

/** Most pieces of work one transaction takes; the rest wait for the next. */
const MAX_BATCH = 128;

/**
 * Group commit for the worker's writes (outcomes with their attempt records, audio records). On
 * SQLite, pieces asked for in the same turn of the event loop run in ONE transaction, each inside a
 * savepoint of its own, so one that fails is rolled back alone and gets its own error; every piece's
 * promise settles only after the commit, and after that commit is on disk (the dialect flushes before
 * a write resolves: sqlite-durable.ts). A commit and its flush cost far more than the statements of one
 * outcome, so a worker delivering hundreds of messages a second shares them. The same on PostgreSQL,
 * where every commit waits for the server's WAL flush: one commit per batch instead of one per piece
 * measured 221 messages a second instead of 171 (BENCHMARKS.md).
 */
export class OutcomeBatch {
  readonly #db: Db;
  readonly #batch: TurnBatch<Work<unknown>, unknown>;

  constructor(db: Db) {
    this.#db = db;
    // Two batches at once: one writes while the other's disk flush runs; what arrives meanwhile waits
    // and goes together into the next.
    this.#batch = new TurnBatch((works) => this.#commit(works), { maxItems: MAX_BATCH, maxInFlight: 2 });
  }

  run<T>(work: Work<T>): Promise<T> {
    return this.#batch.add(work as Work<unknown>) as Promise<T>;
  }

  async #commit(works: Array<Work<unknown>>): Promise<Array<ItemResult<unknown>>> {
    // Alone: the transaction itself is the piece's boundary (its failure rejects it through the batch).
    if (works.length === 1) return [{ ok: true, value: await this.#db.kysely.transaction().execute(works[0]!) }];
    return this.#db.kysely.transaction().execute(async (trx) => {
      const results: Array<ItemResult<unknown>> = [];
      for (const work of works) results.push(await inSavepoint(trx, work));
      return results;
    });
  }
}

const batches = new WeakMap<Db, OutcomeBatch>();

/** The one batch of a store: the worker and the message log's recorder share its transactions. */
export function outcomeBatchOf(db: Db): OutcomeBatch {
  let batch = batches.get(db);
  if (!batch) {
    batch = new OutcomeBatch(db);
    batches.set(db, batch);
  }
  return batch;
}
