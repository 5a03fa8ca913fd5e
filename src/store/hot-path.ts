import type { MessageRow } from './messages.js';
import type { IdempotencyRow } from './idempotency.js';

/**
 * The statements every `POST /send` and `GET /status` runs, written out as SQL once per dialect
 * (hot-path-sqlite.ts, hot-path-postgres.ts) instead of built by the query builder on each request:
 * building and compiling a query cost more than running it. Everything else goes through Kysely.
 */
export interface HotPath {
  /** What `GET /status` shows of a message of this owner; undefined when it has none with this id. */
  findMessageStatus(owner: { accountId: string; env: string }, id: string): Promise<MessageStatusRow | undefined>;
  /**
   * Stores a new message and counts it against the monthly quota, atomically and durably: resolves only
   * once the message is committed (and, on SQLite, flushed to disk). With an Idempotency-Key, the
   * answer is stored in the same transaction; when an answer is already stored under the key (a
   * concurrent request won), nothing is written and that answer is returned instead.
   */
  acceptSend(send: AcceptSend): Promise<AcceptOutcome>;
  close(): Promise<void>;
}

export type MessageStatusRow = Pick<
  MessageRow,
  'id' | 'status' | 'platform' | 'recipient' | 'created_at' | 'delivered_at' | 'error_code' | 'error_message' | 'next_attempt_at' | 'wait_reason'
>;

/** One message to look up, within its owner's messages. */
export interface StatusLookup {
  owner: { accountId: string; env: string };
  id: string;
}

export interface AcceptSend {
  /** The new row; its account, env and period_start name the usage row it counts against. */
  message: MessageRow;
  monthlyQuota: number;
  /** The answer to store under the request's Idempotency-Key (its created_at is the time of the send). */
  idempotency?: IdempotencyRow;
}

export type AcceptOutcome =
  | { kind: 'accepted'; /** Sends counted this period, this one included. */ sent: number }
  | { kind: 'quota_exceeded' }
  | { kind: 'replay'; stored: IdempotencyRow };

/** The columns a new message is inserted with, in one order both dialects' statements share. */
export const MESSAGE_INSERT_COLUMNS = [
  'id',
  'account_id',
  'env',
  'platform',
  'recipient',
  'audio_url',
  'duration',
  'caption',
  'recording_indicator',
  'credentials',
  'affinity',
  'request_id',
  'status',
  'error_code',
  'error_message',
  'attempts',
  'lease_owner',
  'lease_expires_at',
  'period_start',
  'created_at',
  'updated_at',
  'delivered_at',
  'send_at',
  'sender_key',
  'cancel_on_reply',
  'wait_reason',
  'waited_until',
  'recipient_time_zone',
] as const satisfies ReadonlyArray<keyof MessageRow>;

export const messageInsertValues = (row: MessageRow): unknown[] => MESSAGE_INSERT_COLUMNS.map((column) => row[column] ?? null);

/**
 * A new message is due at once on the database's clock, or at its `send_at` when that is later (a
 * scheduled send), or at its send window's opening (`waited_until`) when that is later still.
 */
export const notBefore = (row: MessageRow): number => Math.max(Number(row.send_at ?? 0), Number(row.waited_until ?? 0));

export const IDEMPOTENCY_COLUMNS = ['account_id', 'env', 'key', 'endpoint', 'request_hash', 'status_code', 'response_body', 'created_at'] as const satisfies ReadonlyArray<
  keyof IdempotencyRow
>;

export const idempotencyValues = (row: IdempotencyRow): unknown[] => IDEMPOTENCY_COLUMNS.map((column) => row[column]);

export const MESSAGE_STATUS_COLUMNS = ['id', 'status', 'platform', 'recipient', 'created_at', 'delivered_at', 'error_code', 'error_message', 'next_attempt_at', 'wait_reason'] as const satisfies ReadonlyArray<
  keyof MessageStatusRow
>;
