import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';

type Work<T> = (trx: Kysely<Database>) => Promise<T>;

interface Item {
  work: Work<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** Most pieces of work one transaction takes; the rest wait for the next. */
const MAX_BATCH = 128;

/**
 * Group commit for SQLite's one connection: pieces of work asked for in the same turn of the event loop
 * (requests that arrived together) run in ONE transaction, each inside a savepoint of its own, so one
 * that fails (a quota used up, a lost idempotency race) is rolled back alone and gets its own error.
 * Every piece's promise settles only after the commit, and after that commit is on disk (the dialect
 * flushes before a write resolves: sqlite-durable.ts): nobody is told "done" about work that is not.
 * A piece must do all its database work through the `trx` it is given (the connection is taken).
 */
export class WriteBatcher {
  readonly #db: Kysely<Database>;
  #queue: Item[] = [];
  #scheduled = false;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  run<T>(work: Work<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      const items = this.#queue.splice(0, MAX_BATCH);
      if (this.#queue.length > 0) this.#schedule();
      void this.#commit(items);
    });
  }

  async #commit(items: Item[]): Promise<void> {
    const outcomes: Outcome[] = [];
    try {
      if (items.length === 1) {
        // Alone: the transaction itself is the piece's boundary.
        outcomes.push({ ok: true, value: await this.#db.transaction().execute(items[0]!.work) });
      } else {
        await this.#db.transaction().execute(async (trx) => {
          for (const item of items) {
            await sql`savepoint batch_item`.execute(trx);
            try {
              const value = await item.work(trx);
              await sql`release batch_item`.execute(trx);
              outcomes.push({ ok: true, value });
            } catch (error) {
              await sql`rollback to batch_item`.execute(trx);
              await sql`release batch_item`.execute(trx);
              outcomes.push({ ok: false, error });
            }
          }
        });
      }
    } catch (error) {
      // The transaction itself failed (commit, disk): nothing of it counts.
      if (items.length === 1) items[0]!.reject(error);
      else for (const item of items) item.reject(error);
      return;
    }
    items.forEach((item, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) item.resolve(outcome.value);
      else item.reject(outcome.error);
    });
  }
}
