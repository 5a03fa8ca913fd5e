import type { FastifyReply, FastifyRequest } from 'fastify';
import { UNAUTHENTICATED_REQUESTS_PER_MINUTE, READ_REQUESTS_PER_MINUTE } from '../core/plans.js';
import { scopeAllows, type KeyScope } from '../core/key-scopes.js';
import { touchKey } from '../store/keys.js';
import type { Services } from '../services.js';
import type { Caller, UsageSnapshot } from './caller.js';
import { ApiError, sendError } from './errors.js';
import type { Bucket, RateDecision } from './rate-limiter.js';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null;
  }
  interface FastifyContextConfig {
    /** The rate-limit bucket a route draws from; `read` when unset. */
    bucket?: Bucket;
    /** The key scope a route needs (core/key-scopes.ts); when unset, `read` for GET and `full` for the rest. */
    scope?: KeyScope;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;
// last_used_at is for people reading `keys list`: a write per minute per key is plenty.
const TOUCH_INTERVAL_MS = 60_000;

export function rateHeaders(decision: RateDecision): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(decision.limit),
    'X-RateLimit-Remaining': String(decision.remaining),
    'X-RateLimit-Reset': String(decision.resetAt),
  };
}

export function setUsageHeaders(reply: FastifyReply, usage: UsageSnapshot): void {
  reply.header('X-Usage-Limit', String(usage.limit));
  reply.header('X-Usage-Remaining', String(usage.remaining));
}

function rateLimited(decision: RateDecision): ApiError {
  return new ApiError(
    'rate_limited',
    `rate limit of ${decision.limit} requests per minute exceeded; retry after ${decision.retryAfter} s`,
    { limit: decision.limit, window: '1m', retry_after: decision.retryAfter },
    { 'Retry-After': String(decision.retryAfter) },
  );
}

/** The scope a route asks for: its own, else `read` for GET and HEAD and `full` for anything that changes something. */
function neededScope(request: FastifyRequest): KeyScope {
  const declared = request.routeOptions.config.scope;
  if (declared !== undefined) return declared;
  return request.method === 'GET' || request.method === 'HEAD' ? 'read' : 'full';
}

const SCOPE_WORDS: Record<KeyScope, string> = {
  read: 'it may only read (GET requests)',
  send: 'it may send, cancel and read',
  full: 'it may do everything',
};

function insufficientScope(scope: KeyScope, needed: KeyScope, request: FastifyRequest): ApiError {
  return new ApiError(
    'insufficient_scope',
    `this key's scope is ${scope}: ${SCOPE_WORDS[scope]}; ${request.method} ${request.url.split('?')[0]} needs a key of scope ${needed}`,
    { scope, required_scope: needed },
  );
}

/**
 * One request without a valid key, from the caller IP's bucket (a brute-force guard): headers set, the
 * 429 sent when spent. Says whether it answered. (Never resolves to the reply itself: a reply is
 * thenable, so awaiting it waits for the response to finish and gives undefined, which read as "not
 * refused" and sent a 401 after the 429.)
 */
async function drawFromIpBucket(services: Services, request: FastifyRequest, reply: FastifyReply, now: number): Promise<boolean> {
  const decision = await services.rateLimiter.consume('ip', request.ip, UNAUTHENTICATED_REQUESTS_PER_MINUTE, now);
  reply.headers(rateHeaders(decision));
  if (decision.allowed) return false;
  sendError(reply, rateLimited(decision));
  return true;
}

/** For /api/v1 routes that need no key (the OpenAPI document): limited and labelled like any keyless request. */
export function limitByIp(services: Services) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> =>
    (await drawFromIpBucket(services, request, reply, Date.now())) ? reply : undefined;
}

/**
 * The gate in front of every /api/v1 route: resolves the key, draws from the right rate-limit bucket
 * and puts the five limit headers on the reply, whatever the answer turns out to be. Most requests
 * come from a key, a count and a bucket this process already holds in memory: those pass the gate at
 * once, without a promise (a hook with `done`); the others wait for storage or Redis.
 */
export function authenticate(services: Services) {
  const lastTouched = new Map<string, number>();

  /** A known key: its bucket, its headers; the reply when refused, undefined when it may go on. */
  function admit(request: FastifyRequest, reply: FastifyReply, caller: Caller, now: number): FastifyReply | undefined | Promise<FastifyReply | undefined> {
    request.caller = caller;
    const bucket = request.routeOptions.config.bucket ?? 'read';
    const limit = bucket === 'send' ? caller.limits.sendPerMinute : READ_REQUESTS_PER_MINUTE;
    const decision = services.rateLimiter.consume(bucket, caller.keyId, limit, now);
    const usage = services.callers.usage(caller, now);
    if (decision instanceof Promise || usage instanceof Promise) {
      return Promise.all([decision, usage]).then(([decided, counted]) => answer(request, reply, caller, decided, counted, now));
    }
    return answer(request, reply, caller, decision, usage, now);
  }

  function answer(request: FastifyRequest, reply: FastifyReply, caller: Caller, decision: RateDecision, usage: UsageSnapshot, now: number): FastifyReply | undefined {
    reply.headers(rateHeaders(decision));
    setUsageHeaders(reply, usage);
    if ((lastTouched.get(caller.keyId) ?? 0) < now - TOUCH_INTERVAL_MS) {
      lastTouched.set(caller.keyId, now);
      touchKey(services.db.kysely, caller.keyId, now).catch((err: unknown) => request.log.warn({ err }, 'could not record key use'));
    }
    if (!decision.allowed) return sendError(reply, rateLimited(decision));
    // After the rate limit: a key that keeps asking beyond its scope still spends its requests.
    const needed = neededScope(request);
    return scopeAllows(caller.scope, needed) ? undefined : sendError(reply, insufficientScope(caller.scope, needed, request));
  }

  /** No valid key: the caller IP's bucket, then 401. */
  async function refuse(request: FastifyRequest, reply: FastifyReply, keyGiven: boolean, now: number): Promise<FastifyReply> {
    if (await drawFromIpBucket(services, request, reply, now)) return reply;
    // A header without the Bearer scheme (the bare key, "Token …") is a key sent the wrong way, not a missing one.
    const header = request.headers.authorization?.trim() ?? '';
    const message = keyGiven
      ? 'invalid, revoked or expired API key'
      : header !== ''
        ? 'the Authorization header must be "Bearer <API_KEY>" (the word Bearer, a space, then the key)'
        : 'missing API key: send Authorization: Bearer <API_KEY>';
    return sendError(reply, new ApiError('unauthorized', message));
  }

  return function authenticateRequest(request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): Promise<FastifyReply | undefined> | undefined {
    request.caller = null;
    const now = Date.now();
    const match = BEARER.exec(request.headers.authorization ?? '');
    const found = match ? services.callers.resolve(match[1]!, now) : undefined;
    const outcome =
      found instanceof Promise
        ? found.then((caller) => (caller ? admit(request, reply, caller, now) : refuse(request, reply, match !== null, now)))
        : found
          ? admit(request, reply, found, now)
          : refuse(request, reply, match !== null, now);
    // Fastify waits for a promise (one that gives the reply back has answered); otherwise the request
    // goes on at once, unless it was answered here.
    if (outcome instanceof Promise) return outcome;
    if (outcome === undefined) done();
    return undefined;
  };
}
