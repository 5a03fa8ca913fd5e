/**
 * What the OpenAPI document says besides the route schemas: each response named by what it means
 * (@fastify/swagger writes "Default Response" for a schema without a description), for the UI and
 * for generated clients alike.
 */

/** Error statuses by the codes of the API's error table (docs/api.md, "Errors"). */
const RESPONSE_NAMES: Record<string, string> = {
  '200': 'OK',
  '201': 'Created',
  '202': 'Accepted: queued, the outcome comes later',
  '204': 'No content',
  '400': 'invalid_request: malformed JSON or query, a missing or unknown field, or a wrong type (details.field)',
  '401': 'unauthorized: no API key, or one that is wrong or revoked',
  '402': 'quota_exceeded: the monthly quota is used up (reads keep working)',
  '403':
    "insufficient_scope: the key's scope (read, send or full) does not allow this request (details.scope, details.required_scope); or sender_not_allowed: a key limited to named senders used as another sender (POST /send, POST /recipients/check) or canceling another sender's note (details.scope, details.senders)",
  '404': 'not_found: unknown id, or an id of another account or environment',
  '409': 'idempotency_conflict (same Idempotency-Key, different body) or not_cancelable',
  '413': 'payload_too_large: request body over 64 KiB',
  '415': 'unsupported_media_type: a body that is not JSON',
  '422': 'invalid_parameter: a well-formed but invalid value (details.field), session_not_connected, or recipient_suppressed (the recipient is on the suppression list)',
  '429': 'rate_limited: wait Retry-After seconds',
  '500': 'internal_error: a bug on our side, never for bad input',
  '502': 'platform_error: the platform could not be reached while the request waited on it',
  '503': 'service_unavailable: draining, storage down or full; retry after Retry-After. Or not_configured: the operator has not configured what this needs (no Retry-After: retrying will not help)',
};

type Operation = { responses?: Record<string, { description?: string }> };
type Document = { paths?: Record<string, Record<string, Operation>> };

/** Every response still called "Default Response" gets its status's name. */
export function nameResponses<T>(document: T): T {
  for (const operations of Object.values((document as Document).paths ?? {})) {
    for (const operation of Object.values(operations)) {
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        if (response.description === undefined || response.description === 'Default Response') {
          response.description = RESPONSE_NAMES[status] ?? `HTTP ${status}`;
        }
      }
    }
  }
  return document;
}
