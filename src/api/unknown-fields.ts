import { invalidRequest } from './errors.js';

/**
 * A request body's field this endpoint does not know is refused (400 invalid_request naming it in
 * details.field), as Stripe does: a misspelled optional field (`captoin`) would otherwise be dropped
 * without a word and the request do something else than asked. `prefix` names a nested object
 * ("session."). Bodies that are not objects are left to the schema's own checks.
 */
export function rejectUnknownFields(body: unknown, known: readonly string[], prefix = ''): void {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return;
  for (const name of Object.keys(body)) {
    if (known.includes(name)) continue;
    const field = `${prefix}${name}`;
    const takes = known.length === 0 ? `${prefix ? prefix.slice(0, -1) : 'this request'} takes no fields` : `${prefix ? `${prefix.slice(0, -1)} takes` : 'known fields are'} ${known.join(', ')}`;
    throw invalidRequest(field, `unknown field ${field}; ${takes}`);
  }
}
