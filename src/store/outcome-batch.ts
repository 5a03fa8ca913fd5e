import type { Kysely } from 'kysely';
import type { Db } from './db.js';
import type { Database } from './schema.js';
import { inSavepoint, NeedsSavepoints, runWithoutSavepoints } from './savepoint.js';
import { runSideBySide } from './statement-batch.js';
import { TurnBatch, type ItemResult } from './turn-batch.js';

/** Database work that must run in a transaction, through the `trx` it is given only. */
export type Work<T> = (trx: Kysely<Database>) => Promise<T>;

/** Most pieces of work one transaction takes; the rest wait for the next. */
const MAX_BATCH = 128;

/**
 * Group commit for the worker's writes (outcomes with their attempt records, audio records). On
 * SQLite, pieces asked for in the same turn of the event loop run in ONE transaction (should one fail,
 * again with each inside a savepoint of its own, so it is rolled back alone and gets its own error); every piece's
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
    // SQLite: two batches at once, one writing while the other's disk flush runs; what arrives meanwhile
    // waits and goes together into the next. PostgreSQL: one at a time. Its batch is a handful of round
    // trips whatever its size, and the server's CPU is shared with the worker: one batch at a time made
    // batches twice as large and delivered 11 % more a second (6 alternate runs; 4 at once: 10 % fewer).
    const inFlight = db.dialect === 'postgres' ? 1 : 2;
    this.#batch = new TurnBatch((works) => this.#commit(works), { maxItems: MAX_BATCH, maxInFlight: inFlight });
  }

  run<T>(work: Work<T>): Promise<T> {
    return this.#batch.add(work as Work<unknown>) as Promise<T>;
  }

  /**
   * First without savepoints: one statement per piece and nothing else (a savepoint and its release are
   * two more statements per piece, two more round trips on PostgreSQL, and on SQLite a copy of every page
   * the piece changes). Should anything fail, that transaction is rolled back and the batch runs again
   * as before: each piece in a savepoint of its own, so a failing piece fails alone and the others are
   * written. The pieces are database work only, so running one again does nothing twice.
   */
  async #commit(works: Array<Work<unknown>>): Promise<Array<ItemResult<unknown>>> {
    try {
      return await this.#db.kysely.transaction().execute((trx) =>
        runWithoutSavepoints(trx, async () => {
          // PostgreSQL: side by side, each fixed statement once for all of them (statement-batch.ts); a
          // round trip there costs far more than a statement. SQLite runs a statement in microseconds.
          const values = this.#db.dialect === 'postgres' && works.length > 1 ? await runSideBySide(trx, works) : await inTurn(trx, works);
          return values.map((value): ItemResult<unknown> => ({ ok: true, value }));
        }),
      );
    } catch (error) {
      // Alone, and failed by its own statements (not by a part it keeps in a savepoint): its error, as it would be with one.
      if (works.length === 1 && !(error instanceof NeedsSavepoints)) throw error;
      return this.#commitWithSavepoints(works);
    }
  }

  async #commitWithSavepoints(works: Array<Work<unknown>>): Promise<Array<ItemResult<unknown>>> {
    // Alone: the transaction itself is the piece's boundary (its failure rejects it through the batch).
    if (works.length === 1) return [{ ok: true, value: await this.#db.kysely.transaction().execute(works[0]!) }];
    return this.#db.kysely.transaction().execute(async (trx) => {
      const results: Array<ItemResult<unknown>> = [];
      for (const work of works) results.push(await inSavepoint(trx, work));
      return results;
    });
  }
}

/** The pieces one after the other. */
async function inTurn(trx: Kysely<Database>, works: Array<Work<unknown>>): Promise<unknown[]> {
  const values: unknown[] = [];
  for (const work of works) values.push(await work(trx));
  return values;
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
