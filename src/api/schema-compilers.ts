import { AjvCompiler } from '@fastify/ajv-compiler';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';

/**
 * Fastify's validator and serializer builders, made once per process instead of once per server.
 *
 * Fastify compiles every route's request schemas (Ajv) and response schemas (fast-json-stringify) when
 * a server starts, with builders of its own per server: a second server in the same process compiles
 * the same schemas again. That is a few hundred milliseconds of CPU per server — nothing for the
 * service, which builds one, but most of the cost of every test app and benchmark that builds many.
 * Here what was compiled is kept for the process: by the shared schemas and options a server was built
 * with, then by the schema itself (the object, or else its JSON: routes build some schemas, such as
 * their error responses, anew for each server). A compiled function depends on nothing else: not the
 * route, the method or the status it serves.
 */
/** What Fastify hands a compiler: the schema, with the route it belongs to (unused by either compiler). */
type SchemaRoute = { schema?: unknown };
type Compile = (route: SchemaRoute) => unknown;

function compiledOnce(compile: Compile, pool: SchemaPool): Compile {
  return (route) => {
    const schema = route.schema as object;
    let compiled = pool.byObject.get(schema);
    if (compiled) return compiled;
    const json = JSON.stringify(schema);
    compiled = pool.byJson.get(json);
    if (!compiled) {
      compiled = compile(route);
      pool.byJson.set(json, compiled);
    }
    pool.byObject.set(schema, compiled);
    return compiled;
  };
}

interface SchemaPool {
  byObject: WeakMap<object, unknown>;
  byJson: Map<string, unknown>;
}

function poolFor(pools: Map<string, SchemaPool>, externalSchemas: unknown, options: unknown): SchemaPool {
  const key = JSON.stringify(externalSchemas) + JSON.stringify(options ?? {});
  let pool = pools.get(key);
  if (!pool) {
    pool = { byObject: new WeakMap(), byJson: new Map() };
    pools.set(key, pool);
  }
  return pool;
}

type ValidatorFactory = ReturnType<typeof AjvCompiler>;
type SerializerFactory = ReturnType<typeof SerializerSelector>;

const fastifyValidators: ValidatorFactory = AjvCompiler();
const fastifySerializers: SerializerFactory = SerializerSelector();
const validatorPools = new Map<string, SchemaPool>();
const serializerPools = new Map<string, SchemaPool>();

// The casts: @fastify/ajv-compiler types its compiler as taking the bare schema, while Fastify (and its
// code) hands it `{ schema, method, url, httpPart }`, as it does the serializer compiler.
const buildValidator = ((externalSchemas, options) =>
  compiledOnce(fastifyValidators(externalSchemas, options) as unknown as Compile, poolFor(validatorPools, externalSchemas, options))) as ValidatorFactory;

const buildSerializer = ((externalSchemas, serializerOpts) =>
  compiledOnce(fastifySerializers(externalSchemas, serializerOpts) as unknown as Compile, poolFor(serializerPools, externalSchemas, serializerOpts))) as SerializerFactory;

export const sharedSchemaCompilers = { buildValidator, buildSerializer };
