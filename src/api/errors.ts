import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isDiskFull, noteDiskFull } from '../store/disk-full.js';

/** Every non-2xx answer of the API, by code (docs/api.md, "Errors"). */
export type ErrorCode =
  | 'invalid_request'
  | 'unauthorized'
  | 'insufficient_scope'
  | 'sender_not_allowed'
  | 'quota_exceeded'
  | 'not_found'
  | 'method_not_allowed'
  | 'request_timeout'
  | 'idempotency_conflict'
  | 'not_cancelable'
  | 'limit_reached'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'invalid_parameter'
  | 'session_not_connected'
  | 'proxy_unreachable'
  | 'proxy_auth_failed'
  | 'recipient_suppressed'
  | 'headers_too_large'
  | 'rate_limited'
  | 'internal_error'
  | 'platform_error'
  | 'service_unavailable'
  | 'not_configured';

const STATUS_OF: Record<ErrorCode, number> = {
  invalid_request: 400,
  unauthorized: 401,
  insufficient_scope: 403,
  sender_not_allowed: 403,
  quota_exceeded: 402,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  idempotency_conflict: 409,
  not_cancelable: 409,
  limit_reached: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  invalid_parameter: 422,
  session_not_connected: 422,
  // A proxy being set did not carry a connection to the platform's host, or refused its credentials.
  proxy_unreachable: 422,
  proxy_auth_failed: 422,
  recipient_suppressed: 422,
  rate_limited: 429,
  headers_too_large: 431,
  internal_error: 500,
  platform_error: 502,
  service_unavailable: 503,
  // The operator's configuration lacks what this request needs (TELEGRAM_API_ID for live Telegram
  // accounts): no Retry-After, since retrying changes nothing until the service is configured.
  not_configured: 503,
};

export type ErrorDetails = Record<string, unknown> | null;

/** An error meant for the caller: thrown anywhere in a request, turned into the envelope in one place. */
export class ApiError extends Error {
  readonly statusCode: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: ErrorDetails = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.statusCode = STATUS_OF[code];
  }
}

export const invalidRequest = (field: string | null, message: string): ApiError =>
  new ApiError('invalid_request', message, field === null ? null : { field });
export const invalidParameter = (field: string, message: string): ApiError => new ApiError('invalid_parameter', message, { field });
export const notFound = (what: string): ApiError => new ApiError('not_found', `${what} not found`);

export interface ErrorEnvelope {
  error: { code: ErrorCode; message: string; details: ErrorDetails };
}

export const envelope = (error: ApiError): ErrorEnvelope => ({
  error: { code: error.code, message: error.message, details: error.details },
});

interface AjvIssue {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

// "/session/bot_token" → "session.bot_token"; a missing property is named by the parent path plus its name.
function fieldOf(issue: AjvIssue): string | null {
  const base = (issue.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.');
  const missing = issue.params?.missingProperty;
  if (typeof missing === 'string') return base ? `${base}.${missing}` : missing;
  return base || null;
}

function fromFastifyError(error: FastifyError): ApiError {
  const validation = (error as FastifyError & { validation?: AjvIssue[] }).validation;
  if (validation && validation.length > 0) {
    const issue = validation[0]!;
    const field = fieldOf(issue);
    const context = (error as FastifyError & { validationContext?: string }).validationContext;
    if (!field && context === 'body') return invalidRequest(null, 'request body must be a JSON object');
    const what = field ?? context ?? 'request';
    const message =
      issue.keyword === 'required' ? `${what} is required` : issue.keyword === 'type' ? `${what} ${issue.message ?? 'has the wrong type'}` : `${what} ${issue.message ?? 'is invalid'}`;
    return invalidRequest(field, message);
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('payload_too_large', 'request body is larger than 64 KiB');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
        ? new ApiError('unsupported_media_type', 'request body must be JSON (Content-Type: application/json)')
        : invalidRequest(null, 'Content-Length does not match the body');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return invalidRequest(null, 'request body is empty; send a JSON object');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return invalidRequest(null, `malformed JSON: ${error.message}`);
    default:
      break;
  }
  if (error instanceof SyntaxError || error.statusCode === 400) return invalidRequest(null, `malformed request: ${error.message}`);
  if (error.statusCode === 413) return new ApiError('payload_too_large', 'request body is larger than 64 KiB');
  if (error.statusCode === 415) return new ApiError('unsupported_media_type', 'request body must be JSON (Content-Type: application/json)');
  return new ApiError('internal_error', 'something went wrong on our side; it has been logged');
}

export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  for (const [name, value] of Object.entries(error.headers)) reply.header(name, value);
  if (error.code === 'unauthorized') reply.header('WWW-Authenticate', 'Bearer');
  return reply.code(error.statusCode).type('application/json; charset=utf-8').send(envelope(error));
}

export const storageUnavailable = (): ApiError =>
  new ApiError('service_unavailable', 'storage is not reachable; retry shortly', null, { 'Retry-After': '5' });

/** Storage answers but cannot write: the disk is full (an operator must free space). */
export const storageFull = (): ApiError =>
  new ApiError('service_unavailable', 'storage is full (disk full): it cannot take writes until space is freed; retry later', null, { 'Retry-After': '30' });

const STORAGE_FAULT_CODES = /^(SQLITE_(BUSY|LOCKED|READONLY|IOERR|FULL|CANTOPEN|PROTOCOL)|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|57P0[1-3]|08\d{3}|53300)/;
const STORAGE_FAULT_MESSAGES = /Connection terminated|Query read timeout|timeout exceeded when trying to connect|Client has encountered a connection error/;

/**
 * Storage that is away or cannot take a write right now (a locked or read-only SQLite file, a PostgreSQL
 * server restarting or out of connections): the request may well succeed later, so 503, not 500.
 */
export function isStorageFault(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as Error & { code?: unknown }).code;
  return (typeof code === 'string' && STORAGE_FAULT_CODES.test(code)) || STORAGE_FAULT_MESSAGES.test(error.message);
}

/**
 * One place turns every error into the envelope. An unexpected error is a 500 only while storage
 * answers: when it does not, the caller gets 503 with Retry-After (the request may well succeed later).
 */
export function registerErrorHandling(app: FastifyInstance, storageAnswers: () => Promise<boolean>): void {
  app.setErrorHandler(async (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    let apiError = error instanceof ApiError ? error : fromFastifyError(error);
    if (apiError.code === 'internal_error' && isDiskFull(error)) {
      noteDiskFull();
      request.log.warn({ err: error }, 'storage is full (disk full)');
      apiError = storageFull();
    } else if (apiError.code === 'internal_error') {
      if (!isStorageFault(error) && (await storageAnswers())) request.log.error({ err: error }, 'unhandled error');
      else {
        request.log.warn({ err: error }, 'storage is not reachable');
        apiError = storageUnavailable();
      }
    }
    return sendError(reply, apiError);
  });
  app.setNotFoundHandler((request, reply) => sendError(reply, new ApiError('not_found', `no route ${request.method} ${request.url.split('?')[0]}`)));
}
