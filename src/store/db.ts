import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, Migrator, sql, type Migration, type MigrationProvider, type SqliteDialectConfig } from 'kysely';
import type pg from 'pg';
import type { Database } from './schema.js';
import type { Dialect } from './dialect.js';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../core/private-files.js';
import { DurableSqliteDialect, WalFlusher, WriteTracker } from './sqlite-durable.js';
import type { HotPath } from './hot-path.js';
import { PostgresHotPath } from './hot-path-postgres.js';
import { SchemaScopedPostgresDialect } from './pg-scoped-introspector.js';
import { SqliteHotPath } from './hot-path-sqlite.js';
import { WalCheckpointer } from './sqlite-checkpointer.js';
import { SQLITE_BUSY_TIMEOUT_MS } from './sqlite-lock-wait.js';
import * as initial from './migrations/001_initial.js';
import * as whatsappKeys from './migrations/002_whatsapp_keys.js';
import * as messageRoute from './migrations/003_message_route.js';
import * as oneOwner from './migrations/004_one_owner.js';
import * as webhooksMessageLog from './migrations/007_webhooks_message_log.js';
import * as processAffinity from './migrations/006_process_affinity.js';
import * as usageByPlatform from './migrations/006b_usage_by_platform.js';
import * as dashboardSessions from './migrations/008_dashboard_sessions.js';
import * as reliability from './migrations/005_reliability.js';
import * as messageRetention from './migrations/010_message_retention.js';
import * as messageRequestId from './migrations/011_message_request_id.js';
import * as whatsappSentMessages from './migrations/012_whatsapp_sent_messages.js';
import * as sendAtCancel from './migrations/013_send_at_cancel.js';
import * as sendingRhythm from './migrations/014_sending_rhythm.js';
import * as messageSender from './migrations/015_message_sender.js';
import * as platformReached from './migrations/019_platform_reached.js';
import * as cancelReason from './migrations/024_cancel_reason.js';
import * as linkedinListeners from './migrations/022_linkedin_listeners.js';
import * as messageLookupIndexes from './migrations/023_message_lookup_indexes.js';
import * as senderWatch from './migrations/025_sender_watch.js';
import * as listeningAccounts from './migrations/026_listening_accounts.js';
import * as senderRecords from './migrations/016_sender_records.js';
import * as recipientChecks from './migrations/016b_recipient_checks.js';
import * as replies from './migrations/017_replies.js';
import * as telegramSessions from './migrations/018_telegram_sessions.js';
import * as telegramAccountState from './migrations/027_telegram_account_state.js';
import * as senderProxy from './migrations/028_sender_proxy.js';
import * as sendWindows from './migrations/030_send_windows.js';
import * as keyScopes from './migrations/031_key_scopes.js';
import * as suppressions from './migrations/029_suppressions.js';

// The dialect and the database's clock live in dialect.ts (queries import it without importing this).
export { dbNow, type Dialect } from './dialect.js';

export interface Db {
  kysely: Kysely<Database>;
  dialect: Dialect;
  /** The statements of POST /send and GET /status, prepared once (hot-path.ts). */
  hotPath: HotPath;
  close(): Promise<void>;
}

let pgModule: typeof pg | undefined;
/**
 * The PostgreSQL driver, loaded when a PostgreSQL database is first opened: a process on SQLite does
 * not load it (it took about 70 ms of each start).
 */
function loadPg(): typeof pg {
  if (pgModule) return pgModule;
  pgModule = createRequire(import.meta.url)('pg') as typeof pg;
  // BIGINT (epoch ms, counts) arrives as a string from pg by default; every value we store fits a double.
  pgModule.types.setTypeParser(pgModule.types.builtins.INT8, (value) => Number(value));
  return pgModule;
}

