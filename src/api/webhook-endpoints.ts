import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Services } from '../services.js';
import { isWebhookEventType, WEBHOOK_EVENT_TYPES } from '../webhooks/events.js';
import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  getWebhookEndpoint,
  listWebhookDeliveries,
  listWebhookEndpoints,
  resendWebhookDelivery,
  rollWebhookSecret,
  sendTestEvent,
  WebhookInputError,
  type WebhookDeps,
} from '../webhooks/endpoints.js';
import { invalidParameter, notFound } from './errors.js';
import { commonErrors, withErrors } from './schemas.js';
import { rejectUnknownFields } from './unknown-fields.js';

const Timestamp = Type.String({ format: 'date-time' });
const EventType = Type.String({ enum: [...WEBHOOK_EVENT_TYPES] });

const EndpointFields = {
  id: Type.String({ description: 'we_…' }),
  url: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  events: Type.Array(EventType),
  created_at: Timestamp,
  previous_secret_expires_at: Type.Union([Timestamp, Type.Null()], { description: 'Until then the secret before the last roll signs too' }),
};
const Endpoint = Type.Object(EndpointFields);
const EndpointWithSecret = Type.Object({ ...EndpointFields, secret: Type.String({ description: 'whsec_…; shown only here' }) });
const EndpointList = Type.Object({ data: Type.Array(Endpoint), has_more: Type.Boolean() });
const CreateBody = Type.Object({
  url: Type.String({ description: 'http(s) URL that receives the events (the same address rules as audio_url)' }),
  events: Type.Optional(Type.Union([Type.Array(Type.String()), Type.Null()], { description: 'Event types; all of them when omitted' })),
  description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});
const RollBody = Type.Union([
  Type.Object({ previous_secret_expires_in: Type.Optional(Type.Integer({ description: 'Seconds the old secret keeps signing (default 86400; 0: stop at once)' })) }),
  Type.Null(),
]);
const TestBody = Type.Union([Type.Object({ type: Type.Optional(Type.String({ description: 'Event type; voice_note.delivered by default' })) }), Type.Null()]);
const EndpointParams = Type.Object({ endpoint_id: Type.String() });
const DeliveryParams = Type.Object({ endpoint_id: Type.String(), delivery_id: Type.String() });
const Answer = Type.Object({
  attempt: Type.Integer(),
  at: Timestamp,
  duration_ms: Type.Integer(),
  status_code: Type.Union([Type.Integer(), Type.Null()]),
  response_excerpt: Type.Union([Type.String(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
});
const Delivery = Type.Object({
  id: Type.String({ description: 'whd_…' }),
  event_id: Type.String({ description: 'evt_…, the webhook-id header' }),
  event_type: Type.Union([Type.String(), Type.Null()]),
  endpoint_id: Type.String(),
  status: Type.String({ enum: ['pending', 'succeeded', 'failed'] }),
  attempts: Type.Integer(),
  next_attempt_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
  completed_at: Type.Union([Timestamp, Type.Null()]),
  answers: Type.Array(Answer),
});
const DeliveryList = Type.Object({ data: Type.Array(Delivery), has_more: Type.Boolean() });
const DeliveriesQuery = Type.Object({ limit: Type.Optional(Type.String({ description: '1–100, default 20' })) });
const TestSent = Type.Object({ event_id: Type.String(), delivery_id: Type.String() });
const Deleted = Type.Object({ id: Type.String(), deleted: Type.Boolean() });

export const webhookDeps = (services: Services): WebhookDeps => ({
  db: services.db,
  secretBox: services.secretBox,
  allowPrivateUrls: services.config.audioAllowPrivateUrls,
});

/** Runs a webhook call, turning its input errors into 422 invalid_parameter. */
async function checked<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof WebhookInputError) throw invalidParameter(error.field, error.message);
    throw error;
  }
}

function parseLimit(raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  if (!/^\d{1,3}$/.test(raw) || Number(raw) < 1 || Number(raw) > 100) throw invalidParameter('limit', 'limit must be an integer from 1 to 100');
  return Number(raw);
}

