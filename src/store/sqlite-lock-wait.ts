import { setTimeout as sleep } from 'node:timers/promises';
import type SqliteDatabase from 'better-sqlite3';

/**
 * Waiting for SQLite's write lock without stopping the process.
 *
 * better-sqlite3 is synchronous: while a statement waits in SQLite's busy handler for the write lock
 * that another process holds (a `voicenote` CLI command, a second worker, a backup), the event loop
 * waits with it: no request is answered, no lease renewed. So SQLite's busy handler does not wait at all
 * (SQLITE_BUSY_TIMEOUT_MS): a try for a held lock fails at once, and the wait happens between tries,
 * asynchronously, with the event loop free. (Even a 20 ms busy timeout blocked a try for up to 96 ms on a
 * loaded machine, as each of the handler's short sleeps woke late: BENCHMARKS.md.)
 *  - a transaction starts with BEGIN IMMEDIATE, which takes the write lock before anything runs: when
 *    it is busy, nothing was read or written, so trying BEGIN again later loses and doubles nothing;
 *    once it has the lock, no statement of the transaction waits for another writer again;
 *  - a statement outside a transaction is its own transaction: a busy one did nothing, so it runs again.
 * The wait as a whole is bounded as it was (SQLITE_LOCK_PATIENCE_MS); then the last SQLITE_BUSY is
 * thrown, as the busy handler threw it before. Measured in BENCHMARKS.md (bench/sqlite-lock-wait.ts).
 */

/** How long one statement may wait for a lock on the event loop (SQLite's `busy_timeout`): not at all. */
export const SQLITE_BUSY_TIMEOUT_MS = 0;
/** How long a write waits for the lock in all, across tries; the busy timeout it replaces. */
export const SQLITE_LOCK_PATIENCE_MS = 5_000;
/** Pauses between tries grow from the first to the last (plus up to half again, so waiters spread out). */
const FIRST_PAUSE_MS = 2;
const LONGEST_PAUSE_MS = 50;

/** SQLITE_BUSY and its extended codes (SQLITE_BUSY_SNAPSHOT, SQLITE_BUSY_RECOVERY, …). */
export function isSqliteBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_'));
}

export interface RetryOptions {
  /** The longest wait in all (default SQLITE_LOCK_PATIENCE_MS). */
  patienceMs?: number;
  /**
   * How to pause between tries (default: sleep). The driver also lets go of its one connection while it
   * pauses, so reads and other work of this process go on meanwhile (WAL: readers never wait for writers).
   */
  pause?: (ms: number) => Promise<void>;
}

/**
 * Runs `attempt` until it does not fail with SQLITE_BUSY, pausing (asynchronously) between tries, for at
 * most `patienceMs` in all. Only for work that did nothing when it failed busy (see above).
 */
export async function retryWhileBusy<T>(attempt: () => T | Promise<T>, options: RetryOptions = {}): Promise<T> {
  const patienceMs = options.patienceMs ?? SQLITE_LOCK_PATIENCE_MS;
  const pause = options.pause ?? ((ms: number) => sleep(ms));
  const started = performance.now();
  for (let delay = FIRST_PAUSE_MS; ; delay = Math.min(delay * 2, LONGEST_PAUSE_MS)) {
    try {
      return await attempt();
    } catch (error) {
      if (!isSqliteBusy(error) || performance.now() - started >= patienceMs) throw error;
    }
    await pause(delay + Math.random() * (delay / 2));
  }
}

/**
 * Runs `work` (synchronous better-sqlite3 calls) in one transaction that holds the write lock, while
 * holding the connection through `hold` (Kysely's executor's `provideConnection`, so that no other statement
 * of this process runs inside it); commits when `work` returns, rolls back when it throws. The
 * connection is let go between tries for the lock. Transaction functions of better-sqlite3 called
 * inside `work` become savepoints of this transaction.
 */
export function inWriteTransaction<T>(
  database: SqliteDatabase.Database,
  hold: (inside: () => Promise<T>) => Promise<T>,
  work: () => T,
  options: RetryOptions = {},
): Promise<T> {
  return retryWhileBusy(
    () =>
      hold(async () => {
        database.exec('begin immediate'); // busy: nothing began, and the next try comes after a pause
        try {
          const result = work();
          database.exec('commit');
          return result;
        } catch (error) {
          if (database.inTransaction) database.exec('rollback');
          throw error;
        }
      }),
    options,
  );
}
