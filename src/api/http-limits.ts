import fs from 'node:fs';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyInstance, FastifyServerOptions } from 'fastify';
import type { HttpLimits } from '../config.js';
import { ApiError, envelope } from './errors.js';

// Without a cap of its own, the process would take connections until it runs out of descriptors,
// and then fail at whatever needs one next (a database file, an audio download, a log rotation).
const DEFAULT_MAX_CONNECTIONS = 1_000;
// A quarter of the descriptors stay for everything else the process opens: the database, the
// PostgreSQL pool and Redis, audio downloads and the ffmpeg pipes of the worker beside the API.
const SHARE_FOR_CLIENTS = 0.75;

/** The soft limit on open descriptors (Linux: /proc/self/limits); undefined where that cannot be read. */
export function openFileLimit(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+|unlimited)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
    return line && line[1] !== 'unlimited' ? Number(line[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** HTTP_MAX_CONNECTIONS when set; else 1,000, or three quarters of the descriptor limit when that is lower. */
export function maxConnectionsFor(limits: HttpLimits, fileLimit = openFileLimit()): number {
  if (limits.maxConnections !== undefined) return limits.maxConnections;
  return fileLimit === undefined ? DEFAULT_MAX_CONNECTIONS : Math.max(1, Math.min(DEFAULT_MAX_CONNECTIONS, Math.floor(fileLimit * SHARE_FOR_CLIENTS)));
}

/**
 * HTTP_MAX_CONNECTIONS_PER_ADDRESS when set (0: none); else half the connection cap, so one client
 * address cannot take every place, except behind a trusted proxy, whose one address is everyone's.
 */
export function maxPerAddressFor(limits: HttpLimits, maxConnections: number, behindProxy: boolean): number {
  if (limits.maxConnectionsPerAddress !== undefined) return limits.maxConnectionsPerAddress;
  return behindProxy ? 0 : Math.max(1, Math.ceil(maxConnections / 2));
}

/**
 * The connection caps on the listening server: over the total (Node's maxConnections) or over one
 * address's share, a new connection is closed at once, before anything is read from it.
 */
export function capConnections(server: Server, maxConnections: number, perAddress: number): void {
  server.maxConnections = maxConnections;
  if (perAddress <= 0) return;
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const count = (open.get(address) ?? 0) + 1;
    if (count > perAddress) {
      socket.destroy();
      return;
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) open.delete(address);
      else open.set(address, left);
    });
  });
}

/** The Fastify (and Node http.Server) options that bound what one slow or idle client can hold. */
export function httpServerOptions(limits: HttpLimits): Pick<FastifyServerOptions, 'requestTimeout' | 'keepAliveTimeout' | 'maxRequestsPerSocket'> & {
  http: { headersTimeout: number; requestTimeout: number; connectionsCheckingInterval: number };
} {
  return {
    // The whole request, body included: a client that promises 60,000 bytes and sends 5 is closed then.
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    maxRequestsPerSocket: limits.maxRequestsPerSocket,
    http: {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      // Node looks for expired requests every 30 s by default: a 10 s limit would hold for up to 40 s.
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 2))),
    },
  };
}

/** What a request Node's HTTP parser refused (or timed out) gets: our error envelope, never Fastify's own body. */
function clientErrorOf(error: Error & { code?: string }): ApiError {
  switch (error.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiError('request_timeout', 'the request did not arrive in time; send it again');
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError('headers_too_large', 'the request headers are too large');
    case 'HPE_INVALID_METHOD':
      return new ApiError('method_not_allowed', 'unknown HTTP method');
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
    case 'HPE_INVALID_TRANSFER_ENCODING':
      return new ApiError('invalid_request', 'malformed HTTP request: Content-Length and Transfer-Encoding disagree');
    default:
      return new ApiError('invalid_request', 'malformed HTTP request');
  }
}

// Sockets whose request was answered before its body had arrived (a 401 needs no body): when that body
// then times out, the client already has its answer, and a second one would be a stray response.
const answeredEarly = new WeakSet<Socket>();

/** Notes answers sent before their request's body was in, and answers CONNECT (never routed) in the envelope. */
export function registerClientErrorHooks(app: FastifyInstance): void {
  app.addHook('onResponse', async (request) => {
    if (!request.raw.complete) answeredEarly.add(request.raw.socket);
  });
  app.server.on('connect', (_request, socket: Socket) => answerRaw(socket, new ApiError('method_not_allowed', 'CONNECT is not supported')));
}

function answerRaw(socket: Socket, apiError: ApiError): void {
  const body = JSON.stringify(envelope(apiError));
  const head = `HTTP/1.1 ${apiError.statusCode} ${STATUS_TEXT[apiError.statusCode] ?? 'Error'}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
  // Closed once the answer is out (a client that reads nothing cannot keep the socket open either).
  socket.end(head + body, () => socket.destroy());
  setTimeout(() => socket.destroy(), 1_000).unref();
}

/**
 * Fastify's `clientErrorHandler`: a request that never reached a route (malformed HTTP, headers too
 * large, a body that did not arrive in time) is answered in the envelope on the raw socket, which is
 * then closed (its framing can no longer be trusted).
 */
export function clientErrorHandler(logger: FastifyBaseLogger) {
  return (error: Error & { code?: string }, socket: Socket): void => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const apiError = clientErrorOf(error);
    logger.info({ code: error.code, status: apiError.statusCode, remoteAddress: socket.remoteAddress }, 'refused a malformed or slow HTTP request');
    // A response already under way (a timeout while our answer was being written) is not interrupted by a second one.
    const started = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
    if (!socket.writable || started || answeredEarly.has(socket)) {
      socket.destroy();
      return;
    }
    answerRaw(socket, apiError);
  };
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 405: 'Method Not Allowed', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };
