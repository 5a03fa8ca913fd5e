import type { SecretBox } from '../core/secret-box.js';
import { PRIVATE_URLS_HINT, vetAudioUrl } from '../audio/url-check.js';
import type { Db } from '../store/db.js';
import {
  countEndpoints,
  deleteEndpoint,
  eventTypes,
  findDelivery,
  findEndpoint,
  insertDelivery,
  insertEndpoint,
  insertEvent,
  listDeliveriesWithAnswers,
  listEndpoints,
  newDelivery,
  updateEndpointSecrets,
  type Owner,
  type DeliveryWithAnswers,
  type WebhookDeliveryRow,
  type WebhookEndpointRow,
} from '../store/webhooks.js';
import { eventBody, isWebhookEventType, WEBHOOK_EVENT_TYPES, type WebhookEventType } from './events.js';
import { newWebhookDeliveryId, newWebhookEndpointId, newWebhookEventId, newWebhookSecret } from './ids.js';

/**
 * Webhook endpoints of one (account, environment): what the API and the dashboard both call.
 * Every function takes the owner; an id of another account or environment is "not found".
 */
export interface WebhookDeps {
  db: Db;
  secretBox: SecretBox;
  /** ALLOW_PRIVATE_URLS (old name AUDIO_ALLOW_PRIVATE_URLS): the same address rules as audio URLs. */
  allowPrivateUrls: boolean;
}

export const MAX_ENDPOINTS_PER_ENVIRONMENT = 16;
export const MAX_URL_LENGTH = 2048;
export const MAX_DESCRIPTION_LENGTH = 256;
/** After a roll the old secret keeps signing this long by default, so receivers switch without a gap. */
export const DEFAULT_PREVIOUS_SECRET_MS = 24 * 3600_000;

/** Bad input for an endpoint: the API answers it as 422 invalid_parameter naming `field`. */
export class WebhookInputError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'WebhookInputError';
  }
}

export interface WebhookEndpointView {
  id: string;
  url: string;
  description: string | null;
  events: WebhookEventType[];
  created_at: string;
  /** Until when the secret before the last roll still signs too; null when only one secret signs. */
  previous_secret_expires_at: string | null;
}

export interface WebhookAnswerView {
  attempt: number;
  at: string;
  duration_ms: number;
  /** The receiver's HTTP status; null when no answer came (timeout, refused, blocked address). */
  status_code: number | null;
  /** The first 1,000 characters of the answer's body. */
  response_excerpt: string | null;
  error: string | null;
}

export interface WebhookDeliveryView {
  id: string;
  event_id: string;
  event_type: string | null;
  endpoint_id: string;
  /** pending (sending or waiting to retry), succeeded, failed (every retry used up). */
  status: string;
  attempts: number;
  next_attempt_at: string | null;
  created_at: string;
  completed_at: string | null;
  answers: WebhookAnswerView[];
}

const iso = (ms: number): string => new Date(Number(ms)).toISOString();

export function endpointView(row: WebhookEndpointRow, now = Date.now()): WebhookEndpointView {
  const previousValid = row.previous_secret !== null && row.previous_secret_expires_at !== null && Number(row.previous_secret_expires_at) > now;
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    events: parseEvents(row.events),
    created_at: iso(row.created_at),
    previous_secret_expires_at: previousValid ? iso(Number(row.previous_secret_expires_at)) : null,
  };
}

function parseEvents(text: string): WebhookEventType[] {
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? parsed.filter((e): e is WebhookEventType => typeof e === 'string' && isWebhookEventType(e)) : [];
  } catch {
    return [];
  }
}

/** The secrets that sign a delivery now: the current one, and the one before a roll while it lasts. */
export function signingSecrets(secretBox: SecretBox, row: WebhookEndpointRow, now = Date.now()): string[] {
  const secrets = [secretBox.open(row.secret)];
  if (row.previous_secret !== null && row.previous_secret_expires_at !== null && Number(row.previous_secret_expires_at) > now) {
    secrets.push(secretBox.open(row.previous_secret));
  }
  return secrets;
}

/** The URL rules of an endpoint (the audio URL rules: http(s), no loopback/private literal, unless allowed). */
export function checkWebhookUrl(url: unknown, allowPrivate: boolean): string {
  if (typeof url !== 'string' || url.trim() === '') throw new WebhookInputError('url', 'url is required');
  if (url.length > MAX_URL_LENGTH) throw new WebhookInputError('url', `url is longer than ${MAX_URL_LENGTH} characters`);
  const verdict = vetAudioUrl(url, { allowPrivate });
  if (!verdict.ok) {
    // Named as for audio URLs: a developer's own receiver on this machine is the usual cause.
    const message = verdict.message.replace(/^audio_url/, 'url');
    throw new WebhookInputError('url', verdict.blocked ? `${message}${PRIVATE_URLS_HINT}` : message);
  }
  if (verdict.url.username !== '' || verdict.url.password !== '') throw new WebhookInputError('url', 'url must not carry a user name or password');
  return verdict.url.href;
}

