import type { FastifyReply, FastifyRequest } from 'fastify';
import { UNAUTHENTICATED_REQUESTS_PER_MINUTE, READ_REQUESTS_PER_MINUTE } from '../core/plans.js';
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

/** One request without a valid key, from the caller IP's bucket (a brute-force guard): headers set, the 429 when spent. */
async function drawFromIpBucket(services: Services, request: FastifyRequest, reply: FastifyReply, now: number): Promise<FastifyReply | undefined> {
  const decision = await services.rateLimiter.consume('ip', request.ip, UNAUTHENTICATED_REQUESTS_PER_MINUTE, now);
  reply.headers(rateHeaders(decision));
  return decision.allowed ? undefined : sendError(reply, rateLimited(decision));
}

/** For /api/v1 routes that need no key (the OpenAPI document): limited and labelled like any keyless request. */
export function limitByIp(services: Services) {
  return (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => drawFromIpBucket(services, request, reply, Date.now());
}

/**
 * The gate in front of every /api/v1 route: resolves the key, draws from the right rate-limit bucket
 * and puts the five limit headers on the reply, whatever the answer turns out to be.
 */
export function authenticate(services: Services) {
  const lastTouched = new Map<string, number>();

  return async function authenticateRequest(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    request.caller = null;
    const now = Date.now();
    const match = BEARER.exec(request.headers.authorization ?? '');
    const caller = match ? await services.callers.resolve(match[1]!, now) : undefined;

    if (!caller) {
      const limited = await drawFromIpBucket(services, request, reply, now);
      if (limited) return limited;
      const message = match ? 'invalid, revoked or expired API key' : 'missing API key: send Authorization: Bearer <API_KEY>';
      return sendError(reply, new ApiError('unauthorized', message));
    }

    request.caller = caller;
    const bucket = request.routeOptions.config.bucket ?? 'read';
    const limit = bucket === 'send' ? caller.limits.sendPerMinute : READ_REQUESTS_PER_MINUTE;
    const [decision, usage] = await Promise.all([
      services.rateLimiter.consume(bucket, caller.keyId, limit, now),
      services.callers.usage(caller, now),
    ]);
    reply.headers(rateHeaders(decision));
    setUsageHeaders(reply, usage);

    if ((lastTouched.get(caller.keyId) ?? 0) < now - TOUCH_INTERVAL_MS) {
      lastTouched.set(caller.keyId, now);
      touchKey(services.db.kysely, caller.keyId, now).catch((err: unknown) => request.log.warn({ err }, 'could not record key use'));
    }
    if (!decision.allowed) return sendError(reply, rateLimited(decision));
    return undefined;
  };
}
