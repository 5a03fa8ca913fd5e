import { statfs } from 'node:fs/promises';

// SQLite's "database or disk is full", a file write's ENOSPC, PostgreSQL's disk_full (class 53).
const DISK_FULL_CODES = new Set(['SQLITE_FULL', 'ENOSPC', '53100']);
const DISK_FULL_MESSAGES = /database or disk is full|No space left on device|could not extend file/i;
// Less free space than this on the data folder's disk is a full disk: SQLite needs room for its
// journal and WAL besides the pages it writes, and the audio cache for every file it converts.
const MIN_FREE_BYTES = 1024 * 1024;
// After a write failed on a full disk, readiness says so for this long (or until the probe sees room).
const REMEMBER_MS = 30_000;

/** A storage error that means the disk is full (not that storage is away). */
export function isDiskFull(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as Error & { code?: unknown }).code;
  return (typeof code === 'string' && DISK_FULL_CODES.has(code)) || DISK_FULL_MESSAGES.test(error.message);
}

let lastFullAt = Number.NEGATIVE_INFINITY;

/** Called wherever a write failed on a full disk: readiness reports it for a while. */
export function noteDiskFull(now = Date.now()): void {
  lastFullAt = now;
}

/**
 * Whether storage is full now: a write failed on a full disk in the last 30 s, or (SQLite) the data
 * folder's disk has under 1 MiB free. PostgreSQL's own disk is out of sight: its disk_full errors tell.
 */
export async function diskFull(dataDir: string | undefined, now = Date.now()): Promise<boolean> {
  if (dataDir !== undefined) {
    try {
      const fs = await statfs(dataDir);
      if (fs.bavail * fs.bsize < MIN_FREE_BYTES) return true;
      // Room again (someone freed space): an earlier failure no longer counts.
      if (now - lastFullAt < REMEMBER_MS && fs.bavail * fs.bsize >= MIN_FREE_BYTES * 4) lastFullAt = Number.NEGATIVE_INFINITY;
    } catch {
      // Cannot tell from here; the ping that came before says whether storage answers at all.
    }
  }
  return now - lastFullAt < REMEMBER_MS;
}
