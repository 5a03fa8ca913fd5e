import SqliteDatabase from 'better-sqlite3';
import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { MessageRow } from './messages.js';
import { itemResult, TurnBatch, type ItemResult } from './turn-batch.js';
import { IDEMPOTENCY_TTL_MS, type IdempotencyRow } from './idempotency.js';
import { isSqliteBusy, inWriteTransaction as withWriteLock } from './sqlite-lock-wait.js';
import { placeholders } from './fixed-statement.js';
import {
  IDEMPOTENCY_COLUMNS,
  idempotencyValues,
  MESSAGE_INSERT_COLUMNS,
  MESSAGE_STATUS_COLUMNS,
  messageInsertValues,
  notBefore,
  type AcceptOutcome,
  type AcceptSend,
  type HotPath,
  type MessageStatusRow,
  type StatusLookup,
} from './hot-path.js';

const SQL = {
  findMessageStatus: `select ${MESSAGE_STATUS_COLUMNS.join(', ')} from messages where id = ? and account_id = ? and env = ?`,
  // Counts `count` sends against the quota, only while all of them fit: no row back means they do not
  // (and nothing was counted). The select's `where` also keeps the upsert parseable (SQLite's rule for
  // `insert … select … on conflict`).
  reserve: `insert into usage_periods (account_id, env, period_start, sent, delivered, failed)
    select @account, @env, @period, @count, 0, 0 where @count <= @quota
    on conflict (account_id, env, period_start) do update set sent = usage_periods.sent + excluded.sent where usage_periods.sent + excluded.sent <= @quota
    returning sent`,
  countPlatform: `insert into usage_by_platform (account_id, env, period_start, platform, sent) values (?, ?, ?, ?, ?)
    on conflict (account_id, env, period_start, platform) do update set sent = usage_by_platform.sent + excluded.sent`,
  // Due at once on the database's clock, like every due time; a scheduled send or one waiting for its send window later (the last parameter: hot-path.ts notBefore).
  insertMessage: `insert into messages (${MESSAGE_INSERT_COLUMNS.join(', ')}, next_attempt_at)
    values (${placeholders(MESSAGE_INSERT_COLUMNS.length)}, max(cast(unixepoch('subsec') * 1000 as integer), ?))`,
  findAnswer: `select ${IDEMPOTENCY_COLUMNS.join(', ')} from idempotency_keys where account_id = ? and env = ? and key = ? and created_at > ?`,
  dropDeadAnswer: `delete from idempotency_keys where account_id = ? and env = ? and key = ? and created_at <= ?`,
  storeAnswer: `insert into idempotency_keys (${IDEMPOTENCY_COLUMNS.join(', ')}) values (${placeholders(IDEMPOTENCY_COLUMNS.length)})`,
};

/** Prepares (once, then from a cache) a statement on the writing connection, noting it for the disk flush. */
export type PrepareOnWriter = (text: string) => SqliteDatabase.Statement;

/** Most sends (or reads) one transaction takes; the rest wait for the next. */
const MAX_BATCH = 256;
/**
 * Send batches committing or flushing at once. A commit and its flush cost about as much CPU as ten
 * sends, so sends wait for a running batch rather than each starting their own; two let one batch
 * write while the other's flush runs.
 */
const SEND_BATCHES_IN_FLIGHT = 2;

/**
 * SQLite's request path, in batches: what arrives in the same turn of the event loop shares one
 * transaction. Starting a transaction takes file-lock system calls that cost several times more than
 * a lookup by key, so sharing it is most of the speed.
 *  - Reads go to a read-only connection of their own (WAL lets it read while the writer writes; it
 *    sees committed data only, as of the moment the batch runs, which is after every commit whose 202
 *    went out).
 *  - Sends share ONE transaction on the writing connection and one disk flush (group commit); one that
 *    fails is rolled back alone (see the constructor). The statements run
 *    synchronously while the batch holds Kysely's one connection, so no other transaction can
 *    interleave; every send's promise settles after the commit is on disk.
 */
