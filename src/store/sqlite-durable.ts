import { open, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import type SqliteDatabase from 'better-sqlite3';
import { CompiledQuery, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type QueryResult, type SqliteDialectConfig } from 'kysely';
import { setTimeout as sleep } from 'node:timers/promises';
import { isSqliteBusy, retryWhileBusy } from './sqlite-lock-wait.js';

/**
 * Group commit for SQLite, with the guarantee of `synchronous = FULL` kept.
 *
 * In WAL mode, FULL means "fsync the WAL after every commit", and better-sqlite3 does that fsync on
 * the event loop: every accepted send stopped the whole process for one disk flush (milliseconds on a
 * busy disk), and flushes could never be shared. Here the connection runs with `synchronous = NORMAL`
 * (commits are written to the WAL but not flushed; SQLite still flushes around checkpoints, and the
 * database stays consistent after a crash), and this module flushes the WAL itself, on libuv's thread
 * pool, after every hold of the connection that wrote something and BEFORE the caller's promise
 * resolves. So no write is reported done (no 202 is sent, no outcome is acted on) before it is on
 * disk, exactly as with FULL; but writes that finish while both flush slots are busy share the next
 * flush (one fsync for every commit made meanwhile), and the event loop keeps serving requests during it.
 *
 * A commit is visible to readers a few milliseconds before it is flushed. A power cut in that window
 * loses it like any unflushed commit, and nobody was told it succeeded; the one difference is that a
 * reader could have seen it (a worker could start delivering a message whose sender gets no 202 and
 * sends again, which is the same duplicate a cut between FULL's fsync and the reply would cause).
 */

const noop = (): void => undefined;

/** At most this many flushes at once (each holds a thread of libuv's pool, shared with file and DNS work). */
const MAX_PARALLEL_FLUSHES = 2;

/** Opens the WAL file for its flushes (node's `open`; a test can stand in for the disk). */
export type OpenFile = (path: string, flags: string) => Promise<Pick<FileHandle, 'datasync' | 'sync' | 'close'>>;

/**
 * Flushes the `-wal` file. A flush starts at once when fewer than MAX_PARALLEL_FLUSHES run (the commit
 * it covers is already written: waiting would only add to the caller's wait, and under load a turn of
 * the event loop parses several requests before it ends). When that many run, writers share the one
 * flush that starts next. A writer never joins a flush that has already started: that one may have
 * begun before its write reached the file.
 */
export class WalFlusher {
  readonly #walPath: string;
  readonly #dir: string;
  readonly #open: OpenFile;
  #file: Promise<Pick<FileHandle, 'datasync' | 'close'> | undefined> | undefined;
  /** The flush not yet started (every slot busy), which any writer may still join. */
  #pending: Promise<void> | undefined;
  #running = new Set<Promise<void>>();
  #slotWaiters: Array<() => void> = [];

  constructor(databaseFile: string, openFile: OpenFile = open) {
    this.#walPath = `${databaseFile}-wal`;
    this.#dir = dirname(databaseFile);
    this.#open = openFile;
  }

  /** Resolves once everything written to the WAL before this call is on disk. */
  flush(): Promise<void> {
    if (this.#pending) return this.#pending;
    if (this.#running.size < MAX_PARALLEL_FLUSHES) return this.#run();
    this.#pending = this.#runWhenFree();
    return this.#pending;
  }

  async #runWhenFree(): Promise<void> {
    while (this.#running.size >= MAX_PARALLEL_FLUSHES) await new Promise<void>((resolve) => this.#slotWaiters.push(resolve));
    this.#pending = undefined; // from here on, a new write needs a flush that starts after it
    await this.#run();
  }

  async #run(): Promise<void> {
    const run = this.#flushOnce();
    this.#running.add(run);
    try {
      await run;
    } finally {
      this.#running.delete(run);
      this.#slotWaiters.shift()?.();
    }
  }

  async #flushOnce(): Promise<void> {
    this.#file ??= this.#openWal();
    const file = await this.#file;
    if (!file) {
      this.#file = undefined;
      return;
    }
    await file.datasync();
  }

  /**
   * Kept open: SQLite removes the WAL file only when the last connection closes, and ours is open for
   * as long as this flusher is used. Its directory entry is flushed once, when first opened.
   */
  async #openWal(): Promise<Pick<FileHandle, 'datasync' | 'close'> | undefined> {
    let file: Pick<FileHandle, 'datasync' | 'close'>;
    try {
      file = await this.#open(this.#walPath, 'r+');
    } catch (err) {
      // No WAL file: nothing was written through it, so every commit is in the database file.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    const dir = await this.#open(this.#dir, 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
    return file;
  }

  /** After the connection is closed (SQLite then checkpoints and removes the WAL itself). */
  async close(): Promise<void> {
    await this.#pending?.catch(noop);
    await Promise.allSettled([...this.#running]);
    const file = await this.#file?.catch(() => undefined);
    this.#file = undefined;
    await file?.close();
  }
}

const BEGIN = /^\s*begin\b/i;

/** Notes whether the connection ran a statement that changes the database since it was last asked. */
export class WriteTracker {
  #wrote = false;

  /** Called with each statement as it is prepared (Kysely prepares a statement right before it runs it). */
  note(statement: SqliteDatabase.Statement): void {
    // BEGIN IMMEDIATE counts as a write for SQLite (it takes the write lock) but writes nothing itself.
    if (!statement.readonly && !BEGIN.test(statement.source)) this.#wrote = true;
  }

  take(): boolean {
    const wrote = this.#wrote;
    this.#wrote = false;
    return wrote;
  }
}

/** What the driver needs to know of the connection to wait for locks off the event loop (sqlite-lock-wait.ts). */
export interface LockWaitOptions {
  /** The connection is inside a transaction (better-sqlite3's `inTransaction`). */
  inTransaction(): boolean;
}

/**
 * Kysely's one connection, with statements outside a transaction tried again, after a pause without
 * the connection, when another process holds the write lock (a busy statement of its own did nothing).
 * Statements inside a transaction are not: the transaction began with the write lock in hand.
 */
class LockWaitingConnection implements DatabaseConnection {
  constructor(
    readonly inner: DatabaseConnection,
    readonly inTransaction: () => boolean,
    readonly pause: (ms: number) => Promise<void>,
  ) {}

  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.inTransaction()) return this.inner.executeQuery<R>(query);
    // The first try without the retry's machinery: nearly every statement finds the lock free. (Kysely's
    // SQLite connection throws synchronously, better-sqlite3 being synchronous.)
    try {
      return this.inner.executeQuery<R>(query).catch((error: unknown) => this.#whenBusy(error, query));
    } catch (error) {
      return this.#whenBusy(error, query);
    }
  }

  #whenBusy<R>(error: unknown, query: CompiledQuery): Promise<QueryResult<R>> {
    if (!isSqliteBusy(error)) return Promise.reject(error);
    return retryWhileBusy(() => this.inner.executeQuery<R>(query), { pause: this.pause });
  }

  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    return this.inner.streamQuery<R>(query, chunkSize);
  }
}

