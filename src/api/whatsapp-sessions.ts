import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Services } from '../services.js';
import { SessionStateError, SIMULATED_EVENTS, WhatsappUnavailableError, type SimulatedEvent } from '../platforms/whatsapp/sessions.js';
import { LimitReachedError } from '../store/limits.js';
import { ApiError, invalidParameter, notFound } from './errors.js';
import { proxyToKeep } from './proxy-setting.js';
import { rejectUnknownFields } from './unknown-fields.js';
import { runIdempotent, sendOutcome } from './idempotency.js';
import {
  CreatedWhatsappSession,
  CreateWhatsappSessionBody,
  Deleted,
  OPTIONAL_BODY,
  SessionIdParams,
  SimulateBody,
  WhatsappSession,
  WhatsappSessionList,
  commonErrors,
  withErrors,
} from './schemas.js';
import { whatsappSessionListItemView, whatsappSessionView } from './views.js';

const PHONE_NUMBER = /^[0-9]{7,15}$/;

const isSimulatedEvent = (value: string): value is SimulatedEvent => (SIMULATED_EVENTS as readonly string[]).includes(value);

export function registerWhatsappSessionRoutes(app: FastifyInstance, services: Services): void {
  const routes = app.withTypeProvider<TypeBoxTypeProvider>();
  const sessions = services.whatsappSessions;

  routes.post(
    '/whatsapp/sessions',
    {
      config: { bucket: 'send' },
      schema: {
        summary: 'Start linking a WhatsApp account',
        description:
          'Without a body: returns a QR code (PNG data URI, valid about 45 s) to scan in the phone app under Linked devices. ' +
          'With {"phone_number": "<digits>"}: returns an 8-character pairing_code to type on that phone under Linked devices → ' +
          'Link with phone number instead (valid as long as a QR code). Sandbox keys get a code that depends only on the number. ' +
          'Sessions linking or linked are capped per account and environment (live: 5 on starter, 20 on growth, 50 on scale, 100 on enterprise; ' +
          'sandbox: 100): one more is 409 limit_reached with details.limit "whatsapp_sessions" and details.max. ' +
          'With {"proxy": "<url>"} the session connects through its own proxy (docs/proxies.md), checked first.',
        tags: ['whatsapp'],
        body: CreateWhatsappSessionBody,
        response: { 201: CreatedWhatsappSession, ...withErrors(400, 409, 422, 502) },
        // The reference call sends no body at all.
        ...({ [OPTIONAL_BODY]: true } as object),
      },
      // The reference call has no body at all: validate it as an empty one.
      preValidation: (request, _reply, done) => {
        if (request.body === undefined || request.body === null) request.body = {};
        done();
      },
    },
    async (request, reply) => {
      const caller = request.caller!;
      const owner = { accountId: caller.accountId, env: caller.env };
      rejectUnknownFields(request.body, ['phone_number', 'proxy']);
      const phoneNumber = request.body.phone_number;
      if (phoneNumber !== undefined && !PHONE_NUMBER.test(phoneNumber)) {
        throw invalidParameter('phone_number', 'phone_number must be the phone number with country code: 7 to 15 digits, no "+"');
      }
      // Checked before anything is made (docs/proxies.md, "Checked when set"): the linking itself goes through it.
      const proxy =
        request.body.proxy === undefined ? undefined : await proxyToKeep(services, request.body.proxy, { platform: 'whatsapp', kind: 'whatsapp_session', env: caller.env, field: 'proxy' });
      const outcome = await runIdempotent(
        services,
        request,
        reply,
        caller,
        async () => {
          try {
            const created = await sessions.create(owner, { ...(phoneNumber !== undefined ? { phoneNumber } : {}), ...(proxy ? { proxy } : {}) });
            const code = created.pairingCode !== undefined ? { pairing_code: created.pairingCode } : { qr_code: created.qrCode };
            return { statusCode: 201, body: { session_id: created.row.id, ...code, status: created.row.status } };
          } catch (error) {
            if (error instanceof WhatsappUnavailableError) throw new ApiError('platform_error', error.message);
            if (error instanceof LimitReachedError) throw new ApiError('limit_reached', error.message, { limit: error.limit, max: error.max });
            throw error;
          }
        },
        // Creating waits on a QR code (a phone socket when live): it runs outside any transaction.
        async (created) => void (await sessions.remove(owner, (created.body as { session_id: string }).session_id)),
      );
      return sendOutcome(reply, outcome);
    },
  );

  routes.get(
    '/whatsapp/sessions',
    { schema: { summary: 'List WhatsApp sessions', tags: ['whatsapp'], response: { 200: WhatsappSessionList, ...commonErrors } } },
    async (request) => {
      const caller = request.caller!;
      const rows = await sessions.list({ accountId: caller.accountId, env: caller.env });
      return { sessions: rows.map(whatsappSessionListItemView) };
    },
  );

  routes.get(
    '/whatsapp/sessions/:session_id',
    { schema: { summary: 'Look up a WhatsApp session', tags: ['whatsapp'], params: SessionIdParams, response: { 200: WhatsappSession, ...withErrors(404) } } },
    async (request) => {
      const caller = request.caller!;
      const row = await sessions.get({ accountId: caller.accountId, env: caller.env }, request.params.session_id);
      if (!row) throw notFound(`WhatsApp session ${request.params.session_id}`);
      return whatsappSessionView(row);
    },
  );

  routes.delete(
    '/whatsapp/sessions/:session_id',
    {
      schema: {
        summary: 'Delete a WhatsApp session and all its stored credentials',
        tags: ['whatsapp'],
        params: SessionIdParams,
        response: { 200: Deleted, ...withErrors(404) },
      },
    },
    async (request) => {
      const caller = request.caller!;
      const removed = await sessions.remove({ accountId: caller.accountId, env: caller.env }, request.params.session_id);
      if (!removed) throw notFound(`WhatsApp session ${request.params.session_id}`);
      return { deleted: true };
    },
  );

  routes.post(
    '/whatsapp/sessions/:session_id/simulate',
    {
      schema: {
        summary: 'Sandbox only: simulate a scan, an expiry or a disconnect',
        tags: ['whatsapp'],
        params: SessionIdParams,
        body: SimulateBody,
        response: { 200: WhatsappSession, ...withErrors(400, 404, 415, 422) },
      },
    },
    async (request) => {
      const caller = request.caller!;
      const id = request.params.session_id;
      // Live sessions are real devices: there is nothing to simulate, and the route does not exist for them.
      if (caller.env !== 'test') throw new ApiError('not_found', `no route POST ${request.url.split('?')[0]}`);
      rejectUnknownFields(request.body, ['event']);
      const event = request.body.event;
      if (!isSimulatedEvent(event)) throw invalidParameter('event', `event must be one of ${SIMULATED_EVENTS.join(', ')}`);
      try {
        const row = await sessions.simulate({ accountId: caller.accountId, env: caller.env }, id, event);
        if (!row) throw notFound(`WhatsApp session ${id}`);
        return whatsappSessionView(row);
      } catch (error) {
        if (error instanceof SessionStateError) throw new ApiError('invalid_parameter', error.message, { field: 'event', status: error.status });
        throw error;
      }
    },
  );
}