export class SqliteHotPath implements HotPath {
  readonly #prepare: PrepareOnWriter;
  readonly #reader: SqliteDatabase.Database;
  /** Prepared at first use: the connection opens before the migrations have made the tables. */
  #findStatus: SqliteDatabase.Statement | undefined;
  readonly #sends: TurnBatch<AcceptSend, AcceptOutcome>;
  readonly #lookups: TurnBatch<StatusLookup, MessageStatusRow | undefined>;

  constructor(options: { kysely: Kysely<Database>; writer: SqliteDatabase.Database; prepare: PrepareOnWriter; file: string }) {
    const { kysely, writer } = options;
    this.#prepare = options.prepare;
    this.#reader = new SqliteDatabase(options.file, { readonly: true, fileMustExist: true });
    this.#reader.pragma('busy_timeout = 5000');
    // The writer's page cache size (db.ts, SQLITE_CACHE_SIZE), not better-sqlite3's 16 MB.
    this.#reader.pragma(`cache_size = ${Number(writer.pragma('cache_size', { simple: true }))}`);
    // The whole batch in one transaction, the one that holds the write lock (not a savepoint inside it:
    // SQLite copies every page a savepoint first changes into a sub-journal, which made each insert cost
    // twice as much). A send that throws (which no valid send does: a used-up quota is an answer, not an
    // error) rolls all of it back, and the batch runs again in a new transaction with each send in a
    // savepoint of its own (better-sqlite3 runs a transaction function called inside a transaction as
    // one), so that only that send fails.
    const inSavepoint = writer.transaction((send: AcceptSend) => this.#acceptNow(send));
    // Holding the connection through Kysely: no Kysely transaction is open meanwhile, and the release
    // flushes the WAL (sqlite-durable.ts) before this resolves. The batch runs once the write lock is in
    // hand, waited for off the event loop and without the connection while another process holds it
    // (sqlite-lock-wait.ts).
    // (The executor's provideConnection, not `kysely.connection()`, which builds a Kysely instance per hold.)
    const executor = kysely.getExecutor();
    const inWriteTransaction = <T>(work: () => T): Promise<T> => withWriteLock(writer, (inside) => executor.provideConnection(inside), work);
    const acceptBatch = async (sends: AcceptSend[]): Promise<Array<ItemResult<AcceptOutcome>>> => {
      try {
        return await inWriteTransaction(() => this.#acceptAll(sends));
      } catch (error) {
        // Alone, or the lock never came: nothing to tell apart (every send of the batch gets the error).
        if (sends.length === 1 || isSqliteBusy(error)) throw error;
        return inWriteTransaction(() => sends.map((send) => itemResult(() => inSavepoint(send))));
      }
    };
    this.#sends = new TurnBatch(acceptBatch, { maxItems: MAX_BATCH, maxInFlight: SEND_BATCHES_IN_FLIGHT });
    const inReadTransaction = this.#reader.transaction((lookups: StatusLookup[]) => {
      this.#findStatus ??= this.#reader.prepare(SQL.findMessageStatus);
      const statement = this.#findStatus;
      return lookups.map(({ owner, id }) => itemResult(() => statement.get(id, owner.accountId, owner.env) as MessageStatusRow | undefined));
    });
    this.#lookups = new TurnBatch(inReadTransaction, { maxItems: MAX_BATCH });
  }

  findMessageStatus(owner: { accountId: string; env: string }, id: string): Promise<MessageStatusRow | undefined> {
    return this.#lookups.add({ owner, id });
  }

  acceptSend(send: AcceptSend): Promise<AcceptOutcome> {
    return this.#sends.add(send);
  }

  async close(): Promise<void> {
    this.#reader.close();
  }

