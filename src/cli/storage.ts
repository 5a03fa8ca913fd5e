import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.js';
import { countAccounts } from '../store/accounts.js';
import { SQLITE_FILE, type Db } from '../store/db.js';

/** The embedded database file of this configuration. */
export const sqlitePath = (config: Config): string => path.join(config.dataDir, SQLITE_FILE);

/** Where the data lives, in words an operator can act on, with no password of a URL in it. */
export function describeStorage(config: Config): string {
  if (!config.databaseUrl) return `${sqlitePath(config)} (DATA_DIR=${config.dataDir})`;
  try {
    const url = new URL(config.databaseUrl);
    return `PostgreSQL ${url.hostname}${url.port ? `:${url.port}` : ''}${url.pathname} (DATABASE_URL)`;
  } catch {
    return 'PostgreSQL (DATABASE_URL)';
  }
}

/** Whether the SQLite file is there before anything opens it (opening creates it). */
export const sqliteExists = (config: Config): boolean => config.databaseUrl !== undefined || fs.existsSync(sqlitePath(config));

/**
 * One stderr line when a command is about to work on a database that was just created or holds no
 * account: the usual sign of a DATA_DIR or DATABASE_URL that is not the service's.
 */
export async function noticeEmptyStorage(config: Config, db: Db, existedBefore: boolean): Promise<void> {
  if (!existedBefore) {
    noticeCreated(config);
    return;
  }
  if ((await countAccounts(db.kysely)) === 0) {
    process.stderr.write(`voicenote: note: the database at ${describeStorage(config)} has no accounts yet${SAME_STORAGE_HINT(config)}\n`);
  }
}

/** A terminal opened after the service was started with its own DATA_DIR does not see it: say how to reach the service's data. */
const SAME_STORAGE_HINT = (config: Config): string =>
  config.databaseUrl
    ? '; if the service keeps its data elsewhere, give this command its DATABASE_URL'
    : "; if the service keeps its data elsewhere, give this command the service's DATA_DIR (export DATA_DIR=… in this terminal)";

/** The command just created the database (opening a SQLite file that was not there creates it): which one, and what to check. */
export function noticeCreated(config: Config): void {
  process.stderr.write(`voicenote: note: created a new database at ${describeStorage(config)}${SAME_STORAGE_HINT(config)}\n`);
}
