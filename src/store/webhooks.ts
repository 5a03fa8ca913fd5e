import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Dialect } from './dialect.js';
import type { Database, WebhookAttemptsTable, WebhookDeliveriesTable, WebhookEndpointsTable, WebhookEventsTable } from './schema.js';

export type WebhookEndpointRow = WebhookEndpointsTable;
export type WebhookEventRow = WebhookEventsTable;
export type WebhookDeliveryRow = WebhookDeliveriesTable;
export type WebhookAttemptRow = WebhookAttemptsTable;

/**
 * The condition "this endpoint subscribes to `type`". Endpoints keep their event list as a JSON array
 * of strings, so a quoted name cannot match another name. The pattern is written into the statement
 * as a literal (quotes escaped), not bound: SQLite prepares a statement again each time the pattern of
 * its LIKE is bound anew, and that made the event look-up of every delivery cost 12 µs of CPU on an
 * empty table instead of 1.
 */
export function subscribesTo(type: string): RawBuilder<boolean> {
  return sql<boolean>`${sql.raw(subscribesToSql(type))}`;
}

/** The same condition as SQL text, for statements written out once (fixed-statement.ts). */
export function subscribesToSql(type: string): string {
  return `events like '${`%${JSON.stringify(type)}%`.replaceAll("'", "''")}'`;
}

export interface Owner {
  accountId: string;
  env: string;
}

export async function insertEndpoint(db: Kysely<Database>, row: WebhookEndpointRow): Promise<void> {
  await db.insertInto('webhook_endpoints').values(row).execute();
}

export async function listEndpoints(db: Kysely<Database>, owner: Owner): Promise<WebhookEndpointRow[]> {
  return db.selectFrom('webhook_endpoints').selectAll().where('account_id', '=', owner.accountId).where('env', '=', owner.env).orderBy('id').execute();
}

export async function countEndpoints(db: Kysely<Database>, owner: Owner): Promise<number> {
  const row = await db
    .selectFrom('webhook_endpoints')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

export async function findEndpoint(db: Kysely<Database>, owner: Owner, id: string): Promise<WebhookEndpointRow | undefined> {
  return db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .executeTakeFirst();
}

export async function findEndpointById(db: Kysely<Database>, id: string): Promise<WebhookEndpointRow | undefined> {
  return db.selectFrom('webhook_endpoints').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Deletes the endpoint; its pending deliveries stop with it. */
export async function deleteEndpoint(db: Kysely<Database>, owner: Owner, id: string): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const result = await trx
      .deleteFrom('webhook_endpoints')
      .where('id', '=', id)
      .where('account_id', '=', owner.accountId)
      .where('env', '=', owner.env)
      .executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) return false;
    await trx
      .updateTable('webhook_deliveries')
      .set({ status: 'failed', last_error: 'the endpoint was deleted', completed_at: Date.now(), updated_at: Date.now(), lease_owner: null, lease_expires_at: null })
      .where('endpoint_id', '=', id)
      .where('status', '=', 'pending')
      .execute();
    return true;
  });
}

export async function updateEndpointSecrets(
  db: Kysely<Database>,
  id: string,
  change: Pick<WebhookEndpointRow, 'secret' | 'previous_secret' | 'previous_secret_expires_at' | 'updated_at'>,
): Promise<void> {
  await db.updateTable('webhook_endpoints').set(change).where('id', '=', id).execute();
}