function checkEvents(events: unknown): WebhookEventType[] {
  if (events === undefined || events === null) return [...WEBHOOK_EVENT_TYPES];
  if (!Array.isArray(events) || events.length === 0) throw new WebhookInputError('events', `events must be a non-empty array of: ${WEBHOOK_EVENT_TYPES.join(', ')}`);
  const chosen = new Set<WebhookEventType>();
  for (const event of events) {
    if (typeof event !== 'string' || !isWebhookEventType(event)) {
      throw new WebhookInputError('events', `unknown event ${JSON.stringify(event)}; events are ${WEBHOOK_EVENT_TYPES.join(', ')}`);
    }
    chosen.add(event);
  }
  // Kept in the documented order, whatever order they came in.
  return WEBHOOK_EVENT_TYPES.filter((e) => chosen.has(e));
}

export interface NewEndpointInput {
  url: unknown;
  events?: unknown;
  description?: unknown;
}

/** Creates an endpoint; the secret is returned this once (it is stored sealed). */
export async function createWebhookEndpoint(deps: WebhookDeps, owner: Owner, input: NewEndpointInput): Promise<{ endpoint: WebhookEndpointView; secret: string }> {
  const url = checkWebhookUrl(input.url, deps.allowPrivateUrls);
  const events = checkEvents(input.events);
  let description: string | null = null;
  if (input.description !== undefined && input.description !== null) {
    if (typeof input.description !== 'string') throw new WebhookInputError('description', 'description must be a string');
    if (input.description.length > MAX_DESCRIPTION_LENGTH) throw new WebhookInputError('description', `description is longer than ${MAX_DESCRIPTION_LENGTH} characters`);
    description = input.description;
  }
  if ((await countEndpoints(deps.db.kysely, owner)) >= MAX_ENDPOINTS_PER_ENVIRONMENT) {
    throw new WebhookInputError('url', `at most ${MAX_ENDPOINTS_PER_ENVIRONMENT} webhook endpoints per account and environment; delete one first`);
  }
  const now = Date.now();
  const secret = newWebhookSecret();
  const row: WebhookEndpointRow = {
    id: newWebhookEndpointId(now),
    account_id: owner.accountId,
    env: owner.env,
    url,
    description,
    events: JSON.stringify(events),
    secret: deps.secretBox.seal(secret),
    previous_secret: null,
    previous_secret_expires_at: null,
    created_at: now,
    updated_at: now,
  };
  await insertEndpoint(deps.db.kysely, row);
  return { endpoint: endpointView(row, now), secret };
}

export async function listWebhookEndpoints(deps: WebhookDeps, owner: Owner): Promise<WebhookEndpointView[]> {
  const now = Date.now();
  return (await listEndpoints(deps.db.kysely, owner)).map((row) => endpointView(row, now));
}

export async function getWebhookEndpoint(deps: WebhookDeps, owner: Owner, id: string): Promise<WebhookEndpointView | undefined> {
  const row = await findEndpoint(deps.db.kysely, owner, id);
  return row ? endpointView(row) : undefined;
}

export async function deleteWebhookEndpoint(deps: WebhookDeps, owner: Owner, id: string): Promise<boolean> {
  return deleteEndpoint(deps.db.kysely, owner, id);
}

/**
 * A new secret, returned this once. The old one keeps signing next to it for `previousValidForMs`
 * (24 h by default; 0 stops it at once), so a receiver can switch without missing a delivery.
 */
export async function rollWebhookSecret(
  deps: WebhookDeps,
  owner: Owner,
  id: string,
  options: { previousValidForMs?: number } = {},
): Promise<{ endpoint: WebhookEndpointView; secret: string } | undefined> {
  const row = await findEndpoint(deps.db.kysely, owner, id);
  if (!row) return undefined;
  const now = Date.now();
  const keepFor = options.previousValidForMs ?? DEFAULT_PREVIOUS_SECRET_MS;
  const secret = newWebhookSecret();
  const change = {
    secret: deps.secretBox.seal(secret),
    previous_secret: keepFor > 0 ? row.secret : null,
    previous_secret_expires_at: keepFor > 0 ? now + keepFor : null,
    updated_at: now,
  };
  await updateEndpointSecrets(deps.db.kysely, id, change);
  return { endpoint: endpointView({ ...row, ...change }, now), secret };
}