  /**
   * A batch, inside its transaction. Sends of one usage row are counted with one statement (and each
   * platform's count with one more), not two statements each; sends with an Idempotency-Key go one by
   * one, as a second send with the same key in the same batch must find the first one's answer.
   */
  #acceptAll(sends: AcceptSend[]): Array<ItemResult<AcceptOutcome>> {
    const results: Array<ItemResult<AcceptOutcome>> = new Array(sends.length);
    const groups = new Map<string, number[]>();
    sends.forEach((send, i) => {
      if (send.idempotency) {
        results[i] = { ok: true, value: this.#acceptNow(send) };
        return;
      }
      const { account_id, env, period_start } = send.message;
      const key = `${account_id}\n${env}\n${period_start}\n${send.monthlyQuota}`;
      const group = groups.get(key);
      if (group) group.push(i);
      else groups.set(key, [i]);
    });
    for (const indexes of groups.values()) {
      const group = indexes.map((i) => sends[i]!);
      // When they do not all fit: one by one, in order, so that exactly what fits is accepted.
      const outcomes = this.#acceptTogether(group) ?? group.map((send) => this.#acceptNow(send));
      outcomes.forEach((outcome, n) => (results[indexes[n]!] = { ok: true, value: outcome }));
    }
    return results;
  }

  /** Sends of one usage row and quota: all accepted, each with its own count, or undefined (nothing written) when they do not all fit. */
  #acceptTogether(sends: AcceptSend[]): AcceptOutcome[] | undefined {
    const { message, monthlyQuota } = sends[0]!;
    const reserved = this.#reserve(message, sends.length, monthlyQuota);
    if (reserved === undefined) return undefined;
    const byPlatform = new Map<string, number>();
    for (const send of sends) {
      this.#prepare(SQL.insertMessage).run(...messageInsertValues(send.message), notBefore(send.message));
      byPlatform.set(send.message.platform, (byPlatform.get(send.message.platform) ?? 0) + 1);
    }
    for (const [platform, count] of byPlatform) this.#prepare(SQL.countPlatform).run(message.account_id, message.env, message.period_start, platform, count);
    // The counts this batch took, in order: the last one is the row's.
    const first = reserved - sends.length + 1;
    return sends.map((_, i) => ({ kind: 'accepted', sent: first + i }));
  }

  /** One send, inside the batch's transaction. */
  #acceptNow(send: AcceptSend): AcceptOutcome {
    const { message, idempotency } = send;
    if (idempotency) {
      const stored = this.#storedAnswer(idempotency);
      if (stored) return { kind: 'replay', stored };
    }
    if (send.monthlyQuota < 1) return { kind: 'quota_exceeded' };
    const reserved = this.#reserve(message, 1, send.monthlyQuota);
    if (reserved === undefined) return { kind: 'quota_exceeded' };
    this.#prepare(SQL.insertMessage).run(...messageInsertValues(message), notBefore(message));
    this.#prepare(SQL.countPlatform).run(message.account_id, message.env, message.period_start, message.platform, 1);
    if (idempotency) this.#prepare(SQL.storeAnswer).run(...idempotencyValues(idempotency));
    return { kind: 'accepted', sent: reserved };
  }

  /** Counts `count` sends on the message's usage row if all fit under the quota: the row's new count, or undefined. */
  #reserve(message: MessageRow, count: number, quota: number): number | undefined {
    const row = this.#prepare(SQL.reserve).get({ account: message.account_id, env: message.env, period: message.period_start, count, quota }) as { sent: number } | undefined;
    return row ? Number(row.sent) : undefined;
  }

  /** The answer stored under this request's key and still replayed; a dead one (past the TTL) is dropped. */
  #storedAnswer(answer: IdempotencyRow): IdempotencyRow | undefined {
    const cutoff = answer.created_at - IDEMPOTENCY_TTL_MS;
    const owner = [answer.account_id, answer.env, answer.key] as const;
    const stored = this.#prepare(SQL.findAnswer).get(...owner, cutoff) as IdempotencyRow | undefined;
    if (stored) return stored;
    this.#prepare(SQL.dropDeadAnswer).run(...owner, cutoff);
    return undefined;
  }
}
