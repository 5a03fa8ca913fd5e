import type { FastifyInstance } from 'fastify';
import { ApiError, invalidRequest } from './errors.js';

/** No body the API takes nests deeper than a few levels; 32 leaves room and bounds the walk. */
export const MAX_BODY_DEPTH = 32;

type Walk = { nul: string } | { tooDeep: true } | null;

/**
 * The path (`a.b[2].c` style, as `details.field`) of the first string holding a NUL character, or that
 * the value nests deeper than MAX_BODY_DEPTH. Walks with a stack of its own, never by recursion: a
 * body of `{"a":{"a":…}}` 10,000 deep (60 KB) would otherwise overflow the call stack (a 500).
 */
function walk(root: unknown): Walk {
  const stack: Array<{ value: unknown; path: string; depth: number }> = [{ value: root, path: '', depth: 0 }];
  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return { nul: path };
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    if (depth >= MAX_BODY_DEPTH) return { tooDeep: true };
    // Pushed in reverse, so the first field in document order is looked at first.
    const inner: Array<{ value: unknown; path: string; depth: number }> = [];
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) inner.push({ value: value[i], path: `${path}[${i}]`, depth: depth + 1 });
    } else {
      for (const [key, item] of Object.entries(value)) {
        const keyPath = path ? `${path}.${key}` : key;
        if (key.includes('\u0000')) inner.push({ value: '\u0000', path: keyPath, depth: depth + 1 });
        else inner.push({ value: item, path: keyPath, depth: depth + 1 });
      }
    }
    for (let i = inner.length - 1; i >= 0; i--) stack.push(inner[i]!);
  }
  return null;
}

/**
 * PostgreSQL text cannot hold a NUL character: a query carrying one fails as a whole (a 500 on that
 * storage only). No id has one, so an id with a NUL is simply unknown (404); a query-string value
 * (a filter, a cursor) or a body string with one is the caller's error (400), on both storages alike.
 * A body nested deeper than MAX_BODY_DEPTH is refused here too (400), before anything else walks it.
 */
export function registerNulGuard(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    const params = request.params as Record<string, unknown> | undefined;
    if (params && walk(params) !== null) throw new ApiError('not_found', 'no such resource');
    const query = walk(request.query);
    if (query !== null) {
      if ('tooDeep' in query) throw invalidRequest(null, `the query string is nested deeper than ${MAX_BODY_DEPTH} levels`);
      throw invalidRequest(query.nul || null, `${query.nul || 'the query string'} must not contain a NUL character`);
    }
    const body = walk(request.body);
    if (body !== null) {
      if ('tooDeep' in body) throw invalidRequest(null, `the body is nested deeper than ${MAX_BODY_DEPTH} levels`);
      throw invalidRequest(body.nul || null, `${body.nul || 'the body'} must not contain a NUL character`);
    }
  });
}
