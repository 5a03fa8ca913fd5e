import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Services } from '../services.js';
import { telegramSessionListItemView, telegramSessionView } from '../core/telegram-session-views.js';
import {
  TELEGRAM_SIMULATED_EVENTS,
  TelegramNotConfiguredError,
  TelegramSessionStateError,
  TelegramUnavailableError,
  WrongPasswordError,
  type TelegramSimulatedEvent,
} from '../platforms/telegram/account/sessions.js';
import { LimitReachedError } from '../store/limits.js';
import type { TelegramSessionRow } from '../store/telegram-sessions.js';
import { ApiError, invalidParameter, notFound } from './errors.js';
import { proxyToKeep } from './proxy-setting.js';
import { rejectUnknownFields } from './unknown-fields.js';
import { runIdempotent, sendOutcome } from './idempotency.js';
import { Deleted, OPTIONAL_BODY, SessionIdParams, commonErrors, withErrors } from './schemas.js';
import { CreateTelegramSessionBody, CreatedTelegramSession, TelegramPasswordBody, TelegramSession, TelegramSessionList, TelegramSimulateBody } from './telegram-session-schemas.js';

const isSimulatedEvent = (value: string): value is TelegramSimulatedEvent => (TELEGRAM_SIMULATED_EVENTS as readonly string[]).includes(value);

