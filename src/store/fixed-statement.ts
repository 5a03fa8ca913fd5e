import { CompiledQuery, type Kysely, type QueryResult } from 'kysely';
import { dialectOf } from './dialect.js';
import { statementBatchOf, type BatchedForm } from './statement-batch.js';

/**
 * A statement written out once as SQL, for the few the worker runs for every message (settling it,
 * counting it, its webhook event, its attempt and audio records, the savepoints around them). Kysely's
 * query builder builds and compiles a query anew at each call, which costs several times more than
 * running it on SQLite (an update of a message: 17 µs built, 3 µs written out; BENCHMARKS.md). A fixed
 * statement runs through the Kysely instance it is given, so inside a transaction it is part of it like
 * any other query.
 *
 * The text uses `?` for its parameters (and no `?` anywhere else); PostgreSQL's `$1, $2, …` are made
 * from them once.
 *
 * `batched`: how the statement is written over arrays, for PostgreSQL transactions whose pieces run
 * side by side (statement-batch.ts): their calls of it in one turn become one statement.
 */
export class FixedStatement {
  readonly #questionMarks: string;
  readonly #numbered: string;
  readonly #batched: BatchedForm | undefined;

  constructor(text: string, batched?: BatchedForm) {
    this.#questionMarks = text;
    let n = 0;
    this.#numbered = text.replace(/\?/g, () => `$${++n}`);
    this.#batched = batched;
  }

  /** Runs it with `parameters` (an array of the caller's own: Kysely freezes it). */
  execute<R = unknown, DB = unknown>(db: Kysely<DB>, parameters: unknown[] = []): Promise<QueryResult<R>> {
    if (this.#batched) {
      const batch = statementBatchOf(db);
      if (batch) return batch.add(this.#numbered, this.#batched, parameters) as Promise<QueryResult<R>>;
    }
    // PostgreSQL writes parameters as `$1`, SQLite as `?`.
    const text = dialectOf(db) === 'postgres' ? this.#numbered : this.#questionMarks;
    return db.executeQuery<R>(CompiledQuery.raw(text, parameters));
  }
}

/** `?, ?, …` for `n` parameters. */
export const placeholders = (n: number): string => Array.from({ length: n }, () => '?').join(', ');
