import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import { authenticate, limitByIp } from './api/auth.js';
import { sharedSchemaCompilers } from './api/schema-compilers.js';
import { ApiError, invalidRequest, registerErrorHandling, sendError } from './api/errors.js';
import { registerHealthRoutes } from './api/health.js';
import { registerRootRedirect } from './api/root.js';
import { registerSampleRoute } from './api/samples.js';
import { API_DESCRIPTION, registerDocs, registerFavicon } from './api/docs.js';
import { describeSendBody } from './api/send-document.js';
import { nameResponses } from './api/openapi-names.js';
import { packageVersion } from './package-info.js';
import { registerLoadShedding } from './api/load-shedding.js';
import { requestIdOf } from './api/request-id.js';
import { registerNulGuard } from './api/nul-guard.js';
import { capConnections, clientErrorHandler, httpServerOptions, maxConnectionsFor, maxPerAddressFor, registerClientErrorHooks } from './api/http-limits.js';
import { registerHttpMetrics, registerMetricsRoute } from './metrics/exposure.js';
import { ErrorEnvelope, OPTIONAL_BODY } from './api/schemas.js';
import { ping } from './store/db.js';
import { registerSendRoute } from './api/send.js';
import { registerStatusRoute } from './api/status.js';
import { registerUsageRoute } from './api/usage.js';
import { registerWhatsappSessionRoutes } from './api/whatsapp-sessions.js';
import { registerTelegramSessionRoutes } from './api/telegram-sessions.js';
import { registerDashboard } from './dashboard/index.js';
import { registerMessageLogRoutes } from './api/messages.js';
import { registerSenderRoutes } from './api/senders.js';
import { registerRhythmRoutes } from './api/rhythm.js';
import { registerRecipientCheckRoute } from './api/recipients.js';
import { registerCancelRoute } from './api/cancel.js';
import { registerListeningRoutes } from './api/listening.js';
import { registerWebhookEndpointRoutes } from './api/webhook-endpoints.js';
import { registerSuppressionRoutes } from './api/suppressions.js';
import { registerOptOutSettingsRoutes } from './api/opt-out-settings.js';
import type { Services } from './services.js';

export const API_PREFIX = '/api/v1';
const BODY_LIMIT_BYTES = 64 * 1024;
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface Server {
  app: FastifyInstance;
  /** From now on, new requests get 503 while the ones in flight finish. */
  startDraining(): void;
}

/** A hop count becomes "trust the nearest N hops" (what proxy-addr does with a number). */
function fastifyTrustProxy(setting: boolean | number | string[]): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof setting !== 'number') return setting;
  return (_address, hop) => hop < setting;
}

export interface ServerOptions {
  /** Tests: how often event-loop pressure is sampled (default 1 s). */
  pressureSampleMs?: number;
  /** Benchmarks: `per-server` compiles every schema anew for this server, as Fastify does by itself (bench/app-start.ts's baseline). */
  schemaCompilers?: 'shared' | 'per-server';
}

/** Builds the HTTP app without listening, so tests can inject requests into it. */
function optionalBodies<T>(document: T): T {
  const paths = (document as { paths?: Record<string, Record<string, Record<string, unknown>>> }).paths ?? {};
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      if (operation[OPTIONAL_BODY] !== true) continue;
      delete operation[OPTIONAL_BODY];
      const body = operation.requestBody as { required?: boolean } | undefined;
      if (body) body.required = false;
    }
  }
  return document;
}

