import type { ExpressionBuilder, Kysely } from 'kysely';
import type { Dialect } from './db.js';
import type { Database, MessagesTable } from './schema.js';
import { recordOutcome } from './usage.js';
import { recordSettlementEvents } from '../webhooks/events.js';

export type MessageRow = MessagesTable;

/** Statuses a message passes through; the last two are final. */
export type MessageStatus = 'queued' | 'processing' | 'delivered' | 'failed';
const UNSETTLED: MessageStatus[] = ['queued', 'processing'];

export async function insertMessage(db: Kysely<Database>, row: MessageRow): Promise<void> {
  await db.insertInto('messages').values(row).execute();
}

export async function findMessage(db: Kysely<Database>, owner: { accountId: string; env: string }, id: string): Promise<MessageRow | undefined> {
  return db
    .selectFrom('messages')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .executeTakeFirst();
}

/**
 * Not for this process: the message's affinity key is held, under a live lease, by another process
 * (a platform session whose connection lives there, say). A key nobody holds (or whose holder's lease ran
 * out) does not count: whichever worker claims the message may take the resource over.
 */
function heldByAnotherProcess(eb: ExpressionBuilder<Database, 'messages'>, holder: string | undefined, now: number) {
  return eb.exists(
    eb
      .selectFrom('affinity_leases')
      .select('affinity_leases.key')
      .whereRef('affinity_leases.key', '=', 'messages.affinity')
      .$if(holder !== undefined, (qb) => qb.where('affinity_leases.holder', '<>', holder!))
      .where('affinity_leases.expires_at', '>', now),
  );
}

export interface ClaimOptions {
  limit: number;
  leaseMs: number;
  now?: number;
  /**
   * The id this process holds affinity leases under: messages whose affinity key another process holds
   * are left to that process's worker. Without one, every held key counts as another's.
   */
  affinityHolder?: string;
}

/**
 * Takes up to `limit` due messages for this worker with a lease. A lease that runs out (the worker died)
 * makes the message claimable again, so nothing accepted is lost.
 */
export async function claimDueMessages(db: Kysely<Database>, dialect: Dialect, workerId: string, options: ClaimOptions): Promise<MessageRow[]> {
  const now = options.now ?? Date.now();
  let due = db
    .selectFrom('messages')
    .select('id')
    .where('status', 'in', UNSETTLED)
    .where('next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', now)]))
    .where((eb) => eb.not(heldByAnotherProcess(eb, options.affinityHolder, now)))
    .orderBy('next_attempt_at')
    .limit(options.limit);
  if (dialect === 'postgres') due = due.forUpdate().skipLocked();
  return db
    .updateTable('messages')
    .set((eb) => ({
      status: 'processing',
      lease_owner: workerId,
      lease_expires_at: now + options.leaseMs,
      attempts: eb('attempts', '+', 1),
      updated_at: now,
    }))
    .where('id', 'in', due)
    .returningAll()
    .execute();
}

/**
 * Puts a leased message back to wait for its next attempt, keeping the last error for the record.
 * `notAttempted`: the claim that counted this attempt reached no platform, so it is taken back.
 */
export async function scheduleRetry(
  db: Kysely<Database>,
  message: MessageRow,
  workerId: string,
  retry: { at: number; errorCode: string; errorMessage: string; notAttempted?: boolean },
): Promise<boolean> {
  const result = await db
    .updateTable('messages')
    .set((eb) => ({
      ...(retry.notAttempted ? { attempts: eb('attempts', '-', 1) } : {}),
      next_attempt_at: retry.at,
      lease_owner: null,
      lease_expires_at: null,
      error_code: retry.errorCode,
      error_message: retry.errorMessage,
      updated_at: Date.now(),
    }))
    .where('id', '=', message.id)
    .where('lease_owner', '=', workerId)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export type Settlement = { status: 'delivered'; at: number } | { status: 'failed'; at: number; errorCode: string; errorMessage: string };

/**
 * Final state, once: credentials are erased and the usage counters move in the same transaction.
 * Returns false when this worker no longer holds the lease (another worker settled it).
 */
export async function settleMessage(db: Kysely<Database>, message: MessageRow, workerId: string, outcome: Settlement): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const result = await trx
      .updateTable('messages')
      .set({
        status: outcome.status,
        delivered_at: outcome.status === 'delivered' ? outcome.at : null,
        error_code: outcome.status === 'failed' ? outcome.errorCode : null,
        error_message: outcome.status === 'failed' ? outcome.errorMessage : null,
        credentials: null,
        lease_owner: null,
        lease_expires_at: null,
        updated_at: outcome.at,
      })
      .where('id', '=', message.id)
      .where('lease_owner', '=', workerId)
      .where('status', 'in', UNSETTLED)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) return false;
    await recordOutcome(trx, { accountId: message.account_id, env: message.env, periodStart: message.period_start }, outcome.status);
    // The webhook outbox: the event commits with the outcome it reports.
    await recordSettlementEvents(trx, message, outcome);
    return true;
  });
}

/** Gives up this worker's leases at shutdown so another worker can take the messages at once. */
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

export async function extendLease(db: Kysely<Database>, id: string, workerId: string, until: number): Promise<void> {
  await db.updateTable('messages').set({ lease_expires_at: until }).where('id', '=', id).where('lease_owner', '=', workerId).execute();
}

/**
 * When the next message this worker may claim falls due, to let it sleep until then (undefined: nothing
 * waits). `affinityHolder` as for claimDueMessages.
 */
export async function nextDueAt(db: Kysely<Database>, options: { affinityHolder?: string; now?: number } = {}): Promise<number | undefined> {
  const now = options.now ?? Date.now();
  // A message under a lease (in flight here or on another worker) is not due before the lease runs
  // out; counting it as due at next_attempt_at made idle workers poll every few ms during deliveries.
  // Likewise a message whose affinity key another process holds: it waits there, not here (if that
  // process dies, the regular poll finds the message once the key's lease has run out).
  const row = await db
    .selectFrom('messages')
    .select((eb) =>
      eb
        .case()
        .when('lease_expires_at', '>', eb.ref('next_attempt_at'))
        .then(eb.ref('lease_expires_at'))
        .else(eb.ref('next_attempt_at'))
        .end()
        .as('due_at'),
    )
    .where('status', 'in', UNSETTLED)
    .where((eb) => eb.not(heldByAnotherProcess(eb, options.affinityHolder, now)))
    .orderBy('due_at')
    .limit(1)
    .executeTakeFirst();
  return row && row.due_at !== null ? Number(row.due_at) : undefined;
}
