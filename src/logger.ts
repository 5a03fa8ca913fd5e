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

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, destination);
}
