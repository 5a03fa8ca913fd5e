import type { Kysely } from 'kysely';
import { DB_NOW_SQL, dbNow, dialectOf, type Dialect } from './dialect.js';
import { FixedStatement, placeholders } from './fixed-statement.js';
import type { Database, MessagesTable } from './schema.js';
import { recordOutcome } from './usage.js';
import { recordSettlementEvents } from './webhook-outbox.js';

export type MessageRow = MessagesTable;

/** Statuses a message passes through; the last three are final (`canceled`: taken back before any worker took it). */
export type MessageStatus = 'queued' | 'processing' | 'delivered' | 'failed' | 'canceled';
const UNSETTLED: MessageStatus[] = ['queued', 'processing'];

export async function findMessage(db: Kysely<Database>, owner: { accountId: string; env: string }, id: string): Promise<MessageRow | undefined> {
  return db
    .selectFrom('messages')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .executeTakeFirst();
}

export interface ClaimOptions {
  limit: number;
  leaseMs: number;
  /**
   * The id this process holds affinity leases under: messages whose affinity key another process holds
   * are left to that process's worker. Without one, every held key counts as another's.
   */
  affinityHolder?: string;
}

/**
 * A worker treats its lease as lasting `leaseMs`; the row says it lasts this much longer
 * (`orphanGraceMs`), before another worker may take the message. A worker that delivered while storage
 * was away writes its held outcome first thing when storage returns, and that write must win over a
 * second send.
 */
export const ORPHAN_GRACE_MS = 5_000;
export const orphanGraceMs = (leaseMs: number): number => Math.min(ORPHAN_GRACE_MS, leaseMs);

/**
 * Claims that ended without any outcome (the worker died, or lost its lease) a message may collect
 * before it is failed with `platform_error` instead of being tried again: a message that kills its
 * worker must not kill every worker in turn.
 */
export const MAX_CLAIMS_WITHOUT_OUTCOME = 5;

/**
 * Takes up to `limit` due messages for this worker with a lease. A lease that runs out (the worker died)
 * makes the message claimable again (after its grace), so nothing accepted is lost; such a claim
 * is counted in `orphaned_claims`. Every time is the database's clock, so processes whose clocks
 * disagree still agree on who holds what and what is due. The claimed rows' `updated_at` is the
 * database's time of the claim.
 */
export async function claimDueMessages(db: Kysely<Database>, dialect: Dialect, workerId: string, options: ClaimOptions): Promise<MessageRow[]> {
  const take = (candidates: readonly ClaimCandidate[]) => candidates.map((c) => c.id);
  return (await claimDueMessagesFairly(db, dialect, workerId, { ...options, excludeAccounts: [], window: options.limit, pick: take })).claimed;
}

/** A due message as the fair pick sees it (src/delivery/fair-share.ts). */
export interface ClaimCandidate {
  id: string;
  account_id: string;
  /** Who sends it within its account: the affinity key (a WhatsApp session), else the platform. */
  sender: string;
  platform: string;
  audio_url: string;
}

export interface FairClaimOptions extends ClaimOptions {
  /** Accounts whose messages are left out (they hold their cap of this worker's slots). */
  excludeAccounts: readonly string[];
  /** Due messages read to choose from (in due order). */
  window: number;
  /** Which of the candidates to claim (at most `limit`). */
  pick(candidates: readonly ClaimCandidate[]): string[];
  /**
   * Also read `processing` messages whose lease ran out (their worker died). Rare, so a worker looks for
   * them now and then rather than at every claim (default true).
   */
  expiredLeases?: boolean;
}

export interface FairClaim {
  claimed: MessageRow[];
  /** Due messages were read but not picked (their accounts or senders were at their cap). */
  leftBehind: boolean;
}

/**
 * As claimDueMessages, but the worker chooses among the first `window` due messages (accounts at their
 * cap left out) which to take, so that no account and no sender takes every slot. Two statements: a
 * read of the due index's head (ordered by next_attempt_at, as the plain claim) and a claim of the
 * chosen ids that checks again that each is still free. On PostgreSQL both run in one transaction whose
 * read locks the rows it returns (FOR UPDATE SKIP LOCKED): other workers read past them, as before.
 */
export async function claimDueMessagesFairly(db: Kysely<Database>, dialect: Dialect, workerId: string, options: FairClaimOptions): Promise<FairClaim> {
  const run = async (trx: Kysely<Database>): Promise<FairClaim> => {
    // One read per status, each walking the due index (status, next_attempt_at) in order and stopping
    // after `window` rows; then merged. A single `status in (…) order by next_attempt_at` cannot walk
    // the index in order: it read and sorted every due message at each claim (its cost grew with the
    // backlog).
    const holder = options.affinityHolder;
    const excluded = options.excludeAccounts;
    const dueWith = async (status: MessageStatus) => {
      const statement = dueStatement(dialect, status, holder !== undefined, excluded.length > 0);
      const parameters = [status, ...(holder !== undefined ? [holder] : []), Date.now(), ...(excluded.length > 0 ? [listParameter(dialect, excluded)] : []), options.window];
      return (await statement.execute<DueRow, Database>(trx, parameters)).rows;
    };
    const rows = await dueWith('queued');
    if (options.expiredLeases !== false) rows.push(...(await dueWith('processing')));
    if (rows.length === 0) return { claimed: [], leftBehind: false };
    rows.sort((a, b) => Number(a.next_attempt_at) - Number(b.next_attempt_at));
    const candidates = rows.slice(0, options.window);
    const ids = options.pick(candidates.map((r) => ({ id: r.id, account_id: r.account_id, sender: r.affinity ?? `platform:${r.platform}`, platform: r.platform, audio_url: r.audio_url }))).slice(0, options.limit);
    if (ids.length === 0) return { claimed: [], leftBehind: true };
    const claimed = await claimChosen(trx, dialect, workerId, options, ids);
    return { claimed, leftBehind: rows.length > ids.length };
  };
  return dialect === 'postgres' ? db.transaction().execute(run) : run(db);
}

type DueRow = Pick<MessageRow, 'id' | 'account_id' | 'affinity' | 'platform' | 'audio_url' | 'next_attempt_at'>;

/**
 * Claims the chosen ids, checking again that each is still free (on SQLite another process may have
 * taken one since the read). On SQLite the checks on status and due time are kept from using the due
 * index (a unary `+`): without statistics its planner preferred that index to the ids' primary key,
 * and walked every due message to claim a few.
 */
async function claimChosen(db: Kysely<Database>, dialect: Dialect, workerId: string, options: ClaimOptions, ids: readonly string[]): Promise<MessageRow[]> {
  const statement = CLAIM_CHOSEN[dialect];
  const parameters = [workerId, options.leaseMs + orphanGraceMs(options.leaseMs), listParameter(dialect, ids), ...UNSETTLED];
  return (await statement.execute<MessageRow, Database>(db, parameters)).rows;
}

// The fair claim's statements run at every claim: written out once per dialect and shape
// (fixed-statement.ts) rather than built by Kysely each time. A list (of excluded accounts, of chosen
// ids) is one parameter whatever its length, so each shape is one statement: a JSON array read by
// json_each on SQLite, a text[] on PostgreSQL.

/**
 * Not for this process: the message's affinity key is held, under a live lease, by another process
 * (a platform session whose connection lives there, say). A key nobody holds (or whose holder's lease ran
 * out) does not count: whichever worker claims the message may take the resource over. Without a holder
 * every held key counts as another's. Parameters: the holder (when `holder`), then the clock.
 */
const notHeldByAnotherProcessSql = (holder: boolean): string =>
  `not exists (select 1 from affinity_leases where affinity_leases.key = messages.affinity${holder ? ' and affinity_leases.holder <> ?' : ''} and affinity_leases.expires_at > ?)`;

/** `column` is one of a list given as one parameter (listParameter): a JSON array on SQLite, a text[] on PostgreSQL. */
const inList = (dialect: Dialect, column: string): string => (dialect === 'sqlite' ? `${column} in (select value from json_each(?))` : `${column} = any(?::text[])`);
const notInList = (dialect: Dialect, column: string): string => (dialect === 'sqlite' ? `${column} not in (select value from json_each(?))` : `${column} <> all(?::text[])`);
const listParameter = (dialect: Dialect, list: readonly string[]): unknown => (dialect === 'sqlite' ? JSON.stringify(list) : list);

const dueStatements = new Map<string, FixedStatement>();
/**
 * The head of the due index for one status; parameters: status, [holder], clock, [excluded accounts],
 * window. A queued message holds no lease (a claim takes one with `processing`, and a retry gives it up
 * as it goes back to `queued`), so only `processing` messages are checked for a live one: the check read
 * a column of every row passed (a third of the read's time on SQLite).
 */
function dueStatement(dialect: Dialect, status: MessageStatus, holder: boolean, excluding: boolean): FixedStatement {
  const key = `${dialect} ${status} ${holder} ${excluding}`;
  let statement = dueStatements.get(key);
  if (!statement) {
    const now = DB_NOW_SQL[dialect];
    statement = new FixedStatement(
      `select id, account_id, affinity, platform, audio_url, next_attempt_at from messages
       where status = ? and next_attempt_at <= ${now}${status === 'queued' ? '' : ` and (lease_expires_at is null or lease_expires_at < ${now})`}
         and ${notHeldByAnotherProcessSql(holder)}${excluding ? ` and ${notInList(dialect, 'account_id')}` : ''}
       order by next_attempt_at limit ?${dialect === 'postgres' ? ' for update skip locked' : ''}`,
    );
    dueStatements.set(key, statement);
  }
  return statement;
}

/**
 * The claim of chosen ids: the lease, the attempt counted. Parameters: worker id, the lease's length
 * with its grace, the ids, the unsettled statuses. When a lease owner is still set, the previous claim
 * left no outcome behind (its lease ran out): it is counted, and it may have reached the platform
 * before its worker died.
 */
const CLAIM_CHOSEN: Record<Dialect, FixedStatement> = { sqlite: claimChosenStatement('sqlite'), postgres: claimChosenStatement('postgres') };
function claimChosenStatement(dialect: Dialect): FixedStatement {
  const now = DB_NOW_SQL[dialect];
  // claimChosen says why SQLite's checks on status and due time are kept off the due index.
  const unindexed = dialect === 'sqlite' ? '+' : '';
  return new FixedStatement(
    `update messages set status = 'processing', lease_owner = ?, lease_expires_at = ${now} + ?, attempts = attempts + 1,
       orphaned_claims = orphaned_claims + case when lease_owner is not null then 1 else 0 end,
       platform_reached = case when lease_owner is not null then 1 else platform_reached end,
       updated_at = ${now}
     where ${inList(dialect, 'id')} and ${unindexed}status in (${placeholders(UNSETTLED.length)}) and ${unindexed}next_attempt_at <= ${now}
       and (lease_expires_at is null or lease_expires_at < ${now})
     returning *`,
  );
}

/**
 * Puts a leased message back to wait for its next attempt (`queued` again), keeping the last error for
 * the record. `notAttempted`: the claim that counted this attempt reached no platform, so it is taken
 * back. `reachedPlatform`: the attempt called the platform (marked on the message for good). The next attempt is `delayMs` from now on the database's clock. False when this worker no longer
 * holds the claim (nothing is written over another worker's).
 */
