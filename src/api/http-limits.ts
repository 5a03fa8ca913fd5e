import fs from 'node:fs';
import type { Server } from 'node:http';
import { isIP, type Socket } from 'node:net';
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

// One client's default share of the places: 50 of 1,000. Half (as before) let two addresses take
// every place; with a twentieth, a handful cannot, and 50 connections at once are more than one
// API client (or an office behind one NAT address) holds.
const SHARE_PER_CLIENT = 1 / 20;

/**
 * HTTP_MAX_CONNECTIONS_PER_ADDRESS when set (0: none); else a twentieth of the connection cap, so a
 * handful of client addresses cannot take every place, except behind a trusted proxy, whose one
 * address is everyone's.
 */
export function maxPerAddressFor(limits: HttpLimits, maxConnections: number, behindProxy: boolean): number {
  if (limits.maxConnectionsPerAddress !== undefined) return limits.maxConnectionsPerAddress;
  return behindProxy ? 0 : Math.max(1, Math.ceil(maxConnections * SHARE_PER_CLIENT));
}

/**
 * Whom a connection is counted against: an IPv4 address (also when written IPv4-mapped, `::ffff:a.b.c.d`),
 * or an IPv6 address's /64. One IPv6 client is given a whole /64 (RFC 6177's end-site assignments
 * are /48 to /64) and may pick any of its 2^64 addresses: counted one address at a time, one client
 * could take every place.
 */
export function clientOf(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (isIP(address) !== 6) return address;
  const bare = address.split('%')[0]!.toLowerCase();
  const [head = '', tail = ''] = bare.split('::');
  const front = head === '' ? [] : head.split(':');
  const back = bare.includes('::') ? (tail === '' ? [] : tail.split(':')) : [];
  // An embedded IPv4 address at the end (`::a:b:1.2.3.4`) stands for two groups.
  const backGroups = back.length + (back.at(-1)?.includes('.') ? 1 : 0);
  const groups = bare.includes('::') ? [...front, ...Array<string>(Math.max(0, 8 - front.length - backGroups)).fill('0'), ...back] : front;
  return `${groups.slice(0, 4).map((g) => Number.parseInt(g || '0', 16).toString(16)).join(':')}::/64`;
}

/** How long a client over its share of the connections is told to wait before it tries again (s). */
const OVER_SHARE_RETRY_AFTER_S = 1;

/**
 * The connection caps on the listening server. Over the total (Node's maxConnections) a new
 * connection is closed at once. Over one client's share (an IPv4 address, an IPv6 /64) it is answered
 * at once, before anything is read from it, with a 503 and Retry-After in the error envelope, then
 * closed: a client sending many requests in parallel learns why (not a bare ECONNRESET) and when to
 * try again. The HTTP server never sees such a connection: nothing of it is parsed, no request runs.
 */
export function capConnections(server: Server, maxConnections: number, perAddress: number): void {
  server.maxConnections = maxConnections;
  if (perAddress <= 0) return;
  const open = new Map<string, number>();
  // Node's HTTP server takes each connection in its 'connection' listener: it is called only for
  // connections within the share.
  const httpListeners = server.listeners('connection') as Array<(socket: Socket) => void>;
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    const address = clientOf(socket.remoteAddress ?? '');
    const count = (open.get(address) ?? 0) + 1;
    if (count > perAddress) {
      refuseOverShare(socket, perAddress);
      return;
    }
    for (const listener of httpListeners) listener.call(server, socket);
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

/** The answer to a connection over its address's share, written before anything is read from it. */
function refuseOverShare(socket: Socket, perAddress: number): void {
  const apiError = new ApiError(
    'service_unavailable',
    `too many connections from this address (at most ${perAddress} at once); send fewer requests in parallel, reuse connections (keep-alive), and retry after ${OVER_SHARE_RETRY_AFTER_S} s`,
    { max_connections: perAddress },
    { 'Retry-After': String(OVER_SHARE_RETRY_AFTER_S) },
  );
  socket.on('error', () => undefined);
  // What the client sends meanwhile is read and dropped: closing with unread bytes would reset the
  // connection, and a reset may take the answer with it before the client reads it.
  socket.resume();
  socket.end(rawResponse(apiError));
  setTimeout(() => socket.destroy(), 1_000).unref();
}

/** An error answer written on a bare socket: status line, headers (the error's own too), the envelope. */
function rawResponse(apiError: ApiError): string {
  const body = JSON.stringify(envelope(apiError));
  const extra = Object.entries(apiError.headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return `HTTP/1.1 ${apiError.statusCode} ${STATUS_TEXT[apiError.statusCode] ?? 'Error'}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`;
}

function answerRaw(socket: Socket, apiError: ApiError): void {
  // Closed once the answer is out (a client that reads nothing cannot keep the socket open either).
  socket.end(rawResponse(apiError), () => socket.destroy());
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

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 405: 'Method Not Allowed', 408: 'Request Timeout', 431: 'Request Header Fields Too Large', 503: 'Service Unavailable' };
