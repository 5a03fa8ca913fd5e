import fs from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import type { Config } from '../config.js';
import { sqlitePath } from './storage.js';

export class BackupFailure extends Error {}

export interface BackupReport {
  file: string;
  database: string;
  bytes: number;
  accounts: number;
  messages: number;
  /** What else is needed to read the copy: the key file's path, or "SECRET_KEY" when the key comes from the environment. */
  secret_key: string;
}

/**
 * A consistent copy of the embedded database while the service keeps writing: SQLite's online
 * backup API copies pages under a read transaction and starts over if a writer changes one already
 * copied, so the copy is one committed state, WAL included (a file copy of voicenote.db is not).
 * The secret key is not copied: a backup that carries its own key protects nothing.
 */
export async function backupSqlite(config: Config, target: string): Promise<BackupReport> {
  if (config.databaseUrl) {
    throw new BackupFailure('backup copies the embedded SQLite database; with DATABASE_URL use pg_dump (see docs/deploy.md, "Backups")');
  }
  const source = sqlitePath(config);
  if (!fs.existsSync(source)) throw new BackupFailure(`no database at ${source} (DATA_DIR=${config.dataDir})`);
  const file = path.resolve(target);
  const reserved = reserveName(file);
  try {
    return await copyInto(config, source, file, reserved);
  } catch (error) {
    // The name was only ours while empty: anything written into it since is someone else's, and stays.
    if (stillOurs(file, reserved)) fs.rmSync(file, { force: true });
    throw error;
  } finally {
    fs.closeSync(reserved);
  }
}

/**
 * Holds the backup's name from the start with an exclusive create (O_EXCL): a file that exists, or
 * appears while the copy runs, is never replaced. A check of existence followed by a rename would
 * replace a file created between the two.
 */
function reserveName(file: string): number {
  try {
    return fs.openSync(file, 'wx', 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new BackupFailure(`${file} exists already; choose a new file name`);
    throw new BackupFailure(`cannot create ${file}: ${(error as Error).message}`);
  }
}

/** The name still holds the empty file this run created (nobody wrote into it, nothing replaced it). */
function stillOurs(file: string, reserved: number): boolean {
  const mine = fs.fstatSync(reserved);
  // lstat: a link put in its place is not ours, whatever it points to.
  const now = fs.lstatSync(file, { throwIfNoEntry: false });
  return now !== undefined && now.dev === mine.dev && now.ino === mine.ino && mine.size === 0;
}

/**
 * The copy is written in a folder of its own made beside the target (mkdtemp: a fresh random name,
 * mode 0700), then renamed onto the reserved name: the same file system, so the rename is atomic.
 * Nobody else can put a link where SQLite writes the copy or its journal (a symlink planted at a
 * fixed `FILE.partial` would have taken the whole database wherever it pointed), and nothing that
 * already lies in the target's folder is written, followed or deleted.
 */
async function copyInto(config: Config, source: string, file: string, reserved: number): Promise<BackupReport> {
  let work: string;
  try {
    work = fs.mkdtempSync(path.join(path.dirname(file), `.${path.basename(file)}.partial-`));
  } catch (error) {
    throw new BackupFailure(`cannot create a temporary folder beside ${file}: ${(error as Error).message}`);
  }
  try {
    return await copyThrough(config, source, file, reserved, path.join(work, 'copy.db'));
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

async function copyThrough(config: Config, source: string, file: string, reserved: number, tmp: string): Promise<BackupReport> {
  const db = new SqliteDatabase(source, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    await db.backup(tmp);
  } catch (error) {
    throw new BackupFailure(`cannot back up ${source}: ${(error as Error).message}`);
  } finally {
    db.close();
  }
  let counts: { accounts: number; messages: number };
  const copy = new SqliteDatabase(tmp, { fileMustExist: true });
  try {
    const check = copy.pragma('integrity_check', { simple: true });
    if (check !== 'ok') throw new BackupFailure(`the copy failed its integrity check: ${String(check)}`);
    // A single file is what an operator moves around: no WAL beside it.
    copy.pragma('journal_mode = DELETE');
    counts = {
      accounts: (copy.prepare('select count(*) as n from accounts').get() as { n: number }).n,
      messages: (copy.prepare('select count(*) as n from messages').get() as { n: number }).n,
    };
  } catch (error) {
    throw error instanceof BackupFailure ? error : new BackupFailure(`the copy cannot be read back: ${(error as Error).message}`);
  } finally {
    copy.close();
  }
  // Hashed keys and sealed credentials: readable by its owner only, like the database itself should be.
  fs.chmodSync(tmp, 0o600);
  if (!stillOurs(file, reserved)) {
    throw new BackupFailure(`${file} was written or replaced by something else while the copy ran; it is left as it is, and no backup was made`);
  }
  fs.renameSync(tmp, file);
  return {
    file,
    database: source,
    bytes: fs.statSync(file).size,
    ...counts,
    secret_key: config.secretKey ? 'SECRET_KEY' : path.join(config.dataDir, 'secret.key'),
  };
}
