import type pg from 'pg';
import { TurnBatch, type ItemResult } from './turn-batch.js';
import { IDEMPOTENCY_TTL_MS, type IdempotencyRow } from './idempotency.js';
import {
  IDEMPOTENCY_COLUMNS,
  idempotencyValues,
  MESSAGE_INSERT_COLUMNS,
  MESSAGE_STATUS_COLUMNS,
  type AcceptOutcome,
  type AcceptSend,
  type HotPath,
  type MessageStatusRow,
  type StatusLookup,
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
  recording_indicator: 'integer',
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
  send_at: 'bigint',
  sender_key: 'text',
  cancel_on_reply: 'integer',
  wait_reason: 'text',
  waited_until: 'bigint',
  recipient_time_zone: 'text',
};

// $1–$3 name the usage row (account, env, period), $4 is how many sends, $5 the quota; then one array
// per message column, an element per send.
const FIRST_COLUMN_PARAM = 6;
const columnArrays = MESSAGE_INSERT_COLUMNS.map((column, i) => `$${FIRST_COLUMN_PARAM + i}::${MESSAGE_COLUMN_TYPES[column]}[]`);

/**
 * Sends of one account's period in ONE statement (one round trip, one implicit transaction, one WAL
 * flush): the quota upsert takes all of them at once, and only while they all fit; then, only when it
 * returned a row, the messages and the platforms' counts. No row back: they do not all fit, and nothing
 * was written. Sends arriving together share it, so the usage row is locked once per batch, not once
 * per send (a lock held until its commit is flushed: one send at a time, per account, otherwise).
 */
const ACCEPT_SENDS = `with reserved as (
  insert into usage_periods as u (account_id, env, period_start, sent, delivered, failed)
  select $1, $2, $3, $4::integer, 0, 0 where $4::integer <= $5::integer
  on conflict (account_id, env, period_start) do update set sent = u.sent + excluded.sent where u.sent + excluded.sent <= $5::integer
  returning u.sent
), input as (
  select * from unnest(${columnArrays.join(', ')}) as t(${MESSAGE_INSERT_COLUMNS.join(', ')})
), message as (
  insert into messages (${MESSAGE_INSERT_COLUMNS.join(', ')}, next_attempt_at)
  select ${MESSAGE_INSERT_COLUMNS.map((column) => `input.${column}`).join(', ')},
    -- Due at once on the database's clock, or at send_at when later (a scheduled send), or at the send window's opening when later still (hot-path.ts notBefore).
    greatest((extract(epoch from clock_timestamp()) * 1000)::bigint, coalesce(input.send_at, 0), coalesce(input.waited_until, 0)) from input, reserved
), by_platform as (
  insert into usage_by_platform as p (account_id, env, period_start, platform, sent)
  select $1, $2, $3, input.platform, count(*) from input, reserved group by input.platform
  on conflict (account_id, env, period_start, platform) do update set sent = p.sent + excluded.sent
)
select sent from reserved`;

/** Several lookups in one statement: each by id, and only within its owner's messages. */
const FIND_MESSAGE_STATUSES = `select ${MESSAGE_STATUS_COLUMNS.map((column) => `m.${column}`).join(', ')}, m.account_id, m.env
  from unnest($1::text[], $2::text[], $3::text[]) as wanted(id, account_id, env)
  join messages m on m.id = wanted.id and m.account_id = wanted.account_id and m.env = wanted.env`;
const DROP_DEAD_ANSWER = 'delete from idempotency_keys where account_id = $1 and env = $2 and key = $3 and created_at <= $4';
const CLAIM_KEY = `insert into idempotency_keys (${IDEMPOTENCY_COLUMNS.join(', ')}) values (${IDEMPOTENCY_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})
  on conflict (account_id, env, key) do nothing returning key`;
const FIND_ANSWER = `select ${IDEMPOTENCY_COLUMNS.join(', ')} from idempotency_keys where account_id = $1 and env = $2 and key = $3 and created_at > $4`;

/** Most sends (or lookups) one statement takes; the rest wait for the next batch. */
const MAX_BATCH = 256;
/** Lookup statements running at once; what arrives meanwhile goes into the next. */
const LOOKUP_BATCHES_IN_FLIGHT = 2;

/**
 * PostgreSQL's request path: named prepared statements (each connection parses and plans them once).
 * Sends without an Idempotency-Key that arrive together are accepted in one statement per account
 * (ACCEPT_SENDS); one batch runs at a time, and what arrives meanwhile forms the next. With a key: one
 * transaction per send that first takes the key (a concurrent request with the same key waits on it,
 * then finds the winner's answer).
 */