export async function findEvent(db: Kysely<Database>, id: string): Promise<WebhookEventRow | undefined> {
  return db.selectFrom('webhook_events').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function insertEvent(db: Kysely<Database>, row: WebhookEventRow): Promise<void> {
  await db.insertInto('webhook_events').values(row).execute();
}

/** Events whose time has come and that no endpoint has been given yet. */
export async function pendingEvents(db: Kysely<Database>, now: number, limit: number): Promise<WebhookEventRow[]> {
  return db
    .selectFrom('webhook_events')
    .selectAll()
    .where('fanned_out_at', 'is', null)
    .where('available_at', '<=', now)
    .orderBy('available_at')
    .limit(limit)
    .execute();
}

/**
 * Hands one event to the endpoints subscribed to it (or to its one target), once: the compare-and-set
 * on fanned_out_at makes a second process doing the same a no-op. Endpoints created after the event
 * do not get it.
 */
export async function fanOutEvent(db: Kysely<Database>, event: WebhookEventRow, now: number, newDeliveryId: () => string): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const claimed = await trx.updateTable('webhook_events').set({ fanned_out_at: now }).where('id', '=', event.id).where('fanned_out_at', 'is', null).executeTakeFirst();
    if (Number(claimed.numUpdatedRows) === 0) return 0;
    const endpoints = await trx
      .selectFrom('webhook_endpoints')
      .select(['id', 'created_at'])
      .where('account_id', '=', event.account_id)
      .where('env', '=', event.env)
      .where(subscribesTo(event.type))
      .$if(event.endpoint_id !== null, (qb) => qb.where('id', '=', event.endpoint_id!))
      .$if(event.endpoint_id === null, (qb) => qb.where('created_at', '<=', Number(event.created_at)))
      .execute();
    if (endpoints.length === 0) return 0;
    await trx
      .insertInto('webhook_deliveries')
      .values(endpoints.map((endpoint) => newDelivery(event, endpoint.id, newDeliveryId(), now)))
      .execute();
    return endpoints.length;
  });
}

export function newDelivery(event: Pick<WebhookEventRow, 'id' | 'account_id' | 'env'>, endpointId: string, id: string, now: number): WebhookDeliveryRow {
  return {
    id,
    event_id: event.id,
    endpoint_id: endpointId,
    account_id: event.account_id,
    env: event.env,
    status: 'pending',
    attempts: 0,
    next_attempt_at: now,
    lease_owner: null,
    lease_expires_at: null,
    last_status_code: null,
    last_error: null,
    created_at: now,
    updated_at: now,
    completed_at: null,
  };
}

export async function insertDelivery(db: Kysely<Database>, row: WebhookDeliveryRow): Promise<void> {
  await db.insertInto('webhook_deliveries').values(row).execute();
}

/** Due deliveries for this sender, under a lease (one that runs out lets another process take them). */
export async function claimDueDeliveries(
  db: Kysely<Database>,
  dialect: Dialect,
  owner: string,
  options: { limit: number; leaseMs: number; now: number },
): Promise<WebhookDeliveryRow[]> {
  const { now } = options;
  let due = db
    .selectFrom('webhook_deliveries')
    .select('id')
    .where('status', '=', 'pending')
    .where('next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', now)]))
    .orderBy('next_attempt_at')
    .limit(options.limit);
  if (dialect === 'postgres') due = due.forUpdate().skipLocked();
  return db
    .updateTable('webhook_deliveries')
    .set((eb) => ({ lease_owner: owner, lease_expires_at: now + options.leaseMs, attempts: eb('attempts', '+', 1), updated_at: now }))
    .where('id', 'in', due)
    .returningAll()
    .execute();
}

export interface FairDeliveryClaim {
  claimed: WebhookDeliveryRow[];
  /** Due deliveries were read but not picked (their accounts or endpoints were at their cap). */
  leftBehind: boolean;
}

/**
 * As claimDueDeliveries, but the sender chooses among the first `window` due deliveries (accounts and
 * endpoints at their cap, and endpoints whose circuit is open, left out) which to take: the read of the
 * due index's head, then a claim of the chosen ids that checks again that each is still free (on
 * PostgreSQL both in one transaction whose read locks its rows, FOR UPDATE SKIP LOCKED). Deliveries left
 * out stay pending, untouched: deferred, not dropped.
 */
