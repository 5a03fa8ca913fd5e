import type { Kysely } from 'kysely';
import { messageStatusView, whatsappSessionView } from '../core/public-views.js';
import { newWebhookEventId } from '../core/webhook-ids.js';
import type { Database, MessagesTable, WhatsappSessionsTable } from './schema.js';
import { dialectOf } from './dialect.js';
import { FixedStatement } from './fixed-statement.js';
import { subscribesToSql } from './webhooks.js';

/** What an endpoint can subscribe to. */
export const WEBHOOK_EVENT_TYPES = [
  'voice_note.delivered',
  'voice_note.failed',
  'voice_note.canceled',
  'voice_note.read',
  'voice_note.played',
  'voice_note.replied',
  'whatsapp_session.updated',
  'sender.updated',
  'telegram_session.updated',
  'recipient.opted_out',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
export const isWebhookEventType = (value: string): value is WebhookEventType => (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value);

/** The body every delivery of an event sends: `{"type", "timestamp", "data"}`. */
export function eventBody(type: WebhookEventType, at: number, data: unknown): string {
  return JSON.stringify({ type, timestamp: new Date(at).toISOString(), data });
}

export interface NewEvent {
  accountId: string;
  env: string;
  type: WebhookEventType;
  data: unknown;
  /** The time the event reports. */
  at: number;
  /** Held back until then (default: at once). */
  availableAt?: number;
  /** Only to this endpoint (a test event); it must exist. */
  endpointId?: string;
}

/**
 * Puts an event in the outbox, in the caller's transaction, so it is written exactly when what it
 * reports is. One statement, and no row at all when no endpoint of the account and environment
 * subscribes to the type: an account without webhooks pays one indexed look-up per event.
 */
export async function enqueueEvent(db: Kysely<Database>, event: NewEvent): Promise<void> {
  const now = Date.now();
  const id = newWebhookEventId(event.at);
  const payload = eventBody(event.type, event.at, event.data);
  const availableAt = event.availableAt ?? now;
  const parameters = [id, event.accountId, event.env, event.type, payload, event.endpointId ?? null, availableAt, now, event.accountId, event.env];
  if (event.endpointId) parameters.push(event.endpointId);
  await enqueueStatement(event.type, Boolean(event.endpointId)).execute(db, parameters);
}

/** The endpoints of an owner (parameters: account, environment) that subscribe to `type`, as SQL. */
const subscribedEndpointsSql = (type: WebhookEventType): string => `from webhook_endpoints where account_id = ? and env = ? and ${subscribesToSql(type)}`;

/** enqueueEvent's statement for one event type, to any endpoint or to one: written out once each (fixed-statement.ts). */
const enqueueStatements = new Map<string, FixedStatement>();
function enqueueStatement(type: WebhookEventType, toOneEndpoint: boolean): FixedStatement {
  const key = `${type}\n${toOneEndpoint}`;
  let statement = enqueueStatements.get(key);
  if (!statement) {
    statement = new FixedStatement(
      `insert into webhook_events (id, account_id, env, type, payload, endpoint_id, available_at, created_at)
       select ?, ?, ?, ?, ?, ?, cast(? as bigint), cast(? as bigint)
       ${subscribedEndpointsSql(type)}${toOneEndpoint ? ' and id = ?' : ''}
       limit 1`,
      // On PostgreSQL, the events of an outcome batch are one statement (statement-batch.ts).
      toOneEndpoint
        ? undefined
        : {
            text: `insert into webhook_events (id, account_id, env, type, payload, endpoint_id, available_at, created_at)
              select v.id, v.account_id, v.env, v.type, v.payload, v.endpoint_id, v.available_at, v.created_at
              from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bigint[]) as v(id, account_id, env, type, payload, endpoint_id, available_at, created_at)
              where exists (select 1 from webhook_endpoints as w where w.account_id = v.account_id and w.env = v.env and w.${subscribesToSql(type)})`,
            arrays: [[0, 'text[]'], [1, 'text[]'], [2, 'text[]'], [3, 'text[]'], [4, 'text[]'], [5, 'text[]'], [6, 'bigint[]'], [7, 'bigint[]']],
            perCall: 'none',
          },
    );
    enqueueStatements.set(key, statement);
  }
  return statement;
}

/** The status lookup of a message as it is once settled (the row passed in is the one claimed). */
function settledView(message: MessagesTable, outcome: MessageSettlement): ReturnType<typeof messageStatusView> {
  return messageStatusView({
    ...message,
    status: outcome.status,
    delivered_at: outcome.status === 'delivered' ? outcome.at : null,
    error_code: outcome.status === 'failed' ? outcome.errorCode : null,
    error_message: outcome.status === 'failed' ? outcome.errorMessage : null,
  });
}

export type MessageSettlement = { status: 'delivered'; at: number } | { status: 'failed'; at: number; errorCode: string; errorMessage: string };

/** Sandbox WhatsApp recipients ending in 5 "listen": read, then played, these long after delivery. */
export const SANDBOX_READ_AFTER_MS = 3_000;
export const SANDBOX_PLAYED_AFTER_MS = 6_000;
export const sandboxListens = (message: Pick<MessagesTable, 'env' | 'platform' | 'recipient'>): boolean =>
  message.env === 'test' && message.platform === 'whatsapp' && message.recipient.endsWith('5');

/**
 * Called inside the transaction that settles a message: its voice_note.delivered / voice_note.failed
 * event, and, for a sandbox recipient that "listens", the read and played receipts it will show
 * (with their events held back until then). Written with the outcome, so none can be lost or doubled.
 */
export async function recordSettlementEvents(trx: Kysely<Database>, message: MessagesTable, outcome: MessageSettlement): Promise<void> {
  const owner = { accountId: message.account_id, env: message.env };
  let view: ReturnType<typeof settledView> | undefined;
  const viewOf = () => (view ??= settledView(message, outcome));
  const type = outcome.status === 'delivered' ? 'voice_note.delivered' : 'voice_note.failed';
  if (await maySubscribe(trx, owner, type)) await enqueueEvent(trx, { ...owner, type, data: viewOf(), at: outcome.at });
  if (outcome.status !== 'delivered' || !sandboxListens(message)) return;
  // A later stage implies the earlier ones (docs/replies-and-receipts.md, "Listen receipts"): the note that will be read and
  // played reached the device when it was delivered (that stage has no webhook of its own).
  await trx.insertInto('message_receipts').values({ message_id: message.id, kind: 'delivered_to_device', at: outcome.at, source: 'sandbox' }).onConflict((oc) => oc.doNothing()).execute();
  const plays = [
    { kind: 'read', type: 'voice_note.read', at: outcome.at + SANDBOX_READ_AFTER_MS },
    { kind: 'played', type: 'voice_note.played', at: outcome.at + SANDBOX_PLAYED_AFTER_MS },
  ] as const;
  for (const play of plays) {
    await trx.insertInto('message_receipts').values({ message_id: message.id, kind: play.kind, at: play.at, source: 'sandbox' }).onConflict((oc) => oc.doNothing()).execute();
    if (await maySubscribe(trx, owner, play.type)) await enqueueEvent(trx, { ...owner, type: play.type, data: viewOf(), at: play.at, availableAt: play.at });
  }
}

/**
 * False only when no endpoint of the owner subscribes to `type`, so that a settled message of an account
 * without webhooks (most) costs no event body, id or insert. On SQLite a look-up: it runs in the
 * worker's write transaction, whose lock keeps any endpoint from appearing before the insert. On
 * PostgreSQL always true and the insert decides (enqueueEvent): the events of an outcome batch are one
 * statement there, and a look-up would be a round trip of its own.
 */
async function maySubscribe(trx: Kysely<Database>, owner: { accountId: string; env: string }, type: WebhookEventType): Promise<boolean> {
  if (dialectOf(trx) === 'postgres') return true;
  const { rows } = await subscriberStatement(type).execute(trx, [owner.accountId, owner.env]);
  return rows.length > 0;
}

const subscriberStatements = new Map<WebhookEventType, FixedStatement>();
function subscriberStatement(type: WebhookEventType): FixedStatement {
  let statement = subscriberStatements.get(type);
  if (!statement) {
    statement = new FixedStatement(`select 1 ${subscribedEndpointsSql(type)} limit 1`);
    subscriberStatements.set(type, statement);
  }
  return statement;
}

/** whatsapp_session.updated, with the session lookup as data; call it where a session's status moved. */
export async function recordSessionUpdated(db: Kysely<Database>, session: WhatsappSessionsTable, at = Date.now()): Promise<void> {
  await enqueueEvent(db, { accountId: session.account_id, env: session.env, type: 'whatsapp_session.updated', data: whatsappSessionView(session), at });
}

/** After a session's status moved: its whatsapp_session.updated event, with the session as it is now. */
export async function recordSessionStatusChange(db: Kysely<Database>, sessionId: string, at = Date.now()): Promise<void> {
  const session = await db.selectFrom('whatsapp_sessions').selectAll().where('id', '=', sessionId).executeTakeFirst();
  if (session) await recordSessionUpdated(db, session, at);
}
