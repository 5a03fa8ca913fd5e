import { CompiledQuery, type Kysely, type QueryResult } from 'kysely';

/** What a batch needs of its transaction. */
interface QueryRunner {
  executeQuery<R>(query: CompiledQuery<R>): Promise<QueryResult<R>>;
}

/**
 * The worker's outcomes on PostgreSQL, one statement for many (as graphile-worker completes its jobs):
 * the pieces of an outcome batch run side by side in its transaction, and the calls they make of the
 * same fixed statement in one turn of the event loop go to the server as ONE statement over arrays
 * (`unnest`) instead of one round trip each. Settling 30 messages is then one `update … from unnest(…)`,
 * their usage counts one update, their webhook events one insert, their attempt records one more:
 * the pieces' code is unchanged (each still calls settleMessage, recordOutcome, … with its own values).
 *
 * Only statements that say how they are written over arrays take part (`BatchedForm` on a
 * FixedStatement); the others run as they are, in the same transaction. A call's result is what it
 * would have been alone for the statements that tell (`perCall`: the rows it changed, from the
 * ordinal each array row carries), nothing for the others (their callers read no result).
 */

/** How a fixed statement is written over arrays: `$1…$n` are arrays of the parameters at `arrays`, in that order. */
export type BatchedForm = {
  /** The statement over arrays; it receives `$1…$n` as arrays (one element per call), typed by `arrays`. */
  text: string;
  /** For each array: the index of the call's parameter it takes, and its PostgreSQL array type (`text[]`, `bigint[]`, …). */
  arrays: ReadonlyArray<readonly [parameter: number, type: string]>;
} & (
  | {
      /**
       * The statement returns the 1-based ordinal of each array row it changed as `i` (`with
       * ordinality`), so each call learns how many rows it changed.
       */
      perCall: 'ordinal';
      atEnd?: never;
    }
  | {
      /** Callers read no result. */
      perCall: 'none';
      /**
       * Runs once every piece is done, right before the commit, and its callers go on at once. For a
       * count on a row that every batch changes (an account's usage): a row lock is held until the
       * commit, so taken early it made the next batch wait for all of this one's round trips; taken
       * last, only for the commit. A failure still fails the whole batch before it commits.
       */
      atEnd?: true;
    }
);

const noop = (): void => undefined;

interface Call {
  parameters: readonly unknown[];
  resolve(result: QueryResult<unknown>): void;
  reject(error: unknown): void;
}

interface Group {
  /** The statement as one call runs it. */
  single: string;
  form: BatchedForm;
  calls: Call[];
}

/** Collects the batched statements a transaction's pieces call in one turn, and runs each kind once. */
class StatementBatch {
  readonly #trx: QueryRunner;
  #groups = new Map<BatchedForm, Group>();
  /** The `atEnd` statements called so far, run by `finish`. */
  #atEnd = new Map<BatchedForm, Group>();
  #scheduled = false;

  constructor(trx: QueryRunner) {
    this.#trx = trx;
  }

  add(single: string, form: BatchedForm, parameters: readonly unknown[]): Promise<QueryResult<unknown>> {
    if (form.atEnd) {
      let group = this.#atEnd.get(form);
      if (!group) this.#atEnd.set(form, (group = { single, form, calls: [] }));
      group.calls.push({ parameters, resolve: noop, reject: noop });
      return Promise.resolve({ rows: [] });
    }
    return new Promise((resolve, reject) => {
      let group = this.#groups.get(form);
      if (!group) this.#groups.set(form, (group = { single, form, calls: [] }));
      group.calls.push({ parameters, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        // After every piece has made its call of this turn (they continue in microtasks).
        setImmediate(() => void this.#flush());
      }
    });
  }

  async #flush(): Promise<void> {
    this.#scheduled = false;
    const groups = [...this.#groups.values()];
    this.#groups = new Map();
    for (const group of groups) {
      try {
        await this.#run(group);
      } catch (error) {
        for (const call of group.calls) call.reject(error);
      }
    }
  }

  /** Runs the `atEnd` statements (once every piece is done); throws what one of them throws. */
  async finish(): Promise<void> {
    const groups = [...this.#atEnd.values()];
    this.#atEnd = new Map();
    for (const group of groups) await this.#run(group);
  }

  async #run({ single, form, calls }: Group): Promise<void> {
    if (calls.length === 1) {
      const call = calls[0]!;
      call.resolve(await this.#trx.executeQuery(CompiledQuery.raw(single, call.parameters as unknown[])));
      return;
    }
    const arrays = form.arrays.map(([index]) => calls.map((call) => call.parameters[index] ?? null));
    const result = await this.#trx.executeQuery<{ i: number | string }>(CompiledQuery.raw(form.text, arrays));
    if (form.perCall === 'none') {
      for (const call of calls) call.resolve({ rows: [] });
      return;
    }
    const changed = new Array<number>(calls.length).fill(0);
    for (const row of result.rows) changed[Number(row.i) - 1]! += 1;
    calls.forEach((call, n) => call.resolve({ rows: [], numAffectedRows: BigInt(changed[n]!) }));
  }
}

const batches = new WeakMap<object, StatementBatch>();

/** The batch of a transaction running with batched statements; undefined otherwise. */
export function statementBatchOf(db: object): { add(single: string, form: BatchedForm, parameters: readonly unknown[]): Promise<QueryResult<unknown>> } | undefined {
  return batches.get(db);
}

/**
 * Runs `works` side by side in the PostgreSQL transaction `trx`, their batched statements joined
 * (above). Every piece is waited for; the first failure is then thrown (the caller rolls the
 * transaction back and runs the pieces again one by one).
 */
export async function runSideBySide<DB, T>(trx: Kysely<DB>, works: ReadonlyArray<(trx: Kysely<DB>) => Promise<T>>): Promise<T[]> {
  const batch = new StatementBatch(trx);
  batches.set(trx, batch);
  try {
    const settled = await Promise.allSettled(works.map((work) => work(trx)));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    await batch.finish();
    return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
  } finally {
    batches.delete(trx);
  }
}