export class PostgresHotPath implements HotPath {
  readonly #pool: pg.Pool;
  readonly #sends: TurnBatch<AcceptSend, AcceptOutcome>;
  readonly #lookups: TurnBatch<StatusLookup, MessageStatusRow | undefined>;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
    this.#sends = new TurnBatch((sends) => this.#acceptBatch(sends), { maxItems: MAX_BATCH, maxInFlight: 1 });
    this.#lookups = new TurnBatch((lookups) => this.#findBatch(lookups), { maxItems: MAX_BATCH, maxInFlight: LOOKUP_BATCHES_IN_FLIGHT });
  }

  findMessageStatus(owner: { accountId: string; env: string }, id: string): Promise<MessageStatusRow | undefined> {
    return this.#lookups.add({ owner, id });
  }

  /** Lookups that arrived together, in one statement (one round trip instead of one each). */
  async #findBatch(lookups: StatusLookup[]): Promise<Array<ItemResult<MessageStatusRow | undefined>>> {
    const result = await this.#pool.query<MessageStatusRow & { account_id: string; env: string }>({
      name: 'find_message_statuses',
      text: FIND_MESSAGE_STATUSES,
      values: [lookups.map((l) => l.id), lookups.map((l) => l.owner.accountId), lookups.map((l) => l.owner.env)],
    });
    const found = new Map(result.rows.map(({ account_id, env, ...row }) => [`${row.id}\n${account_id}\n${env}`, row]));
    return lookups.map((l) => ({ ok: true, value: found.get(`${l.id}\n${l.owner.accountId}\n${l.owner.env}`) }));
  }

  async acceptSend(send: AcceptSend): Promise<AcceptOutcome> {
    if (send.monthlyQuota < 1) return { kind: 'quota_exceeded' };
    if (!send.idempotency) return this.#sends.add(send);
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
          const [outcome] = await acceptTogether(client, [send]);
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

  /** A batch: its sends grouped by usage row, each group in one statement, the groups side by side. */
  async #acceptBatch(sends: AcceptSend[]): Promise<Array<ItemResult<AcceptOutcome>>> {
    const results: Array<ItemResult<AcceptOutcome>> = new Array(sends.length);
    const groups = new Map<string, number[]>();
    sends.forEach((send, i) => {
      const { account_id, env, period_start } = send.message;
      const key = `${account_id}\n${env}\n${period_start}\n${send.monthlyQuota}`;
      const group = groups.get(key);
      if (group) group.push(i);
      else groups.set(key, [i]);
    });
    await Promise.all(
      [...groups.values()].map(async (indexes) => {
        const group = indexes.map((i) => sends[i]!);
        const together = await acceptTogether(this.#pool, group).catch(() => undefined);
        if (together && (group.length === 1 || together[0]!.kind === 'accepted')) {
          together.forEach((outcome, n) => (results[indexes[n]!] = { ok: true, value: outcome }));
          return;
        }
        // They did not all fit in the quota, or the statement failed: one by one, in order, so that
        // exactly what fits is accepted and a failing send fails alone.
        for (const [n, send] of group.entries()) {
          results[indexes[n]!] = await acceptTogether(this.#pool, [send]).then(
            ([outcome]) => ({ ok: true as const, value: outcome! }),
            (error: unknown) => ({ ok: false as const, error }),
          );
        }
      }),
    );
    return results;
  }
}

/**
 * Accepts sends of one usage row and quota in one statement: all of them, each with its own count, or
 * (when they do not all fit) none, each `quota_exceeded`.
 */
async function acceptTogether(queryable: pg.Pool | pg.PoolClient, sends: AcceptSend[]): Promise<AcceptOutcome[]> {
  const { message } = sends[0]!;
  const columns = MESSAGE_INSERT_COLUMNS.map((column) => sends.map((send) => send.message[column] ?? null));
  const result = await queryable.query<{ sent: number }>({
    name: 'accept_sends',
    text: ACCEPT_SENDS,
    values: [message.account_id, message.env, message.period_start, sends.length, sends[0]!.monthlyQuota, ...columns],
  });
  const row = result.rows[0];
  if (!row) return sends.map(() => ({ kind: 'quota_exceeded' }));
  // The counts this batch took, in order: the last one is the row's.
  const first = Number(row.sent) - sends.length + 1;
  return sends.map((_, i) => ({ kind: 'accepted', sent: first + i }));
}