export async function claimDueDeliveriesFairly(
  db: Kysely<Database>,
  dialect: Dialect,
  owner: string,
  options: {
    limit: number;
    leaseMs: number;
    now: number;
    window: number;
    excludeAccounts: readonly string[];
    excludeEndpoints: readonly string[];
    pick(candidates: readonly { id: string; account_id: string; endpoint_id: string }[]): string[];
  },
): Promise<FairDeliveryClaim> {
  const { now } = options;
  const run = async (trx: Kysely<Database>): Promise<FairDeliveryClaim> => {
    let due = trx
      .selectFrom('webhook_deliveries')
      .select(['id', 'account_id', 'endpoint_id'])
      .where('status', '=', 'pending')
      .where('next_attempt_at', '<=', now)
      .where((eb) => eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', now)]))
      .$if(options.excludeAccounts.length > 0, (qb) => qb.where('account_id', 'not in', options.excludeAccounts))
      .$if(options.excludeEndpoints.length > 0, (qb) => qb.where('endpoint_id', 'not in', options.excludeEndpoints))
      .orderBy('next_attempt_at')
      .limit(options.window);
    if (dialect === 'postgres') due = due.forUpdate().skipLocked();
    const rows = await due.execute();
    if (rows.length === 0) return { claimed: [], leftBehind: false };
    const ids = options.pick(rows).slice(0, options.limit);
    if (ids.length === 0) return { claimed: [], leftBehind: true };
    const claimed = await trx
      .updateTable('webhook_deliveries')
      .set((eb) => ({ lease_owner: owner, lease_expires_at: now + options.leaseMs, attempts: eb('attempts', '+', 1), updated_at: now }))
      .where('id', 'in', ids)
      .where('status', '=', 'pending')
      .where((eb) => eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', now)]))
      .returningAll()
      .execute();
    return { claimed, leftBehind: rows.length > ids.length };
  };
  return dialect === 'postgres' ? db.transaction().execute(run) : run(db);
}

/** When the next delivery or held-back event falls due (undefined: nothing waits). */
export async function nextWebhookDueAt(db: Kysely<Database>): Promise<number | undefined> {
  const [delivery, event] = await Promise.all([
    db.selectFrom('webhook_deliveries').select('next_attempt_at as at').where('status', '=', 'pending').orderBy('next_attempt_at').limit(1).executeTakeFirst(),
    db.selectFrom('webhook_events').select('available_at as at').where('fanned_out_at', 'is', null).orderBy('available_at').limit(1).executeTakeFirst(),
  ]);
  const times = [delivery?.at, event?.at].filter((t): t is number => t !== undefined && t !== null).map(Number);
  return times.length > 0 ? Math.min(...times) : undefined;
}

/** One HTTP try and what the delivery becomes after it, in one transaction; false when the lease was lost. */
export async function recordDeliveryAttempt(
  db: Kysely<Database>,
  delivery: WebhookDeliveryRow,
  owner: string,
  attempt: WebhookAttemptRow,
  next: { status: 'pending' | 'succeeded' | 'failed'; nextAttemptAt: number; now: number },
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const result = await trx
      .updateTable('webhook_deliveries')
      .set({
        status: next.status,
        next_attempt_at: next.nextAttemptAt,
        lease_owner: null,
        lease_expires_at: null,
        last_status_code: attempt.status_code,
        last_error: attempt.error,
        updated_at: next.now,
        completed_at: next.status === 'pending' ? null : next.now,
      })
      .where('id', '=', delivery.id)
      .where('lease_owner', '=', owner)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) return false;
    await trx.insertInto('webhook_attempts').values(attempt).execute();
    return true;
  });
}

export async function releaseDeliveryLeases(db: Kysely<Database>, owner: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable('webhook_deliveries')
    .set((eb) => ({ lease_owner: null, lease_expires_at: null, attempts: eb('attempts', '-', 1) }))
    .where('lease_owner', '=', owner)
    .where('id', 'in', ids)
    .where('status', '=', 'pending')
    .execute();
}

