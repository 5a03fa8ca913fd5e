import pino, { type Logger } from 'pino';

// Secrets never reach a log line, wherever they sit in a logged object.
const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'session',
  'credentials',
  'secret',
  'bot_token',
  'li_at',
  'csrf_token',
  '*.session',
  '*.credentials',
  '*.secret',
  '*.bot_token',
  '*.li_at',
  '*.csrf_token',
  '*.authorization',
  'body.session',
];

// An API key pasted where it does not belong (a query string, a path) would reach the request log.
const API_KEY_IN_TEXT = /sk_(test|live)_[0-9A-Za-z]+/g;

/**
 * A request URL fit for a log line: query values are dropped (no route takes a secret there, but a
 * caller may put one: `?api_key=sk_live_…`), names are kept, and anything shaped like an API key is masked.
 */
export function loggableUrl(url: string): string {
  const q = url.indexOf('?');
  const scrubbed =
    q === -1
      ? url
      : `${url.slice(0, q)}?${url
          .slice(q + 1)
          .split('&')
          .map((pair) => {
            const eq = pair.indexOf('=');
            return eq === -1 ? pair : `${pair.slice(0, eq)}=[redacted]`;
          })
          .join('&')}`;
  return scrubbed.replace(API_KEY_IN_TEXT, 'sk_$1_[redacted]');
}

interface LoggedRequest {
  method?: string;
  url?: string;
  headers?: Record<string, unknown>;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

/** Fastify's own request serializer (same fields), with the URL made loggable. */
function serializeRequest(req: LoggedRequest): Record<string, unknown> {
  return {
    method: req.method,
    url: typeof req.url === 'string' ? loggableUrl(req.url) : req.url,
    version: req.headers?.['accept-version'],
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' }, serializers: { req: serializeRequest } }, destination);
}

const noop = (): void => undefined;

/**
 * `logger.child(bindings)`, made on first use. pino serializes and redacts a child's bindings when the
 * child is made (about 11 µs); the worker makes one per message, and most messages log nothing at the
 * level set. A level that is off answers with a no-op without making the child.
 */
export function lazyChild(logger: Logger, bindings: pino.Bindings): Logger {
  let child: Logger | undefined;
  return new Proxy(logger, {
    get(target, property) {
      if (typeof property === 'string' && property in target.levels.values && !target.isLevelEnabled(property)) return noop;
      child ??= target.child(bindings);
      const value: unknown = Reflect.get(child, property, child);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(child) : value;
    },
  });
}