export async function scheduleRetry(
  db: Kysely<Database>,
  message: MessageRow,
  workerId: string,
  retry: { delayMs: number; errorCode: string; errorMessage: string; notAttempted?: boolean; waitReason?: string; reachedPlatform?: boolean },
): Promise<boolean> {
  const now = dbNow(db);
  const result = await db
    .updateTable('messages')
    .set((eb) => ({
      ...(retry.notAttempted ? { attempts: eb('attempts', '-', 1) } : {}),
      // The attempt called the platform: the note may be out, so a cancel no longer gives it back.
      ...(retry.reachedPlatform ? { platform_reached: 1 } : {}),
      status: 'queued',
      next_attempt_at: eb(now, '+', Math.max(0, Math.round(retry.delayMs))),
      // What the message waits for when not a retry (a sender's cap, the "recording…" indicator), and until when.
      wait_reason: retry.waitReason ?? null,
      ...(retry.waitReason ? { waited_until: eb(now, '+', Math.max(0, Math.round(retry.delayMs))) } : {}),
      lease_owner: null,
      lease_expires_at: null,
      orphaned_claims: 0,
      error_code: retry.errorCode,
      error_message: retry.errorMessage,
      updated_at: now,
    }))
    .where('id', '=', message.id)
    .where('lease_owner', '=', workerId)
    .where('status', 'in', UNSETTLED)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

// Every settled message runs this: written out once (fixed-statement.ts). The credentials go with the lease.
// On PostgreSQL, the settling updates of an outcome batch are one statement (statement-batch.ts).
const SETTLE = new FixedStatement(
  `update messages set status = ?, delivered_at = ?, error_code = ?, error_message = ?, credentials = null, lease_owner = null, lease_expires_at = null, updated_at = ?
   where id = ? and lease_owner = ? and status in (${placeholders(UNSETTLED.length)})`,
  {
    text: `update messages as m set status = v.status, delivered_at = v.delivered_at, error_code = v.error_code, error_message = v.error_message, credentials = null, lease_owner = null, lease_expires_at = null, updated_at = v.updated_at
      from unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[]) with ordinality as v(status, delivered_at, error_code, error_message, updated_at, id, owner, i)
      where m.id = v.id and m.lease_owner = v.owner and m.status in (${UNSETTLED.map((status) => `'${status}'`).join(', ')})
      returning v.i`,
    arrays: [[0, 'text[]'], [1, 'bigint[]'], [2, 'text[]'], [3, 'text[]'], [4, 'bigint[]'], [5, 'text[]'], [6, 'text[]']],
    perCall: 'ordinal',
  },
);

export type Settlement = { status: 'delivered'; at: number } | { status: 'failed'; at: number; errorCode: string; errorMessage: string };

/**
 * Final state, once: credentials are erased and the usage counters move in the same transaction.
 * Returns false when this worker no longer holds the claim (another worker claimed or settled it since).
 * A worker whose lease ran out while it could not write still holds the claim until another takes it.
 * Runs inside a transaction the caller holds (the worker's group commit: several outcomes share one
 * transaction and one disk flush, each in a savepoint of its own): `trx` must be a transaction, so the
 * status, the usage counters and the webhook event commit together or not at all.
 */
export async function settleMessage(trx: Kysely<Database>, message: MessageRow, workerId: string, outcome: Settlement): Promise<boolean> {
  const result = await SETTLE.execute(trx, [
    outcome.status,
    outcome.status === 'delivered' ? outcome.at : null,
    outcome.status === 'failed' ? outcome.errorCode : null,
    outcome.status === 'failed' ? outcome.errorMessage : null,
    outcome.at,
    message.id,
    workerId,
    ...UNSETTLED,
  ]);
  if (Number(result.numAffectedRows ?? 0n) === 0) return false;
  await recordOutcome(trx, { accountId: message.account_id, env: message.env, periodStart: message.period_start }, outcome.status);
  // The webhook outbox: the event commits with the outcome it reports.
  await recordSettlementEvents(trx, message, outcome);
  return true;
}

/**
 * Gives up this worker's leases so another worker can take the messages at once. Only for messages
 * whose attempt can no longer reach a platform.
 */
export async function releaseLeases(db: Kysely<Database>, workerId: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable('messages')
    .set({ lease_owner: null, lease_expires_at: null })
    .where('lease_owner', '=', workerId)
    .where('id', 'in', ids)
    .where('status', 'in', UNSETTLED)
    .execute();
}

/**
 * Renews this worker's lease for `leaseMs` from now (database clock). False when no row matched: the
 * lease is gone (another worker claimed the message, or it was settled), and this worker must not
 * reach the platform for it nor write its outcome.
 */
export async function extendLease(db: Kysely<Database>, id: string, workerId: string, leaseMs: number): Promise<boolean> {
  const now = dbNow(db);
  const result = await db
    .updateTable('messages')
    .set((eb) => ({ lease_expires_at: eb(now, '+', leaseMs + orphanGraceMs(leaseMs)) }))
    .where('id', '=', id)
    .where('lease_owner', '=', workerId)
    .where('status', 'in', UNSETTLED)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * How long until the next message this worker may claim falls due, in ms on the database's clock, to
 * let it sleep until then (undefined: nothing waits). `affinityHolder` as for claimDueMessages.
 * `later`: only queued messages not due yet count (a worker whose due messages wait for its slots
 * asks when new work falls due).
 */
export async function msUntilNextDue(db: Kysely<Database>, options: { affinityHolder?: string; later?: boolean } = {}): Promise<number | undefined> {
  // A message under a lease (in flight here or on another worker) is not due before the lease runs
  // out; counting it as due at next_attempt_at made idle workers poll every few ms during deliveries.
  // Likewise a message whose affinity key another process holds: it waits there, not here (if that
  // process dies, the regular poll finds the message once the key's lease has run out).
  // Asked per status, each cheap however long the queue: a queued message has no lease (one is only
  // taken with `processing`, and given up when it goes back to `queued`), so the first queued one in
  // the due index is the next of them; `processing` messages are the few in hand. One query ordered by
  // the later of the two times read every waiting message (50 ms with 100,000 waiting retries, on
  // the event loop at every turn of a worker that found nothing to claim).
  const now = Date.now();
  const firstDue = async (status: 'queued' | 'processing', after?: number) => {
    const holder = options.affinityHolder;
    const statement = firstDueStatement(dialectOf(db), status, after !== undefined, holder !== undefined);
    const parameters = [status, ...(after !== undefined ? [after] : []), ...(holder !== undefined ? [holder] : []), now];
    return (await statement.execute<{ due_at: number | null; now: number }, Database>(db, parameters)).rows[0];
  };
  const rows = options.later ? [await firstDue('queued', now)] : [await firstDue('queued'), await firstDue('processing')];
  const due = rows.flatMap((row) => (row && row.due_at !== null ? [Math.max(0, Number(row.due_at) - Number(row.now))] : []));
  return due.length > 0 ? Math.min(...due) : undefined;
}

// msUntilNextDue's reads, written out once per dialect and shape (fixed-statement.ts): a busy worker
// asks at almost every turn, and Kysely built and compiled each anew (about 0.2 ms, as much as the read
// itself on SQLite).
const firstDueStatements = new Map<string, FixedStatement>();
function firstDueStatement(dialect: Dialect, status: 'queued' | 'processing', later: boolean, holder: boolean): FixedStatement {
  const key = `${dialect} ${status} ${later} ${holder}`;
  let statement = firstDueStatements.get(key);
  if (!statement) {
    // A message in hand is due when its lease runs out, if that comes after its due time.
    const dueAt = status === 'processing' ? 'case when lease_expires_at > next_attempt_at then lease_expires_at else next_attempt_at end' : 'next_attempt_at';
    statement = new FixedStatement(
      `select ${dueAt} as due_at, ${DB_NOW_SQL[dialect]} as now from messages
       where status = ?${later ? ' and next_attempt_at > ?' : ''}
         and ${notHeldByAnotherProcessSql(holder)}
       order by due_at limit 1`,
    );
    firstDueStatements.set(key, statement);
  }
  return statement;
}
