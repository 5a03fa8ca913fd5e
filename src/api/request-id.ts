import type { IncomingMessage } from 'node:http';
import { randomBytesPooled } from '../core/random.js';

// What a caller's own id may look like: UUIDs, ULIDs, trace ids and the like; nothing that could
// break a header or a log line, and short enough to store.
const WELL_FORMED = /^[A-Za-z0-9._:-]{1,128}$/;

/** The caller's X-Request-Id when it is well-formed, else a fresh `req_` id. */
export function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  const value = Array.isArray(given) ? given[0] : given;
  if (value !== undefined && WELL_FORMED.test(value)) return value;
  return `req_${randomBytesPooled(12).toString('hex')}`;
}
