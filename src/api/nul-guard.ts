import type { FastifyInstance } from 'fastify';
import { ApiError, invalidRequest } from './errors.js';

/** The path (`a.b[2].c` style, as `details.field`) of the first string holding a NUL character, if any. */
function nulField(value: unknown, path: string): string | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nulField(value[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  if (typeof value === 'object' && value !== null) {
    for (const [key, inner] of Object.entries(value)) {
      const found = key.includes('\u0000') ? (path ? `${path}.${key}` : key) : nulField(inner, path ? `${path}.${key}` : key);
      if (found !== null) return found;
    }
  }
  return null;
}

/**
 * PostgreSQL text cannot hold a NUL character: a query carrying one fails as a whole (a 500 on that
 * storage only). No id has one, so an id with a NUL is simply unknown (404); a query-string value
 * (a filter, a cursor) or a body string with one is the caller's error (400), on both storages alike.
 */
export function registerNulGuard(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    const params = request.params as Record<string, unknown> | undefined;
    if (params && nulField(params, '') !== null) throw new ApiError('not_found', 'no such resource');
    const queryField = nulField(request.query, '');
    if (queryField !== null) throw invalidRequest(queryField || null, `${queryField || 'the query string'} must not contain a NUL character`);
    const field = nulField(request.body, '');
    if (field !== null) throw invalidRequest(field || null, `${field || 'the body'} must not contain a NUL character`);
  });
}
