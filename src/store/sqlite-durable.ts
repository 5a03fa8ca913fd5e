import { open } from 'node:fs/promises';
import { dirname } from 'node:path';
import type SqliteDatabase from 'better-sqlite3';
import { SqliteDialect, SqliteDriver, type Driver, type SqliteDialectConfig } from 'kysely';

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
 * disk, exactly as with FULL; but writes that finish while a flush is running share the next flush
 * (one fsync for every commit made meanwhile), and the event loop keeps serving requests during it.
 *
 * A commit is visible to readers a few milliseconds before it is flushed. A power cut in that window
 * loses it like any unflushed commit, and nobody was told it succeeded; the one difference is that a
 * reader could have seen it (a worker could start delivering a message whose sender gets no 202 and
 * sends again, which is the same duplicate a cut between FULL's fsync and the reply would cause).
 */

const noop = (): void => undefined;

/** Flushes the `-wal` file; concurrent callers share flushes (a caller never rides on one already running). */
export class WalFlusher {
  readonly #walPath: string;
  readonly #dir: string;
  #running: Promise<void> | undefined;
  #next: Promise<void> | undefined;
  /** The WAL file (inode) whose directory entry was last flushed: a new WAL file needs its entry flushed once. */
  #knownInode: number | undefined;
  flushes = 0;

  constructor(databaseFile: string) {
    this.#walPath = `${databaseFile}-wal`;
    this.#dir = dirname(databaseFile);
  }

  /** Resolves once everything written to the WAL before this call is on disk. */
  flush(): Promise<void> {
    if (this.#next) return this.#next;
    if (!this.#running) return this.#begin();
    // The running flush may have started before our write: wait for it, then flush again.
    this.#next = this.#running.catch(noop).then(() => {
      this.#next = undefined;
      return this.#begin();
    });
    return this.#next;
  }

  #begin(): Promise<void> {
    const run = this.#flushOnce().finally(() => {
      if (this.#running === run) this.#running = undefined;
    });
    this.#running = run;
    return run;
  }

  async #flushOnce(): Promise<void> {
    this.flushes++;
    let file;
    try {
      file = await open(this.#walPath, 'r+');
    } catch (err) {
      // No WAL file: the last connection checkpointed and removed it, so every commit is in the database file.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    try {
      await file.datasync();
      const { ino } = await file.stat();
      if (ino !== this.#knownInode) {
        const dir = await open(this.#dir, 'r');
        try {
          await dir.sync();
        } finally {
          await dir.close();
        }
        this.#knownInode = ino;
      }
    } finally {
      await file.close();
    }
  }
}

/** Notes whether the connection ran a statement that changes the database since it was last asked. */
export class WriteTracker {
  #wrote = false;

  /** Called with each statement as it is prepared (Kysely prepares a statement right before it runs it). */
  note(statement: SqliteDatabase.Statement): void {
    if (!statement.readonly) this.#wrote = true;
  }

  take(): boolean {
    const wrote = this.#wrote;
    this.#wrote = false;
    return wrote;
  }
}

class DurableSqliteDriver extends SqliteDriver {
  readonly #tracker: WriteTracker;
  readonly #flusher: WalFlusher;

  constructor(config: SqliteDialectConfig, tracker: WriteTracker, flusher: WalFlusher) {
    super(config);
    this.#tracker = tracker;
    this.#flusher = flusher;
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

  constructor(config: SqliteDialectConfig, tracker: WriteTracker, flusher: WalFlusher) {
    super(config);
    this.#config = config;
    this.#tracker = tracker;
    this.#flusher = flusher;
  }

  override createDriver(): Driver {
    return new DurableSqliteDriver(this.#config, this.#tracker, this.#flusher);
  }
}
