import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Database } from '../store/schema.js';
import { findIdempotent, storeIdempotent, type IdempotencyRow } from '../store/idempotency.js';
import type { Services } from '../services.js';
import type { Caller } from './caller.js';
import { ApiError, invalidRequest } from './errors.js';

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

class LostRace extends Error {}

function replay(reply: FastifyReply, stored: IdempotencyRow, requestHash: string): Outcome {
  if (stored.request_hash !== requestHash) {
    throw new ApiError('idempotency_conflict', 'this Idempotency-Key was already used with a different request body or endpoint');
  }
  reply.header('Idempotent-Replayed', 'true');
  return { statusCode: stored.status_code, body: JSON.parse(stored.response_body) as unknown, replayed: true };
}

interface IdempotencyScope {
  key: string;
  endpoint: string;
  requestHash: string;
  owner: { accountId: string; env: string; key: string };
}

/** What identifies a request under its Idempotency-Key; undefined when it carries none. */
function idempotencyScope(request: FastifyRequest, caller: Caller): IdempotencyScope | undefined {
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
export async function findReplay(services: Services, request: FastifyRequest, reply: FastifyReply, caller: Caller): Promise<Outcome | undefined> {
  const scope = idempotencyScope(request, caller);
  if (!scope) return undefined;
  const existing = await findIdempotent(services.db.kysely, scope.owner);
  return existing ? replay(reply, existing, scope.requestHash) : undefined;
}

export interface IdempotentOptions {
  /**
   * For work that waits on something other than the database (a QR code, a socket): it must not hold
   * a transaction open (SQLite has one connection, so its own queries would wait forever). It runs on
   * its own, its outcome is stored afterwards, and `undo` takes back its effect when a concurrent
   * request with the same key answered first.
   */
  outsideTransaction?: { undo(outcome: Outcome): Promise<void> };
}

/**
 * Runs `work` in one transaction (the caller sends the outcome) and, when the request carries an Idempotency-Key, stores its
 * successful outcome in the same transaction, so a retried request gets the first answer back
 * (with `Idempotent-Replayed: true`) and never does the work twice. Errors are not stored: a
 * retry after a 402 or 422 is judged anew.
 */
export async function runIdempotent(
  services: Services,
  request: FastifyRequest,
  reply: FastifyReply,
  caller: Caller,
  work: (trx: Kysely<Database>) => Promise<Outcome>,
  options: IdempotentOptions = {},
): Promise<Outcome> {
  const db = services.db.kysely;
  const outside = options.outsideTransaction;
  const idempotency = idempotencyScope(request, caller);
  if (!idempotency) {
    return outside ? work(db) : services.db.writeTransaction(work);
  }
  const { key, endpoint, requestHash, owner: scope } = idempotency;

  const existing = await findIdempotent(db, scope);
  if (existing) return replay(reply, existing, requestHash);
  const store = (trx: Kysely<Database>, result: Outcome): Promise<boolean> =>
    storeIdempotent(trx, {
      account_id: caller.accountId,
      env: caller.env,
      key,
      endpoint,
      request_hash: requestHash,
      status_code: result.statusCode,
      response_body: JSON.stringify(result.body),
      created_at: Date.now(),
    });
  try {
    if (outside) {
      const result = await work(db);
      if (await store(db, result)) return result;
      await outside.undo(result).catch((err: unknown) => request.log.warn({ err }, 'could not undo the work of a request that lost an idempotency race'));
      throw new LostRace();
    }
    const outcome = await services.db.writeTransaction(async (trx) => {
      const result = await work(trx);
      if (!(await store(trx, result))) throw new LostRace();
      return result;
    });
    return outcome;
  } catch (error) {
    if (!(error instanceof LostRace)) throw error;
    // A concurrent request with the same key committed first: answer as it did.
    const winner = await findIdempotent(db, scope);
    if (!winner) throw new ApiError('internal_error', 'idempotency record vanished');
    return replay(reply, winner, requestHash);
  }
}

/** Sends an outcome, first-time or replayed (its body was already shaped by the route). */
export function sendOutcome(reply: FastifyReply, outcome: Outcome): FastifyReply {
  return reply.code(outcome.statusCode).send(outcome.body);
}
