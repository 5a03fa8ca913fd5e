import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { findIdempotent, storeIdempotent, type IdempotencyRow } from '../store/idempotency.js';
import type { Services } from '../services.js';
import type { Caller } from './caller.js';
import { ApiError, invalidRequest } from './errors.js';

/**
 * What a replay needs of a reply: a header, and a status with a body sent as stored. Any route's reply
 * is one, whatever status codes and bodies its schema types (its `code` takes only those codes, its
 * `send` only those bodies; a stored answer is one of them by construction, but its type is the
 * database's): methods, so a route's narrower reply fits without a cast.
 */
export interface ReplayReply {
  header(key: string, value: string): unknown;
  code(statusCode: number): { send(payload: unknown): unknown };
}

export interface Outcome {
  statusCode: number;
  body: unknown;
  /** True when this is a stored answer to an earlier request with the same key. */
  replayed?: boolean;
}

// Key order must not make two equal bodies look different, nor a field sent as null (the API reads
// null as "not given") differ from one left out.
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined && v !== null)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The stored answer to a repeated request (409 when the key was used with another body or endpoint). */
export function replayStored(reply: ReplayReply, stored: IdempotencyRow, requestHash: string): Outcome {
  if (stored.request_hash !== requestHash) {
    throw new ApiError('idempotency_conflict', 'this Idempotency-Key was already used with a different request body or endpoint');
  }
  reply.header('Idempotent-Replayed', 'true');
  return { statusCode: stored.status_code, body: JSON.parse(stored.response_body) as unknown, replayed: true };
}

export interface IdempotencyScope {
  key: string;
  endpoint: string;
  requestHash: string;
  owner: { accountId: string; env: string; key: string };
}

/** What identifies a request under its Idempotency-Key; undefined when it carries none. */
export function idempotencyScope(request: FastifyRequest, caller: Caller): IdempotencyScope | undefined {
  const header = request.headers['idempotency-key'];
  if (header === undefined) return undefined;
  const key = Array.isArray(header) ? header[0] ?? '' : header;
  if (key.length < 1 || key.length > 255) throw invalidRequest('Idempotency-Key', 'Idempotency-Key must be 1 to 255 characters');
  const endpoint = `${request.method} ${request.routeOptions.url ?? request.url}`;
  const requestHash = createHash('sha256').update(`${endpoint}\n${canonicalJson(request.body ?? null)}`).digest('hex');
  return { key, endpoint, requestHash, owner: { accountId: caller.accountId, env: caller.env, key } };
}

/**
 * The stored answer when this request repeats an earlier one under the same Idempotency-Key (409 when
 * its body differs). Routes call it before validating, so a retry gets the first answer even when
 * something the first request relied on (a WhatsApp session, the quota) has changed since.
 */
export async function findReplay(services: Services, request: FastifyRequest, reply: ReplayReply, caller: Caller): Promise<Outcome | undefined> {
  const scope = idempotencyScope(request, caller);
  if (!scope) return undefined;
  const existing = await findIdempotent(services.db.kysely, scope.owner);
  return existing ? replayStored(reply, existing, scope.requestHash) : undefined;
}

/**
 * Runs `work` (which waits on something other than the database, a QR code or a socket, and so runs
 * outside any transaction) and, when the request carries an Idempotency-Key, stores its successful
 * outcome, so a retried request gets the first answer back (with `Idempotent-Replayed: true`) and never
 * does the work twice. When a concurrent request with the same key stored its answer first, `undo`
 * takes back this one's effect and the winner's answer is given. Errors are not stored: a retry after a
 * 4xx is judged anew. (POST /send stores its answer in the send's own transaction: store/hot-path.ts.)
 */
export async function runIdempotent(
  services: Services,
  request: FastifyRequest,
  reply: ReplayReply,
  caller: Caller,
  work: () => Promise<Outcome>,
  undo: (outcome: Outcome) => Promise<void>,
): Promise<Outcome> {
  const db = services.db.kysely;
  const idempotency = idempotencyScope(request, caller);
  if (!idempotency) return work();
  const { owner: scope, requestHash } = idempotency;

  const existing = await findIdempotent(db, scope);
  if (existing) return replayStored(reply, existing, requestHash);
  const result = await work();
  if (await storeIdempotent(db, idempotentAnswer(idempotency, result))) return result;
  await undo(result).catch((err: unknown) => request.log.warn({ err }, 'could not undo the work of a request that lost an idempotency race'));
  // A concurrent request with the same key committed first: answer as it did.
  const winner = await findIdempotent(db, scope);
  if (!winner) throw new ApiError('internal_error', 'idempotency record vanished');
  return replayStored(reply, winner, requestHash);
}

/** The row that stores `outcome` as the answer to this request's Idempotency-Key. */
export function idempotentAnswer(idempotency: IdempotencyScope, outcome: Outcome, now = Date.now()): IdempotencyRow {
  return {
    account_id: idempotency.owner.accountId,
    env: idempotency.owner.env,
    key: idempotency.key,
    endpoint: idempotency.endpoint,
    request_hash: idempotency.requestHash,
    status_code: outcome.statusCode,
    response_body: JSON.stringify(outcome.body),
    created_at: now,
  };
}

/** Sends an outcome, first-time or replayed (its body was already shaped by the route). */
/** Sends `outcome` on `reply`, and returns the reply (what an async handler returns once it has sent). */
export function sendOutcome<R extends ReplayReply>(reply: R, outcome: Outcome): R {
  reply.code(outcome.statusCode).send(outcome.body);
  return reply;
}