class DurableSqliteDriver extends SqliteDriver {
  readonly #tracker: WriteTracker;
  readonly #flusher: WalFlusher;
  readonly #lockWait: LockWaitOptions | undefined;
  #wrapped: LockWaitingConnection | undefined;

  constructor(config: SqliteDialectConfig, tracker: WriteTracker, flusher: WalFlusher, lockWait?: LockWaitOptions) {
    super(config);
    this.#tracker = tracker;
    this.#flusher = flusher;
    this.#lockWait = lockWait;
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await super.acquireConnection();
    if (!this.#lockWait) return connection;
    // Kysely's SQLite driver has one connection: its wrapper is made once.
    if (this.#wrapped?.inner !== connection) this.#wrapped = new LockWaitingConnection(connection, this.#lockWait.inTransaction, (ms) => this.#pauseWithoutConnection(ms));
    return this.#wrapped;
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    // The write lock first (IMMEDIATE): a transaction that has it never waits for another writer midway,
    // and one that cannot have it yet has done nothing, so it simply begins again a little later.
    const direct = connection instanceof LockWaitingConnection ? connection.inner : connection;
    await retryWhileBusy(() => direct.executeQuery(CompiledQuery.raw('begin immediate')), { pause: (ms) => this.#pauseWithoutConnection(ms) });
  }

  /**
   * Between two tries for the lock: the connection is free meanwhile (nothing of ours is open on it),
   * so this process's reads, and writes that find the lock free, go on.
   */
  async #pauseWithoutConnection(ms: number): Promise<void> {
    await super.releaseConnection();
    try {
      await sleep(ms);
    } finally {
      await super.acquireConnection();
    }
  }

  override async releaseConnection(): Promise<void> {
    // Kysely holds the one connection for a whole transaction (or one statement outside of one) and
    // releases it after commit or rollback: hand it to the next holder first, then wait for the disk.
    const wrote = this.#tracker.take();
    await super.releaseConnection();
    if (wrote) await this.#flusher.flush();
  }
}

/** A Kysely SQLite dialect whose every write resolves only once it is on disk (see above). */
export class DurableSqliteDialect extends SqliteDialect {
  readonly #config: SqliteDialectConfig;
  readonly #tracker: WriteTracker;
  readonly #flusher: WalFlusher;
  readonly #lockWait: LockWaitOptions | undefined;

  constructor(config: SqliteDialectConfig, tracker: WriteTracker, flusher: WalFlusher, lockWait?: LockWaitOptions) {
    super(config);
    this.#config = config;
    this.#tracker = tracker;
    this.#flusher = flusher;
    this.#lockWait = lockWait;
  }

  override createDriver(): Driver {
    return new DurableSqliteDriver(this.#config, this.#tracker, this.#flusher, this.#lockWait);
  }
}