export interface OpenDbOptions {
  databaseUrl: string | undefined;
  dataDir: string;
  /** PostgreSQL schema to use (tests give each run its own); created when missing. */
  pgSchema?: string;
  /** SQLite file name inside dataDir. */
  sqliteFile?: string;
  /** An idle PostgreSQL connection broke (logged by the caller; the pool replaces it). */
  onPoolError?: (err: Error) => void;
  /**
   * SQLite: copy the WAL back into the database file on a thread of its own instead of in the commit
   * that passes 1,000 pages, on the event loop (sqlite-checkpointer.ts). For long-running processes;
   * `onError` hears of a failed checkpoint.
   */
  backgroundCheckpoints?: { onError(message: string): void };
  /** PostgreSQL connections this process may open (DATABASE_POOL_SIZE); default 10. */
  poolSize?: number;
  /**
   * Benchmarks only: SQLite's busy_timeout, the longest one statement waits for a lock ON the event loop
   * (default SQLITE_BUSY_TIMEOUT_MS; longer waits happen between tries, off it: sqlite-lock-wait.ts).
   */
  sqliteBusyTimeoutMs?: number;
}

/** The embedded database's file name inside DATA_DIR. */
export const SQLITE_FILE = 'voicenote.db';

const STATEMENT_CACHE_SIZE = 256;

/**
 * Page cache per SQLite connection, as PRAGMA cache_size (negative: KiB), SQLite's own default.
 * better-sqlite3 builds SQLite with 16 MB instead; the writer's cache then fills as the database grows
 * and stays full, which a 10-minute soak showed as RSS still growing (10.6 MiB outside V8's heap in
 * 5 minutes at 30 sends/s; none with 2 MB, and no slower). Pages not cached here are in the OS's
 * file cache, one read away.
 */
export const SQLITE_CACHE_SIZE = -2000;
/** Longest wait for a new PostgreSQL connection, and for one query's answer. */
export const PG_CONNECT_TIMEOUT_MS = 3_000;
export const PG_QUERY_TIMEOUT_MS = 5_000;

/**
 * Kysely prepares every query anew; on SQLite preparing costs about as much as running. The service
 * issues a few dozen distinct statements, so reusing the prepared ones is a cheap, bounded win.
 */
function withStatementCache(database: SqliteDatabase.Database, tracker: WriteTracker) {
  const cache = new Map<string, SqliteDatabase.Statement>();
  return {
    close: () => database.close(),
    prepare(text: string): SqliteDatabase.Statement {
      let statement = cache.get(text);
      if (!statement) {
        if (cache.size >= STATEMENT_CACHE_SIZE) cache.clear();
        statement = database.prepare(text);
        cache.set(text, statement);
      }
      tracker.note(statement);
      return statement;
    },
  } satisfies SqliteDialectConfig['database'];
}