/** An endpoint's delivery with every answer it got and its event's type, as one statement read them. */
export interface DeliveryWithAnswers {
  row: WebhookDeliveryRow;
  answers: WebhookAttemptRow[];
  eventType: string | null;
}

/**
 * The endpoint's most recent deliveries (newest first), each with its answers in order and its event's
 * type. One statement, so one snapshot: read apart, a try recorded between the reads showed its answer
 * beside the delivery's state from before it (a `next_attempt_at` already past).
 */
export async function listDeliveriesWithAnswers(db: Kysely<Database>, owner: Owner, endpointId: string, limit: number): Promise<DeliveryWithAnswers[]> {
  const recent = db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('endpoint_id', '=', endpointId)
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .orderBy('id', 'desc')
    .limit(limit)
    .as('d');
  const rows = await db
    .selectFrom(recent)
    .leftJoin('webhook_attempts as a', 'a.delivery_id', 'd.id')
    .leftJoin('webhook_events as e', 'e.id', 'd.event_id')
    .selectAll('d')
    .select([
      'a.id as a_id',
      'a.attempt as a_attempt',
      'a.started_at as a_started_at',
      'a.duration_ms as a_duration_ms',
      'a.status_code as a_status_code',
      'a.response_excerpt as a_response_excerpt',
      'a.error as a_error',
      'e.type as event_type',
    ])
    .orderBy('d.id', 'desc')
    .orderBy('a.started_at')
    .orderBy('a.id')
    .execute();
  const byId = new Map<string, DeliveryWithAnswers>();
  for (const r of rows) {
    const { a_id, a_attempt, a_started_at, a_duration_ms, a_status_code, a_response_excerpt, a_error, event_type, ...row } = r;
    let entry = byId.get(row.id);
    if (!entry) byId.set(row.id, (entry = { row, answers: [], eventType: event_type ?? null }));
    if (a_id === null) continue;
    entry.answers.push({
      id: a_id,
      delivery_id: row.id,
      attempt: a_attempt!,
      started_at: a_started_at!,
      duration_ms: a_duration_ms!,
      status_code: a_status_code,
      response_excerpt: a_response_excerpt,
      error: a_error,
    });
  }
  return [...byId.values()];
}

export async function findDelivery(db: Kysely<Database>, owner: Owner, id: string): Promise<WebhookDeliveryRow | undefined> {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .executeTakeFirst();
}

export async function eventTypes(db: Kysely<Database>, eventIds: string[]): Promise<Map<string, string>> {
  if (eventIds.length === 0) return new Map();
  const rows = await db.selectFrom('webhook_events').select(['id', 'type']).where('id', 'in', eventIds).execute();
  return new Map(rows.map((r) => [r.id, r.type]));
}

/**
 * Forgets finished deliveries (with their answers) and events completed before `cutoff`, in one
 * bounded batch; returns how many deliveries went. Pending ones are never touched.
 */
export async function purgeWebhookHistory(db: Kysely<Database>, cutoff: number, batch = 500): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const ids = (
      await trx.selectFrom('webhook_deliveries').select('id').where('status', '<>', 'pending').where('completed_at', '<', cutoff).limit(batch).execute()
    ).map((r) => r.id);
    if (ids.length > 0) {
      await trx.deleteFrom('webhook_attempts').where('delivery_id', 'in', ids).execute();
      await trx.deleteFrom('webhook_deliveries').where('id', 'in', ids).execute();
    }
    await trx
      .deleteFrom('webhook_events')
      .where('fanned_out_at', '<', cutoff)
      .where((eb) => eb.not(eb.exists(eb.selectFrom('webhook_deliveries').select('webhook_deliveries.id').whereRef('webhook_deliveries.event_id', '=', 'webhook_events.id'))))
      .execute();
    return ids.length;
  });
}
