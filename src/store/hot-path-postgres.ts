import type pg from 'pg';
import { IDEMPOTENCY_TTL_MS, type IdempotencyRow } from './idempotency.js';
import {
  IDEMPOTENCY_COLUMNS,
  idempotencyValues,
  MESSAGE_INSERT_COLUMNS,
  MESSAGE_STATUS_COLUMNS,
  messageInsertValues,
  type AcceptOutcome,
  type AcceptSend,
  type HotPath,
  type MessageStatusRow,
} from './hot-path.js';

/** SQL types of the inserted message columns, for the casts of `insert … select` (parameters there have no type). */
const MESSAGE_COLUMN_TYPES: Record<(typeof MESSAGE_INSERT_COLUMNS)[number], string> = {
  id: 'text',
  account_id: 'text',
  env: 'text',
  platform: 'text',
  recipient: 'text',
  audio_url: 'text',
  duration: 'double precision',
  caption: 'text',
  credentials: 'text',
  affinity: 'text',
  request_id: 'text',
  status: 'text',
  error_code: 'text',
  error_message: 'text',
  attempts: 'integer',
  lease_owner: 'text',
  lease_expires_at: 'bigint',
  period_start: 'bigint',
  created_at: 'bigint',
  updated_at: 'bigint',
  delivered_at: 'bigint',
};

// Parameters $1–$3 name the usage row (account, env, period), $4 is the quota; the message's columns follow.
const FIRST_MESSAGE_PARAM = 5;
const messageParams = MESSAGE_INSERT_COLUMNS.map((column, i) => `$${FIRST_MESSAGE_PARAM + i}::${MESSAGE_COLUMN_TYPES[column]}`);
const PLATFORM_PARAM = `$${FIRST_MESSAGE_PARAM + MESSAGE_INSERT_COLUMNS.indexOf('platform')}::text`;

/**
 * A send in ONE statement (one round trip, one implicit transaction): the quota upsert, whose update
 * applies only while the count is under the quota; then, only when it returned a row, the message and
 * the platform's count. No row back: the quota is used up and nothing was written.
 */
const ACCEPT_SEND = `with reserved as (
  insert into usage_periods as u (account_id, env, period_start, sent, delivered, failed) values ($1, $2, $3, 1, 0, 0)
  on conflict (account_id, env, period_start) do update set sent = u.sent + 1 where u.sent < $4
  returning u.sent
), message as (
  insert into messages (${MESSAGE_INSERT_COLUMNS.join(', ')}, next_attempt_at)
  select ${messageParams.join(', ')}, (extract(epoch from clock_timestamp()) * 1000)::bigint from reserved
), by_platform as (
  insert into usage_by_platform as p (account_id, env, period_start, platform, sent) select $1, $2, $3, ${PLATFORM_PARAM}, 1 from reserved
  on conflict (account_id, env, period_start, platform) do update set sent = p.sent + 1
)
select sent from reserved`;

const FIND_MESSAGE_STATUS = `select ${MESSAGE_STATUS_COLUMNS.join(', ')} from messages where id = $1 and account_id = $2 and env = $3`;
const DROP_DEAD_ANSWER = 'delete from idempotency_keys where account_id = $1 and env = $2 and key = $3 and created_at <= $4';
const CLAIM_KEY = `insert into idempotency_keys (${IDEMPOTENCY_COLUMNS.join(', ')}) values (${IDEMPOTENCY_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})
  on conflict (account_id, env, key) do nothing returning key`;
const FIND_ANSWER = `select ${IDEMPOTENCY_COLUMNS.join(', ')} from idempotency_keys where account_id = $1 and env = $2 and key = $3 and created_at > $4`;

/**
 * PostgreSQL's request path: named prepared statements (each connection parses and plans them once),
 * and a send without an Idempotency-Key in one round trip. With a key: one transaction that first takes
 * the key (a concurrent request with the same key waits on it, then finds the winner's answer).
 */
export class PostgresHotPath implements HotPath {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async findMessageStatus(owner: { accountId: string; env: string }, id: string): Promise<MessageStatusRow | undefined> {
    const result = await this.#pool.query<MessageStatusRow>({ name: 'find_message_status', text: FIND_MESSAGE_STATUS, values: [id, owner.accountId, owner.env] });
    return result.rows[0];
  }

  async acceptSend(send: AcceptSend): Promise<AcceptOutcome> {
    if (send.monthlyQuota < 1) return { kind: 'quota_exceeded' };
    if (!send.idempotency) return acceptOn(this.#pool, send);
    const answer = send.idempotency;
    const owner = [answer.account_id, answer.env, answer.key];
    const cutoff = answer.created_at - IDEMPOTENCY_TTL_MS;
    const client = await this.#pool.connect();
    let broken: Error | undefined;
    try {
      // Twice at most: a stored answer can vanish between the two statements only by expiring that very moment.
      for (let attempt = 1; ; attempt++) {
        await client.query('begin');
        try {
          await client.query({ name: 'drop_dead_answer', text: DROP_DEAD_ANSWER, values: [...owner, cutoff] });
          const claimed = await client.query({ name: 'claim_idempotency_key', text: CLAIM_KEY, values: idempotencyValues(answer) });
          if (claimed.rowCount === 0) {
            await client.query('rollback');
            const stored = await client.query<IdempotencyRow>({ name: 'find_idempotent_answer', text: FIND_ANSWER, values: [...owner, cutoff] });
            if (stored.rows[0]) return { kind: 'replay', stored: stored.rows[0] };
            if (attempt < 2) continue;
            throw new Error('the answer stored under this Idempotency-Key vanished');
          }
          const outcome = await acceptOn(client, send);
          await client.query(outcome.kind === 'accepted' ? 'commit' : 'rollback');
          return outcome;
        } catch (error) {
          await client.query('rollback').catch((rollbackError: Error) => {
            broken = rollbackError;
          });
          throw error;
        }
      }
    } finally {
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    // The pool is Kysely's, closed with it.
  }
}

async function acceptOn(queryable: pg.Pool | pg.PoolClient, send: AcceptSend): Promise<AcceptOutcome> {
  const { message } = send;
  const result = await queryable.query<{ sent: number }>({
    name: 'accept_send',
    text: ACCEPT_SEND,
    values: [message.account_id, message.env, message.period_start, send.monthlyQuota, ...messageInsertValues(message)],
  });
  const row = result.rows[0];
  return row ? { kind: 'accepted', sent: Number(row.sent) } : { kind: 'quota_exceeded' };
}