export async function openDb(options: OpenDbOptions): Promise<Db> {
  if (options.databaseUrl) {
    const schema = options.pgSchema;
    if (schema !== undefined && !/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`bad schema name ${schema}`);
    const pool = new (loadPg().Pool)({
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 10,
      // Bounded waits, so a request never hangs on a database that is away: it gets a 503 instead.
      connectionTimeoutMillis: PG_CONNECT_TIMEOUT_MS,
      query_timeout: PG_QUERY_TIMEOUT_MS,
      keepAlive: true,
      ...(schema ? { options: `-c search_path=${schema}` } : {}),
    });
    // An idle connection that breaks (the server restarted) is dropped by the pool and replaced on
    // next use; unhandled, its 'error' event would end the process.
    pool.on('error', (err) => options.onPoolError?.(err));
    // A connection that breaks while a query runs on it rejects that query, and pg also emits 'error'
    // on the checked-out client, where the pool listens only while the client is idle: without a
    // listener of its own that event would end the process. The query's caller handles the failure.
    pool.on('connect', (client) => {
      client.on('error', () => undefined);
    });
    const kysely = new Kysely<Database>({ dialect: new SchemaScopedPostgresDialect({ pool }) });
    if (schema) await sql`create schema if not exists ${sql.id(schema)}`.execute(kysely);
    return { kysely, dialect: 'postgres', hotPath: new PostgresHotPath(pool), close: () => kysely.destroy() };
  }
  fs.mkdirSync(options.dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const file = path.join(options.dataDir, options.sqliteFile ?? SQLITE_FILE);
  const created = !fs.existsSync(file);
  const database = new SqliteDatabase(file);
  // For the service's user only, whatever the umask; the WAL and shared-memory files SQLite creates
  // next take the database file's mode.
  if (created) fs.chmodSync(file, PRIVATE_FILE_MODE);
  database.pragma('journal_mode = WAL');
  // A 202 is a promise: a commit is on disk before the answer goes out, even across a power cut. SQLite
  // would flush the WAL at every commit with FULL, on the event loop; NORMAL leaves the flush to
  // DurableSqliteDialect, which does it off the event loop, shared by the commits made meanwhile, and
  // still before any write's promise resolves (sqlite-durable.ts). Measured in BENCHMARKS.md.
  database.pragma('synchronous = NORMAL');
  // Waits for another process's write lock block the event loop only this long; longer ones happen
  // between tries, asynchronously (sqlite-lock-wait.ts).
  database.pragma(`busy_timeout = ${options.sqliteBusyTimeoutMs ?? SQLITE_BUSY_TIMEOUT_MS}`);
  database.pragma('foreign_keys = ON');
  database.pragma(`cache_size = ${SQLITE_CACHE_SIZE}`);
  const tracker = new WriteTracker();
  const flusher = new WalFlusher(file);
  const statements = withStatementCache(database, tracker);
  const dialect = new DurableSqliteDialect({ database: statements }, tracker, flusher, { inTransaction: () => database.inTransaction });
  const kysely = new Kysely<Database>({ dialect });
  const hotPath = new SqliteHotPath({ kysely, writer: database, prepare: statements.prepare, file });
  const checkpointer = options.backgroundCheckpoints ? new WalCheckpointer({ file, writer: database, onError: options.backgroundCheckpoints.onError }) : undefined;
  return {
    kysely,
    dialect: 'sqlite',
    hotPath,
    close: async () => {
      await checkpointer?.close();
      await hotPath.close();
      await kysely.destroy();
      await flusher.close();
    },
  };
}

const MIGRATIONS: Record<string, Migration> = {
  '001_initial': initial,
  '002_whatsapp_keys': whatsappKeys,
  '003_message_route': messageRoute,
  '004_one_owner': oneOwner,
  '007_webhooks_message_log': webhooksMessageLog,
  '006_process_affinity': processAffinity,
  '006b_usage_by_platform': usageByPlatform,
  '008_dashboard_sessions': dashboardSessions,
  '005_reliability': reliability,
  '010_message_retention': messageRetention,
  '011_message_request_id': messageRequestId,
  '012_whatsapp_sent_messages': whatsappSentMessages,
  '013_send_at_cancel': sendAtCancel,
  '014_sending_rhythm': sendingRhythm,
  '015_message_sender': messageSender,
  '019_platform_reached': platformReached,
  '022_linkedin_listeners': linkedinListeners,
  '023_message_lookup_indexes': messageLookupIndexes,
  '024_cancel_reason': cancelReason,
  '025_sender_watch': senderWatch,
  '026_listening_accounts': listeningAccounts,
  '027_telegram_account_state': telegramAccountState,
  '028_sender_proxy': senderProxy,
  '030_send_windows': sendWindows,
  '031_key_scopes': keyScopes,
  '016_sender_records': senderRecords,
  '016b_recipient_checks': recipientChecks,
  '017_replies': replies,
  '018_telegram_sessions': telegramSessions,
  '029_suppressions': suppressions,
};

const provider: MigrationProvider = { getMigrations: async () => MIGRATIONS };

/** Applies every pending migration; returns the names applied now. */
export async function migrate(db: Db): Promise<string[]> {
  // Unless told the schema, Kysely looks for its migration tables in every schema of the database:
  // another schema's (another app, another test run) would pass for ours and ours would never be made.
  const migrationTableSchema = db.dialect === 'postgres' ? await currentSchema(db) : undefined;
  // Migrations are independent of one another (each adds its own tables or columns), so one that lands
  // with a lower number after a higher one was applied still runs instead of stopping the start.
  const migrator = new Migrator({
    db: db.kysely,
    provider,
    allowUnorderedMigrations: true,
    // By code unit, not Kysely's default localeCompare: the names start with their number, so the order
    // is the same, and a process's first localeCompare loads ICU's collator (about 10 ms of every start).
    nameComparator: (a, b) => (a < b ? -1 : a > b ? 1 : 0),
    ...(migrationTableSchema ? { migrationTableSchema } : {}),
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

async function currentSchema(db: Db): Promise<string | undefined> {
  const { rows } = await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db.kysely);
  return rows[0]?.schema ?? undefined;
}

/** Storage answers at all (readiness). */
export async function ping(db: Db): Promise<void> {
  await sql`select 1`.execute(db.kysely);
}