/** What a test event carries: a made-up message or session in the real shapes, marked by ids that exist nowhere. */
function sampleData(type: WebhookEventType, at: number): unknown {
  const when = iso(at);
  if (type === 'whatsapp_session.updated') {
    return { session_id: 'ws_test_event', status: 'connected', phone_number: '15550000000', created_at: when, last_connected_at: when };
  }
  if (type === 'sender.updated') {
    return {
      id: 'snd_test_event',
      platform: 'whatsapp',
      kind: 'whatsapp_session',
      label: 'ws_test_event +15550000000',
      status: 'restricted',
      reason: 'test event: WhatsApp does not let this number start new chats for now',
      until: iso(at + 3_600_000),
      last_sent_at: when,
      sent_today: 3,
      daily_cap: 15,
    };
  }
  if (type === 'telegram_session.updated') {
    return { session_id: 'ts_test_event', status: 'connected', user_id: '1000000001', username: 'voicenote_sandbox', phone_number: '15550000000', created_at: when, last_connected_at: when };
  }
  if (type === 'recipient.opted_out') {
    return {
      platform: 'whatsapp',
      recipient: '15550000005',
      suppression: { id: 'sup_test_event', platform: 'whatsapp', recipient: '15550000005', source: 'reply', reply_id: 'rpl_test_event', note: null, created_at: when },
      reply: { id: 'rpl_test_event', type: 'text', text: 'STOP', received_at: when, message_id: 'msg_test_event' },
      canceled: ['msg_test_event_follow_up'],
    };
  }
  const failed = type === 'voice_note.failed';
  const canceled = type === 'voice_note.canceled';
  const message = {
    id: 'msg_test_event',
    status: failed ? 'failed' : canceled ? 'canceled' : 'delivered',
    platform: 'whatsapp',
    recipient: '15550000005',
    created_at: when,
    delivered_at: failed || canceled ? null : when,
    error: failed ? { code: 'recipient_not_found', message: 'test event: the recipient does not exist on the platform' } : null,
  };
  if (canceled) return { ...message, cancel_reason: 'requested' };
  if (type === 'voice_note.replied') return { ...message, reply: { id: 'rpl_test_event', type: 'text', text: 'Thanks, got it!', received_at: when } };
  return message;
}

/** Sends one event of `type` (default voice_note.delivered) to this endpoint only, through the outbox like any other. */
export async function sendTestEvent(
  deps: WebhookDeps,
  owner: Owner,
  endpointId: string,
  type: WebhookEventType = 'voice_note.delivered',
): Promise<{ event_id: string; delivery_id: string } | undefined> {
  const endpoint = await findEndpoint(deps.db.kysely, owner, endpointId);
  if (!endpoint) return undefined;
  const now = Date.now();
  const eventId = newWebhookEventId(now);
  const deliveryId = newWebhookDeliveryId(now);
  await deps.db.kysely.transaction().execute(async (trx) => {
    await insertEvent(trx, {
      id: eventId,
      account_id: owner.accountId,
      env: owner.env,
      type,
      payload: eventBody(type, now, sampleData(type, now)),
      endpoint_id: endpointId,
      available_at: now,
      // Handed to its one endpoint right here, whatever that endpoint subscribes to.
      fanned_out_at: now,
      created_at: now,
    });
    await insertDelivery(trx, newDelivery({ id: eventId, account_id: owner.accountId, env: owner.env }, endpointId, deliveryId, now));
  });
  return { event_id: eventId, delivery_id: deliveryId };
}

function deliveryView({ row, answers, eventType }: DeliveryWithAnswers): WebhookDeliveryView {
  return {
    id: row.id,
    event_id: row.event_id,
    event_type: eventType,
    endpoint_id: row.endpoint_id,
    status: row.status,
    attempts: answers.length,
    next_attempt_at: row.status === 'pending' ? iso(row.next_attempt_at) : null,
    created_at: iso(row.created_at),
    completed_at: row.completed_at === null ? null : iso(row.completed_at),
    answers: answers.map((a) => ({
      attempt: a.attempt,
      at: iso(a.started_at),
      duration_ms: a.duration_ms,
      status_code: a.status_code,
      response_excerpt: a.response_excerpt,
      error: a.error,
    })),
  };
}

/** The endpoint's most recent deliveries (newest first), each with every answer it got; undefined when the endpoint is not the owner's. */
export async function listWebhookDeliveries(deps: WebhookDeps, owner: Owner, endpointId: string, limit = 20): Promise<WebhookDeliveryView[] | undefined> {
  const db = deps.db.kysely;
  if (!(await findEndpoint(db, owner, endpointId))) return undefined;
  return (await listDeliveriesWithAnswers(db, owner, endpointId, Math.min(Math.max(1, limit), 101))).map(deliveryView);
}

/** Sends a delivery's event again to its endpoint, as a new delivery (same event id, so receivers can recognise it). */
export async function resendWebhookDelivery(deps: WebhookDeps, owner: Owner, deliveryId: string, endpointId?: string): Promise<WebhookDeliveryView | undefined> {
  const db = deps.db.kysely;
  const original = await findDelivery(db, owner, deliveryId);
  if (!original || (endpointId !== undefined && original.endpoint_id !== endpointId)) return undefined;
  if (!(await findEndpoint(db, owner, original.endpoint_id))) return undefined;
  const now = Date.now();
  const row = newDelivery({ id: original.event_id, account_id: owner.accountId, env: owner.env }, original.endpoint_id, newWebhookDeliveryId(now), now);
  await insertDelivery(db, row);
  const types = await eventTypes(db, [row.event_id]);
  return deliveryView({ row, answers: [], eventType: types.get(row.event_id) ?? null });
}
