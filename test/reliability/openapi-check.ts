import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

/**
 * Judges one HTTP exchange against the OpenAPI document the service serves: the status must be one
 * the operation documents, the body must match its schema, and every error must be the envelope
 * `{"error": {"code", "message", "details"}}`. Shared by the suite (test/reliability-api.test.ts)
 * and the long run (bench/reliability/r4-api-fuzz.ts).
 */

export interface Exchange {
  method: string;
  /** The path as sent (query string included or not). */
  url: string;
  status: number;
  contentType: string | undefined;
  body: string;
}

interface OpenApiDoc {
  paths: Record<string, Record<string, { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }> }>>;
}

interface Operation {
  method: string;
  template: string;
  pattern: RegExp;
  statuses: Map<string, ValidateFunction | null>;
}

// Browser pages (and `/`, which sends browsers to the docs) answer in HTML, their errors too: only "never a 5xx" applies.
const HTML_PAGES = /^\/($|(dashboard|docs)(\/|$))/;
// Served outside the API's document on purpose (probes, docs, the document itself, metrics).
const UNDOCUMENTED_ROUTES = /^\/(healthz|readyz|metrics|docs(\/.*)?|api\/v1\/openapi\.json)$/;

const escapePointer = (s: string): string => s.replace(/~/g, '~0').replace(/\//g, '~1');

export interface ResponseChecker {
  /** Problems with this exchange; empty when it is as documented. */
  check(exchange: Exchange): string[];
  /** Templates of every documented operation, e.g. `GET /api/v1/status/{message_id}`. */
  operations: { method: string; template: string }[];
}

export function createResponseChecker(doc: unknown): ResponseChecker {
  const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true });
  (addFormats as unknown as (a: Ajv2020) => void)(ajv);
  ajv.addSchema(doc as object, 'openapi.json');
  const operations: Operation[] = [];
  for (const [template, ops] of Object.entries((doc as OpenApiDoc).paths)) {
    const pattern = new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '[^/]+')}/?$`);
    for (const [method, op] of Object.entries(ops)) {
      const statuses = new Map<string, ValidateFunction | null>();
      for (const [status, response] of Object.entries(op.responses ?? {})) {
        const schema = response.content?.['application/json']?.schema;
        statuses.set(
          status,
          schema === undefined
            ? null
            : ajv.compile({ $ref: `openapi.json#/paths/${escapePointer(template)}/${method}/responses/${status}/content/application~1json/schema` }),
        );
      }
      operations.push({ method: method.toUpperCase(), template, pattern, statuses });
    }
  }

  function envelopeProblems(body: unknown): string[] {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return ['error body is not a JSON object'];
    const keys = Object.keys(body);
    if (keys.length !== 1 || keys[0] !== 'error') return [`error body has keys ${JSON.stringify(keys)}, not ["error"]`];
    const error = (body as { error: unknown }).error;
    if (typeof error !== 'object' || error === null) return ['error is not an object'];
    const inner = Object.keys(error).sort();
    if (JSON.stringify(inner) !== '["code","details","message"]') return [`error has keys ${JSON.stringify(inner)}`];
    const e = error as { code: unknown; message: unknown; details: unknown };
    const problems: string[] = [];
    if (typeof e.code !== 'string' || e.code === '') problems.push('error.code is not a non-empty string');
    if (typeof e.message !== 'string' || e.message === '') problems.push('error.message is not a non-empty string');
    if (!(e.details === null || (typeof e.details === 'object' && !Array.isArray(e.details)))) problems.push('error.details is neither an object nor null');
    return problems;
  }

  return {
    operations: operations.map(({ method, template }) => ({ method, template })),
    check(x) {
      const problems: string[] = [];
      const raw = x.url.split('?')[0] ?? '';
      // What clients and the router see: dot segments resolved (`/a/./b` is `/a/b`).
      let path = raw;
      try {
        path = new URL(raw, 'http://x.invalid').pathname;
      } catch {
        // keep the raw path
      }
      if (HTML_PAGES.test(raw)) return x.status >= 500 && x.status !== 503 ? [`${x.status} answer`] : [];
      const isJson = /^application\/json/i.test(x.contentType ?? '');
      let parsed: unknown;
      if (isJson && x.method !== 'HEAD') {
        try {
          parsed = JSON.parse(x.body);
        } catch {
          return [...problems, 'Content-Type says JSON but the body does not parse'];
        }
      }
      if (x.status >= 400 && x.method !== 'HEAD') {
        if (!isJson) return [...problems, `error answer ${x.status} is not JSON (${x.contentType ?? 'no Content-Type'})`];
        problems.push(...envelopeProblems(parsed));
      }
      if (UNDOCUMENTED_ROUTES.test(path)) {
        if (x.status >= 500 && x.status !== 503) problems.push(`${x.status} answer`);
        return problems;
      }
      // Clients may resolve dot segments (`/a/./b`) or send them raw to the router: either reading may be the one answered.
      const judgeAt = (at: string): string[] => {
        const out: string[] = [];
        // A malformed percent-encoding never reaches a route: the router answers it (400) before any operation runs.
        let wellEncoded = true;
        try {
          decodeURIComponent(at);
        } catch {
          wellEncoded = false;
        }
        // HEAD is answered by the GET operation, without a body.
        const method = x.method === 'HEAD' ? 'GET' : x.method;
        const op = wellEncoded ? operations.find((o) => o.method === method && o.pattern.test(at)) : undefined;
        if (!op) {
          if (x.status >= 500 && x.status !== 503) out.push(`${x.status} answer`);
          // No operation: only "no such route" answers (or the auth and limit checks that run before routing) fit.
          if (x.status < 400) out.push(`${x.method} ${at} is not documented yet answered ${x.status}`);
          return out;
        }
        const status = String(x.status);
        // A 500 is a bug whatever the document says; other 5xx only where the operation documents them.
        if (x.status === 500) out.push('500 answer');
        if (!op.statuses.has(status)) {
          out.push(`${op.method} ${op.template} answered ${status}, which its document does not list`);
          return out;
        }
        if (x.method === 'HEAD') return out;
        const validate = op.statuses.get(status);
        if (validate && !validate(parsed)) {
          out.push(`${op.method} ${op.template} ${status} body does not match its schema: ${ajvErrors(validate)}`);
        }
        return out;
      };
      const asSent = judgeAt(raw);
      const resolved = path === raw || asSent.length === 0 ? asSent : judgeAt(path);
      problems.push(...(resolved.length < asSent.length ? resolved : asSent));
      return problems;
    },
  };
}

function ajvErrors(validate: ValidateFunction): string {
  return (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''}`).join('; ');
}