/** Telegram accounts linked by QR code: the same routes as WhatsApp sessions, plus the cloud password. */
export function registerTelegramSessionRoutes(app: FastifyInstance, services: Services): void {
  const routes = app.withTypeProvider<TypeBoxTypeProvider>();
  const sessions = services.telegramSessions;
  const owner = (caller: { accountId: string; env: string }) => ({ accountId: caller.accountId, env: caller.env });

  async function view(row: TelegramSessionRow) {
    const qr = await sessions.currentQr(row);
    return { ...telegramSessionView(row), ...(qr !== undefined ? { qr_code: qr } : {}) };
  }

  const asApiError = (error: unknown, field: string): never => {
    // Not the platform's fault: the operator's configuration, which no retry mends.
    if (error instanceof TelegramNotConfiguredError) throw new ApiError('not_configured', error.message, { missing: ['TELEGRAM_API_ID', 'TELEGRAM_API_HASH'] });
    if (error instanceof TelegramUnavailableError) throw new ApiError('platform_error', error.message);
    if (error instanceof LimitReachedError) throw new ApiError('limit_reached', error.message, { limit: error.limit, max: error.max });
    if (error instanceof WrongPasswordError) {
      throw new ApiError('invalid_parameter', error.message, { field: 'password', tries_left: error.triesLeft, ...(error.triesLeft === 0 ? { status: 'qr_expired' } : {}) });
    }
    if (error instanceof TelegramSessionStateError) throw new ApiError('invalid_parameter', error.message, { field, status: error.status });
    throw error;
  };

  routes.post(
    '/telegram/sessions',
    {
      config: { bucket: 'send' },
      schema: {
        summary: 'Start linking a Telegram account',
        description:
          'Returns a QR code (PNG data URI of tg://login?token=…) to scan in Telegram under Settings → Devices → Link Desktop Device. ' +
          'Live codes are renewed as Telegram expires them (GET shows the current one). An account with a cloud password moves to password_needed. ' +
          'Sessions linking or linked are capped per account and environment as WhatsApp sessions are (live: 5 on starter, 20 on growth, 50 on scale, ' +
          '100 on enterprise; sandbox: 100): one more is 409 limit_reached with details.limit "telegram_sessions" and details.max. ' +
          'With {"proxy": "socks5://…"} the account connects through its own SOCKS5 proxy (docs/proxies.md), checked first.',
        tags: ['telegram'],
        body: CreateTelegramSessionBody,
        response: { 201: CreatedTelegramSession, ...withErrors(400, 409, 422, 502, 503) },
        ...({ [OPTIONAL_BODY]: true } as object),
      },
      // No body at all is the usual call: validated as an empty one, so `[]`, `"x"`, `1` or `true` are
      // refused by the schema ("request body must be a JSON object"), as POST /whatsapp/sessions does.
      preValidation: (request, _reply, done) => {
        if (request.body === undefined || request.body === null) request.body = {};
        done();
      },
    },
    async (request, reply) => {
      const caller = request.caller!;
      rejectUnknownFields(request.body, ['proxy']);
      // Checked before anything is made (docs/proxies.md): the linking itself goes through it; SOCKS5 only.
      const proxyField = (request.body as { proxy?: unknown }).proxy;
      const proxy = proxyField === undefined ? undefined : await proxyToKeep(services, proxyField, { platform: 'telegram', kind: 'telegram_account', env: caller.env, field: 'proxy' });
      const outcome = await runIdempotent(
        services,
        request,
        reply,
        caller,
        async () => {
          try {
            const created = await sessions.create(owner(caller), proxy ? { proxy } : {});
            const body = { session_id: created.row.id, status: created.row.status, qr_code: created.qrCode, created_at: new Date(Number(created.row.created_at)).toISOString() };
            return { statusCode: 201, body };
          } catch (error) {
            return asApiError(error, 'session_id');
          }
        },
        async (created) => void (await sessions.remove(owner(caller), (created.body as { session_id: string }).session_id)),
      );
      return sendOutcome(reply, outcome);
    },
  );

  routes.get(
    '/telegram/sessions',
    { schema: { summary: 'List Telegram account sessions', tags: ['telegram'], response: { 200: TelegramSessionList, ...commonErrors } } },
    async (request) => ({ sessions: (await sessions.list(owner(request.caller!))).map(telegramSessionListItemView) }),
  );

  routes.get(
    '/telegram/sessions/:session_id',
    { schema: { summary: 'Look up a Telegram account session', tags: ['telegram'], params: SessionIdParams, response: { 200: TelegramSession, ...withErrors(404) } } },
    async (request) => {
      const row = await sessions.get(owner(request.caller!), request.params.session_id);
      if (!row) throw notFound(`Telegram session ${request.params.session_id}`);
      return view(row);
    },
  );

  routes.post(
    '/telegram/sessions/:session_id/password',
    {
      config: { bucket: 'send' },
      schema: {
        summary: "Give a password_needed session the account's cloud password",
        description: 'Checked with Telegram by SRP (auth.checkPassword); the password is never stored and never logged.',
        tags: ['telegram'],
        params: SessionIdParams,
        body: TelegramPasswordBody,
        response: { 200: TelegramSession, ...withErrors(400, 404, 415, 422, 502) },
      },
    },
    async (request) => {
      rejectUnknownFields(request.body, ['password']);
      try {
        const row = await sessions.password(owner(request.caller!), request.params.session_id, request.body.password);
        if (!row) throw notFound(`Telegram session ${request.params.session_id}`);
        return view(row);
      } catch (error) {
        return asApiError(error, 'password');
      }
    },
  );

  routes.delete(
    '/telegram/sessions/:session_id',
    {
      schema: {
        summary: 'Log a Telegram account session out at Telegram and erase its keys',
        tags: ['telegram'],
        params: SessionIdParams,
        response: { 200: Deleted, ...withErrors(404) },
      },
    },
    async (request) => {
      const removed = await sessions.remove(owner(request.caller!), request.params.session_id);
      if (!removed) throw notFound(`Telegram session ${request.params.session_id}`);
      return { deleted: true };
    },
  );

  routes.post(
    '/telegram/sessions/:session_id/simulate',
    {
      schema: {
        summary: 'Sandbox only: simulate a scan (with or without a cloud password), an expiry or a disconnect',
        tags: ['telegram'],
        params: SessionIdParams,
        body: TelegramSimulateBody,
        response: { 200: TelegramSession, ...withErrors(400, 404, 415, 422) },
      },
    },
    async (request) => {
      const caller = request.caller!;
      if (caller.env !== 'test') throw new ApiError('not_found', `no route POST ${request.url.split('?')[0]}`);
      rejectUnknownFields(request.body, ['event']);
      const event = request.body.event;
      if (!isSimulatedEvent(event)) throw invalidParameter('event', `event must be one of ${TELEGRAM_SIMULATED_EVENTS.join(', ')}`);
      try {
        const row = await sessions.simulate(owner(caller), request.params.session_id, event);
        if (!row) throw notFound(`Telegram session ${request.params.session_id}`);
        return view(row);
      } catch (error) {
        return asApiError(error, 'event');
      }
    },
  );
}