export function registerWebhookEndpointRoutes(app: FastifyInstance, services: Services): void {
  const routes = app.withTypeProvider<TypeBoxTypeProvider>();
  const deps = webhookDeps(services);
  const ownerOf = (caller: { accountId: string; env: string }) => ({ accountId: caller.accountId, env: caller.env });
  const tags = ['webhooks'];

  routes.get(
    '/webhook_endpoints',
    { schema: { summary: 'List webhook endpoints', tags, response: { 200: EndpointList, ...commonErrors } } },
    async (request) => ({ data: await listWebhookEndpoints(deps, ownerOf(request.caller!)), has_more: false }),
  );

  routes.post(
    '/webhook_endpoints',
    {
      schema: {
        summary: 'Create a webhook endpoint',
        description: 'The answer carries the signing secret (whsec_…) once. Events are signed as the Standard Webhooks specification says.',
        tags,
        body: CreateBody,
        response: { 201: EndpointWithSecret, ...withErrors(400, 413, 415, 422) },
      },
    },
    async (request, reply) => {
      rejectUnknownFields(request.body, ['url', 'events', 'description']);
      const { endpoint, secret } = await checked(() => createWebhookEndpoint(deps, ownerOf(request.caller!), request.body));
      return reply.code(201).send({ ...endpoint, secret });
    },
  );

  routes.get(
    '/webhook_endpoints/:endpoint_id',
    { schema: { summary: 'Look up a webhook endpoint', tags, params: EndpointParams, response: { 200: Endpoint, ...withErrors(404) } } },
    async (request) => {
      const endpoint = await getWebhookEndpoint(deps, ownerOf(request.caller!), request.params.endpoint_id);
      if (!endpoint) throw notFound(`webhook endpoint ${request.params.endpoint_id}`);
      return endpoint;
    },
  );

  routes.delete(
    '/webhook_endpoints/:endpoint_id',
    { schema: { summary: 'Delete a webhook endpoint (its pending deliveries stop)', tags, params: EndpointParams, response: { 200: Deleted, ...withErrors(404) } } },
    async (request) => {
      if (!(await deleteWebhookEndpoint(deps, ownerOf(request.caller!), request.params.endpoint_id))) throw notFound(`webhook endpoint ${request.params.endpoint_id}`);
      return { id: request.params.endpoint_id, deleted: true };
    },
  );

  routes.post(
    '/webhook_endpoints/:endpoint_id/roll_secret',
    {
      schema: {
        summary: 'Roll the signing secret',
        description: 'Returns the new secret once; the old one keeps signing beside it for previous_secret_expires_in seconds (default 24 h).',
        tags,
        params: EndpointParams,
        body: RollBody,
        response: { 200: EndpointWithSecret, ...withErrors(400, 404, 415, 422) },
      },
    },
    async (request) => {
      rejectUnknownFields(request.body, ['previous_secret_expires_in']);
      const seconds = request.body?.previous_secret_expires_in;
      if (seconds !== undefined && (seconds < 0 || seconds > 7 * 86400)) {
        throw invalidParameter('previous_secret_expires_in', 'previous_secret_expires_in must be from 0 to 604800 seconds');
      }
      const rolled = await rollWebhookSecret(deps, ownerOf(request.caller!), request.params.endpoint_id, seconds === undefined ? {} : { previousValidForMs: seconds * 1000 });
      if (!rolled) throw notFound(`webhook endpoint ${request.params.endpoint_id}`);
      return { ...rolled.endpoint, secret: rolled.secret };
    },
  );

  routes.post(
    '/webhook_endpoints/:endpoint_id/test',
    {
      schema: {
        summary: 'Send a test event to this endpoint',
        description: 'A made-up message (msg_test_event), session (ws_test_event) or sender (snd_test_event) in the real shape, delivered and retried like any event.',
        tags,
        params: EndpointParams,
        body: TestBody,
        response: { 202: TestSent, ...withErrors(400, 404, 415, 422) },
      },
    },
    async (request, reply) => {
      rejectUnknownFields(request.body, ['type']);
      const type = request.body?.type ?? 'voice_note.delivered';
      if (!isWebhookEventType(type)) throw invalidParameter('type', `type must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}`);
      const sent = await sendTestEvent(deps, ownerOf(request.caller!), request.params.endpoint_id, type);
      if (!sent) throw notFound(`webhook endpoint ${request.params.endpoint_id}`);
      return reply.code(202).send(sent);
    },
  );

  routes.get(
    '/webhook_endpoints/:endpoint_id/deliveries',
    {
      schema: {
        summary: 'Recent deliveries to this endpoint, newest first, with every answer',
        tags,
        params: EndpointParams,
        querystring: DeliveriesQuery,
        response: { 200: DeliveryList, ...withErrors(404, 422) },
      },
    },
    async (request) => {
      const limit = parseLimit(request.query.limit, 20);
      const deliveries = await listWebhookDeliveries(deps, ownerOf(request.caller!), request.params.endpoint_id, limit + 1);
      if (!deliveries) throw notFound(`webhook endpoint ${request.params.endpoint_id}`);
      return { data: deliveries.slice(0, limit), has_more: deliveries.length > limit };
    },
  );

  routes.post(
    '/webhook_endpoints/:endpoint_id/deliveries/:delivery_id/resend',
    {
      schema: {
        summary: 'Send a delivery’s event again (a new delivery with the same webhook-id)',
        tags,
        params: DeliveryParams,
        response: { 202: Delivery, ...withErrors(404) },
      },
    },
    async (request, reply) => {
      const owner = ownerOf(request.caller!);
      const resent = await resendWebhookDelivery(deps, owner, request.params.delivery_id, request.params.endpoint_id);
      if (!resent) throw notFound(`webhook delivery ${request.params.delivery_id}`);
      return reply.code(202).send(resent);
    },
  );
}