export async function buildServer(services: Services, options: ServerOptions = {}): Promise<Server> {
  let draining = false;
  const app = Fastify({
    loggerInstance: services.logger as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT_BYTES,
    // Timeouts and keep-alive limits: a slow or idle client cannot hold a socket for ever (docs/operations.md, "Configuration").
    ...httpServerOptions(services.config.http),
    // Requests Node's parser refuses (or that time out) get the error envelope too.
    clientErrorHandler: clientErrorHandler(services.logger as FastifyBaseLogger),
    // Behind a reverse proxy, the client address (per-IP bucket, logs) comes from X-Forwarded-For of trusted hops only.
    trustProxy: fastifyTrustProxy(services.config.trustProxy),
    return503OnClosing: false,
    // X-Request-Id: the caller's own when well-formed, else ours; every log line of the request carries it.
    requestIdHeader: false,
    genReqId: requestIdOf,
    logController: new LogController({ requestIdLogLabel: 'request_id' }),
    // `/api/v1/usage/` is the same resource; ids longer than any real one still reach the route (and get a 404 there).
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
    // Errors the router raises before any route runs (a malformed percent-encoding) get the envelope too.
    frameworkErrors: (error, request, reply) => {
      reply.header('X-Request-Id', request.id);
      sendError(reply, error.code === 'FST_ERR_BAD_URL' ? invalidRequest(null, 'the URL is not valid (bad percent-encoding)') : new ApiError('not_found', 'no such route'));
    },
    // A mistyped field is the caller's error to see, not something to guess around.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: true, allErrors: false } },
    // Compiled schemas are reused by every server of the process (schema-compilers.ts).
    ...(options.schemaCompilers === 'per-server' ? {} : { schemaController: { compilersFactory: sharedSchemaCompilers } }),
  });
  // Over the caps, a new connection is closed at once: the process keeps descriptors for its own work,
  // and one client address cannot take every place.
  const maxConnections = maxConnectionsFor(services.config.http);
  capConnections(app.server, maxConnections, maxPerAddressFor(services.config.http, maxConnections, services.config.trustProxy !== false));
  registerClientErrorHooks(app);
  app.decorateRequest('caller', null);
  app.addSchema(ErrorEnvelope);
  registerErrorHandling(app, () =>
    ping(services.db).then(
      () => true,
      () => false,
    ),
  );

  // Clients often send `Content-Type: application/json` with no body at all (POST /whatsapp/sessions
  // takes none): an empty body counts as no body. Routes that need one still answer 400 invalid_request.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text === '') return done(null, undefined);
    return parseJson(request, text, done);
  });
  // Fastify parses text/plain by default; a body that is not JSON is 415 unsupported_media_type (docs/api.md, "Errors").
  app.removeContentTypeParser('text/plain');

  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-Id', request.id);
  });
  registerHttpMetrics(app, services.metrics);
  registerNulGuard(app);

  app.addHook('onRequest', async (request, reply) => {
    // Liveness stays true while draining: the process is alive, it only takes no new work.
    if (!draining || request.url === '/healthz') return undefined;
    return sendError(reply, new ApiError('service_unavailable', 'the service is shutting down; retry shortly', null, { 'Retry-After': '5' }));
  });

  // Any request that carries a body can be refused before its route runs (malformed JSON, over 64 KiB, not
  // JSON): every operation that takes one documents those answers, whatever its own schema lists.
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const response = route.schema?.response as Record<string, unknown> | undefined;
    if (!response || !methods.some((m) => BODY_METHODS.has(m))) return;
    for (const status of [400, 413, 415]) response[status] ??= { $ref: 'Error#' };
  });

  await registerLoadShedding(app, { maxEventLoopDelayMs: services.config.maxEventLoopDelayMs, ...(options.pressureSampleMs !== undefined ? { sampleIntervalMs: options.pressureSampleMs } : {}) });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'voicenote',
        version: packageVersion(),
        description: API_DESCRIPTION,
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'sk_test_… (sandbox) or sk_live_…' } } },
      security: [{ bearer: [] }],
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
    transformObject: (documentObject) =>
      nameResponses(describeSendBody(optionalBodies('openapiObject' in documentObject ? documentObject.openapiObject : documentObject.swaggerObject), `${API_PREFIX}/send`)),
  });
  await registerDocs(app);
  registerFavicon(app);

  app.get(`${API_PREFIX}/openapi.json`, { schema: { hide: true }, onRequest: limitByIp(services) }, async () => app.swagger());
  registerHealthRoutes(app, services, () => draining);
  registerRootRedirect(app);
  registerSampleRoute(app, limitByIp(services));
  if (services.config.metricsToken !== undefined) registerMetricsRoute(app, services.metrics, services.config.metricsToken);

  await app.register(
    async (api) => {
      api.addHook('onRequest', authenticate(services));
      // Every route that changes something answers 403 insufficient_scope to a key whose scope is below
      // it (a read key's POST): said once here for all of them, as 401 is for every route.
      api.addHook('onRoute', (route) => {
        const methods = Array.isArray(route.method) ? route.method : [route.method];
        const response = route.schema?.response as Record<number, unknown> | undefined;
        if (response && methods.some((m) => m !== 'GET' && m !== 'HEAD') && !(403 in response)) response[403] = { $ref: 'Error#' };
      });
      registerSendRoute(api, services);
      registerStatusRoute(api, services);
      registerUsageRoute(api, services);
      registerWhatsappSessionRoutes(api, services);
      registerTelegramSessionRoutes(api, services);
      registerMessageLogRoutes(api, services);
      registerSenderRoutes(api, services);
      registerRhythmRoutes(api, services);
      registerRecipientCheckRoute(api, services);
      registerCancelRoute(api, services);
      registerListeningRoutes(api, services);
      registerWebhookEndpointRoutes(api, services);
      registerSuppressionRoutes(api, services);
      registerOptOutSettingsRoutes(api, services);
      api.setNotFoundHandler((request, reply) => sendError(reply, new ApiError('not_found', `no route ${request.method} ${request.url.split('?')[0]}`)));
    },
    { prefix: API_PREFIX },
  );
  await registerDashboard(app, services);
  // Off unless an operator opens it (MCP_ENABLED=true): until then POST /mcp is 404 like any unknown route.
  // Loaded only then: the MCP SDK and zod cost a server that has no use for them about 0.3 s of start.
  if (services.config.mcpEnabled) (await import('./api/mcp/route.js')).registerMcpRoute(app, services, API_PREFIX);

  return {
    app,
    startDraining: () => {
      draining = true;
    },
  };
}
