/**
 * The API document as Swagger UI is given it: OpenAPI 3.0 instead of 3.1. The UI reads 3.1 through a
 * far heavier parser (seconds of spinner on a small document; well under one second as 3.0). The
 * only 3.1 forms our schemas use are "or null" (`anyOf` with `{type: 'null'}`, `type: [T, 'null']`),
 * `const`, and a numeric `exclusiveMinimum`/`exclusiveMaximum`: written here as 3.0's `nullable: true`,
 * a one-value `enum`, and `minimum`/`maximum` with the boolean `exclusive…: true`. The served
 * /api/v1/openapi.json stays 3.1, for generators and clients.
 */
export function asOpenApi30<T>(document: T): T {
  const doc = convert(document) as Record<string, unknown>;
  doc.openapi = '3.0.3';
  return doc as T;
}

const isNullType = (v: unknown): boolean => typeof v === 'object' && v !== null && (v as Record<string, unknown>).type === 'null';

function convert(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(convert);
  if (typeof node !== 'object' || node === null) return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) out[key] = convert(value);
  // JSON Schema 2020-12 (3.1) writes the bound itself; 3.0 (draft 4) a bound and a boolean.
  for (const [exclusive, bound] of [['exclusiveMinimum', 'minimum'], ['exclusiveMaximum', 'maximum']] as const) {
    if (typeof out[exclusive] === 'number') {
      out[bound] = out[exclusive];
      out[exclusive] = true;
    }
  }
  if ('const' in out) {
    out.enum = [out.const];
    delete out.const;
  }
  if (Array.isArray(out.type) && out.type.includes('null')) {
    const rest = (out.type as unknown[]).filter((t) => t !== 'null');
    out.type = rest.length === 1 ? rest[0] : rest;
    out.nullable = true;
  }
  for (const combinator of ['anyOf', 'oneOf'] as const) {
    const options = out[combinator];
    if (!Array.isArray(options) || !options.some(isNullType)) continue;
    const rest = options.filter((o) => !isNullType(o));
    if (rest.length === 1 && typeof rest[0] === 'object' && rest[0] !== null && !('$ref' in rest[0])) {
      delete out[combinator];
      Object.assign(out, rest[0], { nullable: true });
    } else {
      out[combinator] = rest;
      out.nullable = true;
    }
  }
  return out;
}
