import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { ApiError, sendError } from '../api/errors.js';
import type { Metrics } from './metrics.js';

/** `Authorization: Bearer <token>` with the right token, compared in constant time. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const match = /^Bearer (.+)$/i.exec(header?.trim() ?? '');
  if (!match) return false;
  const digest = (s: string): Buffer => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(match[1]!.trim()), digest(token));
}

/** Counts and times every response of the API by route pattern (never by raw URL: ids would explode the series). */
export function registerHttpMetrics(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', async (request, reply) => {
    metrics.responded({
      method: request.method,
      route: request.routeOptions.url ?? 'unmatched',
      status: reply.statusCode,
      seconds: reply.elapsedTime / 1000,
    });
  });
}

/** GET /metrics on the API's own listener, for callers that show METRICS_TOKEN; hidden from the OpenAPI document. */
export function registerMetricsRoute(app: FastifyInstance, metrics: Metrics, token: string): void {
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    if (!bearerMatches(request.headers.authorization, token)) {
      return sendError(reply, new ApiError('unauthorized', 'metrics need Authorization: Bearer <METRICS_TOKEN>'));
    }
    const { contentType, body } = await metrics.render();
    return reply.type(contentType).send(body);
  });
}

export interface MetricsListener {
  /** `http://host:port`, the address it listens on. */
  address: string;
  close(): Promise<void>;
}

/** A listener of its own (METRICS_PORT) that serves only /metrics, away from the public API. */
export async function startMetricsListener(options: { metrics: Metrics; host: string; port: number; token: string | undefined }): Promise<MetricsListener> {
  const { metrics, token } = options;
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, headers: Record<string, string>, body: string): void => {
      res.writeHead(status, headers).end(body);
    };
    const error = (status: number, code: string, message: string, extra: Record<string, string> = {}): void =>
      send(status, { 'content-type': 'application/json; charset=utf-8', ...extra }, JSON.stringify({ error: { code, message, details: null } }));
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) return error(404, 'not_found', 'only GET /metrics is served here');
    if (token !== undefined && !bearerMatches(req.headers.authorization, token)) {
      return error(401, 'unauthorized', 'metrics need Authorization: Bearer <METRICS_TOKEN>', { 'www-authenticate': 'Bearer' });
    }
    metrics.render().then(
      ({ contentType, body }) => send(200, { 'content-type': contentType }, req.method === 'HEAD' ? '' : body),
      () => error(500, 'internal_error', 'metrics could not be collected'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  return {
    address: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
