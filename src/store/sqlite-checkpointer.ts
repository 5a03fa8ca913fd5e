import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** How often the thread copies what the WAL holds back into the database file. */
const CHECKPOINT_EVERY_MS = 200;
/** SQLite's own threshold, for when the thread is gone. */
const AUTOCHECKPOINT_PAGES = 1000;
/**
 * A WAL longer than this after the thread's copy is started again from its beginning (below). The same
 * size as SQLite's own threshold: about 4 MB of 4 KiB pages.
 */
export const RESTART_AFTER_FRAMES = 1000;
/** How long the restart may wait for the writer and for readers of the log (SQLite's busy handler, on the thread). */
const RESTART_PATIENCE_MS = 10;
/**
 * After a restart that gave up (a long read held the log), the next is tried this many rounds later:
 * writers wait at most RESTART_PATIENCE_MS a second for it, not every round.
 */
const ROUNDS_AFTER_BUSY_RESTART = 5;

// The thread's whole program: its own connection to the database, a PASSIVE checkpoint (never waits
// for, nor blocks, the writer or readers) every CHECKPOINT_EVERY_MS, then, when the log is long, a
// RESTART checkpoint. Plain CommonJS, so it runs the same from TypeScript sources and from the build.
//
// Why the restart: SQLite writes the log from its beginning again only when a write transaction starts
// with every frame already copied. Under a steady stream of commits that never happens (each commit
// lands while the copy of the earlier ones runs), so the log grew for as long as the load lasted
// (130-235 MiB after 10-11 s of POST /send in the bench), and every commit appended to it: a disk
// flush that extends a file costs 1.3 to 1.7 times one that overwrites (bench/flush-cost.ts,
// BENCHMARKS.md). RESTART takes the write lock, copies the few frames committed since the PASSIVE
// pass, and waits for readers to leave the log; the next commit then overwrites the log from its
// start. Writers meanwhile wait between tries, off the event loop (sqlite-lock-wait.ts); when the lock
// or the readers take longer than RESTART_PATIENCE_MS it gives up and is tried again
// ROUNDS_AFTER_BUSY_RESTART rounds later.
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('synchronous = NORMAL');
db.pragma('busy_timeout = ' + workerData.restartPatienceMs);
let restartIn = 0;
const timer = setInterval(() => {
  try {
    const copied = db.pragma('wal_checkpoint(PASSIVE)')[0];
    if (copied && copied.log >= workerData.restartAfterFrames && --restartIn <= 0) {
      const restarted = db.pragma('wal_checkpoint(RESTART)')[0];
      // A reader kept the log past the patience: writers waited that long for nothing; not again for a while.
      restartIn = restarted && restarted.busy ? workerData.roundsAfterBusyRestart : 0;
    }
  } catch (err) {
    parentPort.postMessage({ error: String(err && err.message || err) });
  }
}, workerData.everyMs);
parentPort.on('message', (m) => {
  if (m !== 'stop') return;
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

/**
 * Copies the WAL back into the database file on a thread of its own. SQLite does this by itself in the
 * connection that commits once the WAL passes 1,000 pages, and a checkpoint writes those pages and
 * flushes the file: on the event loop, that stalled every request for its duration (it cost a quarter
 * of the throughput of POST /send, BENCHMARKS.md). The writing connection runs with
 * `wal_autocheckpoint = 0` while this thread is up; if the thread ends unexpectedly, SQLite's own
 * checkpoints are turned back on, so the WAL never grows without bound.
 */
export class WalCheckpointer {
  readonly #worker: Worker;
  #stopping = false;

  constructor(options: { file: string; writer: { pragma(source: string): unknown }; onError(message: string): void }) {
    const { writer, onError } = options;
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    writer.pragma('wal_autocheckpoint = 0');
    this.#worker = new Worker(THREAD_SOURCE, { eval: true, workerData: { file: options.file, driver, everyMs: CHECKPOINT_EVERY_MS, restartAfterFrames: RESTART_AFTER_FRAMES, restartPatienceMs: RESTART_PATIENCE_MS, roundsAfterBusyRestart: ROUNDS_AFTER_BUSY_RESTART } });
    // The thread alone must not keep the process alive.
    this.#worker.unref();
    this.#worker.on('message', (m: { error?: string }) => {
      if (m.error) onError(`WAL checkpoint failed: ${m.error}`);
    });
    const fallBack = (why: string): void => {
      if (this.#stopping) return;
      this.#stopping = true;
      writer.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
      onError(`the WAL checkpoint thread ended (${why}); SQLite checkpoints in the writing connection again`);
    };
    this.#worker.on('error', (err) => fallBack(err.message));
    this.#worker.on('exit', (code) => fallBack(`exit code ${code}`));
  }

  async close(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    const exited = new Promise<void>((resolve) => this.#worker.once('exit', () => resolve()));
    // Waited for: the process must not end (with nothing else to do) in the middle of this.
    this.#worker.ref();
    this.#worker.postMessage('stop');
    await exited;
  }
}
