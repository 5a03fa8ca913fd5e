import fs from 'node:fs';
import net from 'node:net';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseProxyUrl, proxyUrlOf } from './core/proxy-url.js';

/**
 * An account's default hard cap, in percent of a process's slots: a lone bulk sender keeps most of the
 * throughput (64 slots: 48 for it, 16 that any other account finds free at once).
 */
export const DEFAULT_ACCOUNT_SHARE_PERCENT = 75;

/**
 * The folder of the voicenote installation (where package.json is): a relative DATA_DIR, and the
 * default `data`, are resolved against it, so every command finds the service's database whatever
 * the current directory is. (This module sits one level below it, in src/ or in dist/.)
 */
export const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Everything the service reads from its environment, typed and validated once at start-up. */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  /** `postgres://…` selects PostgreSQL; undefined means SQLite in `dataDir`. */
  databaseUrl: string | undefined;
  redisUrl: string | undefined;
  /** Raw SECRET_KEY value; undefined means "generate one into dataDir" (SQLite only). */
  secretKey: Buffer | undefined;
  telegramApiRoot: string;
  /** The api_id / api_hash of an application registered at my.telegram.org: what live Telegram accounts log in with. */
  telegramApiId: number | undefined;
  telegramApiHash: string | undefined;
  linkedinApiRoot: string;
  /** WHATSAPP_WEB_SOCKET_URL: WhatsApp Web's socket (Baileys' waWebSocketUrl), where a WhatsApp session connects and its proxy is checked. */
  whatsappWebSocketUrl: string;
  /** TELEGRAM_DC_ADDRESS: host:port of the data centre a new Telegram account first connects to, and where its proxy is checked (GramJS's default). */
  telegramDcAddress: { host: string; port: number };
  /** OUTBOUND_PROXY: the proxy of every sender without one of its own (docs/proxies.md); credentials included, never logged. */
  outboundProxy: string | undefined;
  audioAllowPrivateUrls: boolean;
  ffmpegPath: string | undefined;
  logLevel: string;
  sandboxLatencyMs: number;
  sandboxAutoScanSeconds: number;
  /** Messages one worker process delivers at once. */
  workerConcurrency: number;
  /** Audio conversions one worker process runs at once (the rest wait their turn, off the delivery slots). */
  maxConcurrentConversions: number;
  /** The most of a worker's (and a webhook sender's) slots one account may hold, in percent. */
  workerAccountShare: number;
  /** PostgreSQL connections one process may hold. */
  databasePoolSize: number;
  /** How long a stopping worker lets deliveries in hand finish before aborting them. */
  shutdownGraceMs: number;
  /** After the grace, how long aborts and closing may take before the process ends regardless (exit 1). */
  shutdownMarginMs: number;
  /** Settled messages older than this many days are deleted; 0 keeps them for ever. */
  messageRetentionDays: number;
  /**
   * Which proxies' X-Forwarded-For to believe for the client address: false (none, the default),
   * true (any), a hop count, or a list of addresses / CIDR ranges.
   */
  trustProxy: boolean | number | string[];
  /** A listener of its own serving only GET /metrics; undefined: none. */
  metricsPort: number | undefined;
  /** Bearer token for /metrics: required on the metrics listener when set, and enables /metrics on the API's port. */
  metricsToken: string | undefined;
  /** Mean event-loop delay (ms) over which requests are shed with 503; 0 turns shedding off. */
  maxEventLoopDelayMs: number;
  /** POST /mcp, the MCP server over Streamable HTTP (MCP_ENABLED): off unless an operator turns it on. */
  mcpEnabled: boolean;
  /** The owner account's dashboard email, used once: when the first start creates the owner. */
  ownerEmail: string | undefined;
  /** log2 of scrypt's N for new dashboard password hashes (src/store/password-hash.ts). */
  passwordHashCost: number;
  /** Sockets and their timeouts (src/api/http-limits.ts): what one slow or idle client may hold. */
  http: HttpLimits;
}

export interface HttpLimits {
  /** The request line and headers must have arrived within this (ms). */
  headersTimeoutMs: number;
  /** The whole request, body included, must have arrived within this (ms). */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this (ms). */
  keepAliveTimeoutMs: number;
  /** A keep-alive connection is closed after this many requests. */
  maxRequestsPerSocket: number;
  /** Open client connections at most; undefined: the default (see maxConnectionsFor). */
  maxConnections: number | undefined;
  /** Open connections from one client address at most; 0: no such cap; undefined: the default (see maxPerAddressFor). */
  maxConnectionsPerAddress: number | undefined;
}

/** A bad configuration value: its message is one line that names the variable. */
export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

// A delivery mostly waits (storage, the platform's answer), and a worker with a backlog claims a
// quarter of its slots at a time: 64 slots make claims and outcome batches of about twice the notes
// that 32 did, so each note pays half of their statements and commits. Measured on the delivery bench
// (BENCHMARKS.md, 2026-11-28): 32 → 64 took one worker from about 1,100 to 1,250 notes a second on
// SQLite and from about 700 to 860 on PostgreSQL, for 2 MiB more memory. A delivery holds no database
// connection while it waits on the platform, so the pool (10) is not what bounds this.
export const DEFAULT_WORKER_CONCURRENCY = 64;

/** MAX_CONCURRENT_CONVERSIONS when unset: one conversion per core. */
export function defaultConcurrentConversions(cores = availableParallelism()): number {
  return Math.max(1, cores);
}

/**
 * PASSWORD_HASH_COST: log2 of scrypt's N for dashboard passwords. 17 is OWASP's (about a second of CPU
 * and 128 MiB a hash); never under 14, the cost hashes were made with before, nor over 20.
 */
export const DEFAULT_PASSWORD_HASH_COST = 17;
export const MIN_PASSWORD_HASH_COST = 14;
export const MAX_PASSWORD_HASH_COST = 20;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

type Env = Record<string, string | undefined>;

function text(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `expected a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  const lowered = raw.toLowerCase();
  if (['true', '1', 'yes'].includes(lowered)) return true;
  if (['false', '0', 'no'].includes(lowered)) return false;
  throw new ConfigError(name, `expected true or false, got "${raw}"`);
}

/** A URL setting whose scheme is one of `schemes`; `kind` names them in the error ("an http or https URL"). */
function urlSetting(env: Env, name: string, fallback: string, schemes: readonly string[], kind: string): string {
  const raw = text(env, name) ?? fallback;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(name, `not a URL: "${raw}"`);
  }
  if (!schemes.some((scheme) => url.protocol === `${scheme}:`)) throw new ConfigError(name, `must be ${kind}`);
  return raw;
}

function httpRoot(env: Env, name: string, fallback: string): string {
  return urlSetting(env, name, fallback, ['http', 'https'], 'an http or https URL').replace(/\/+$/, '');
}

function webSocketUrl(env: Env, name: string, fallback: string): string {
  return urlSetting(env, name, fallback, ['ws', 'wss'], 'a ws or wss URL');
}

// GramJS's own first data centre (telegram/client/telegramBaseClient.js, DEFAULT_IPV4_IP, port 80 without WSS).
function hostPort(env: Env, name: string, fallback: string): { host: string; port: number } {
  const raw = text(env, name) ?? fallback;
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:\s]+):(\d{1,5})$/.exec(raw);
  const port = Number(match?.[2]);
  if (!match || port < 1 || port > 65535) throw new ConfigError(name, `must be host:port, e.g. ${fallback}`);
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
}

// Its syntax only (the address of the operator's own choice is not checked against private ranges);
// the message never repeats the value, which may hold a password.
function outboundProxy(env: Env): string | undefined {
  const raw = text(env, 'OUTBOUND_PROXY');
  if (raw === undefined) return undefined;
  const proxy = parseProxyUrl(raw);
  if ('problem' in proxy) throw new ConfigError('OUTBOUND_PROXY', proxy.problem);
  return proxyUrlOf(proxy);
}

// A transcoder that is not there would fail every delivery for an hour of retries: refuse it at start.
function executable(env: Env, name: string): string | undefined {
  const raw = text(env, name);
  if (raw === undefined) return undefined;
  // A bare name ("ffmpeg") is looked up on PATH, as a shell would.
  const candidates = raw.includes('/') ? [raw] : (env.PATH ?? '').split(path.delimiter).filter(Boolean).map((dir) => path.join(dir, raw));
  const found = candidates.find((candidate) => {
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return fs.statSync(candidate).isFile();
    } catch {
      return false;
    }
  });
  if (found === undefined) throw new ConfigError(name, `not an executable file: "${raw}"`);
  return raw;
}

/** Accepts 32 bytes written as 64 hex characters or as base64. */
export function parseSecretKey(raw: string, name = 'SECRET_KEY'): Buffer {
  const value = raw.trim();
  if (/^[0-9a-fA-F]{64}$/.test(value)) return Buffer.from(value, 'hex');
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(value)) {
    const decoded = Buffer.from(value, 'base64');
    if (decoded.length === 32) return decoded;
  }
  throw new ConfigError(name, 'must be 32 bytes written as 64 hex characters or as base64');
}

/** The folder DATA_DIR names: absolute as given, relative to the installation folder otherwise. */
export function resolveDataDir(raw: string | undefined): string {
  return path.resolve(PACKAGE_ROOT, raw ?? 'data');
}

const PROXY_RANGE_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

function proxyEntry(entry: string): boolean {
  if (PROXY_RANGE_NAMES.includes(entry)) return true;
  const [address, prefix, extra] = entry.split('/');
  if (extra !== undefined || address === undefined) return false;
  const family = net.isIP(address);
  if (family === 0) return false;
  if (prefix === undefined) return true;
  if (!/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (family === 4 ? 32 : 128);
}

function trustProxy(env: Env): boolean | number | string[] {
  const raw = text(env, 'TRUST_PROXY');
  if (raw === undefined) return false;
  const lowered = raw.toLowerCase();
  if (['false', 'no'].includes(lowered)) return false;
  if (['true', 'yes'].includes(lowered)) return true;
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops === 0) return false;
    if (hops < 1 || hops > 10) throw new ConfigError('TRUST_PROXY', `a hop count must be between 1 and 10, got ${hops}`);
    return hops;
  }
  const entries = raw.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  const bad = entries.find((entry) => !proxyEntry(entry));
  if (bad !== undefined) {
    throw new ConfigError('TRUST_PROXY', `expected true, false, a hop count, or proxy addresses/CIDR ranges separated by commas; "${bad}" is none of these`);
  }
  return entries;
}

// Long enough that guessing is hopeless; printable and without spaces so it fits a header as is.
function metricsToken(env: Env): string | undefined {
  const raw = text(env, 'METRICS_TOKEN');
  if (raw === undefined) return undefined;
  if (!/^[\x21-\x7e]{16,256}$/.test(raw)) throw new ConfigError('METRICS_TOKEN', 'must be 16 to 256 printable characters without spaces');
  return raw;
}

export function loadConfig(env: Env = process.env): Config {
  const databaseUrl = text(env, 'DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL', 'must start with postgres:// or postgresql:// (leave it unset for SQLite)');
  }
  const redisUrl = text(env, 'REDIS_URL');
  if (redisUrl !== undefined && !/^rediss?:\/\//.test(redisUrl)) {
    throw new ConfigError('REDIS_URL', 'must start with redis:// or rediss://');
  }
  const rawSecret = text(env, 'SECRET_KEY');
  const secretKey = rawSecret === undefined ? undefined : parseSecretKey(rawSecret);
  if (databaseUrl !== undefined && secretKey === undefined) {
    throw new ConfigError('SECRET_KEY', 'is required when DATABASE_URL is set (32 bytes, hex or base64)');
  }
  const logLevel = (text(env, 'LOG_LEVEL') ?? 'info').toLowerCase();
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);

  return {
    port: integer(env, 'PORT', 3000, 0, 65535),
    host: text(env, 'HOST') ?? '0.0.0.0',
    dataDir: resolveDataDir(text(env, 'DATA_DIR')),
    databaseUrl,
    redisUrl,
    secretKey,
    telegramApiRoot: httpRoot(env, 'TELEGRAM_API_ROOT', 'https://api.telegram.org'),
    telegramApiId: text(env, 'TELEGRAM_API_ID') !== undefined ? integer(env, 'TELEGRAM_API_ID', 0, 1, 2_147_483_647) : undefined,
    telegramApiHash: text(env, 'TELEGRAM_API_HASH'),
    linkedinApiRoot: httpRoot(env, 'LINKEDIN_API_ROOT', 'https://www.linkedin.com'),
    whatsappWebSocketUrl: webSocketUrl(env, 'WHATSAPP_WEB_SOCKET_URL', 'wss://web.whatsapp.com/ws/chat'),
    telegramDcAddress: hostPort(env, 'TELEGRAM_DC_ADDRESS', '149.154.167.91:80'),
    outboundProxy: outboundProxy(env),
    // ALLOW_PRIVATE_URLS governs audio and webhook URLs alike; its old name is still read when it is unset.
    audioAllowPrivateUrls: text(env, 'ALLOW_PRIVATE_URLS') !== undefined ? boolean(env, 'ALLOW_PRIVATE_URLS', false) : boolean(env, 'AUDIO_ALLOW_PRIVATE_URLS', false),
    ffmpegPath: executable(env, 'FFMPEG_PATH'),
    logLevel,
    sandboxLatencyMs: integer(env, 'SANDBOX_LATENCY_MS', 300, 0, 600_000),
    sandboxAutoScanSeconds: integer(env, 'SANDBOX_AUTO_SCAN_SECONDS', 3, 0, 86_400),
    workerConcurrency: integer(env, 'WORKER_CONCURRENCY', DEFAULT_WORKER_CONCURRENCY, 1, 1_000),
    maxConcurrentConversions: integer(env, 'MAX_CONCURRENT_CONVERSIONS', defaultConcurrentConversions(), 1, 256),
    workerAccountShare: integer(env, 'WORKER_ACCOUNT_SHARE', DEFAULT_ACCOUNT_SHARE_PERCENT, 1, 100),
    databasePoolSize: integer(env, 'DATABASE_POOL_SIZE', 10, 1, 1_000),
    shutdownGraceMs: integer(env, 'SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    shutdownMarginMs: integer(env, 'SHUTDOWN_MARGIN_MS', 15_000, 0, 600_000),
    messageRetentionDays: integer(env, 'MESSAGE_RETENTION_DAYS', 90, 0, 36_500),
    trustProxy: trustProxy(env),
    metricsPort: text(env, 'METRICS_PORT') === undefined ? undefined : integer(env, 'METRICS_PORT', 0, 1, 65535),
    metricsToken: metricsToken(env),
    maxEventLoopDelayMs: integer(env, 'MAX_EVENT_LOOP_DELAY_MS', 1000, 0, 60_000),
    mcpEnabled: boolean(env, 'MCP_ENABLED', false),
    ownerEmail: ownerEmail(env),
    passwordHashCost: integer(env, 'PASSWORD_HASH_COST', DEFAULT_PASSWORD_HASH_COST, MIN_PASSWORD_HASH_COST, MAX_PASSWORD_HASH_COST),
    http: httpLimits(env),
  };
}

function ownerEmail(env: Env): string | undefined {
  const raw = text(env, 'OWNER_EMAIL');
  if (raw === undefined) return undefined;
  if (raw.length > 320 || !/^[^\s@]+@[^\s@]+$/.test(raw)) throw new ConfigError('OWNER_EMAIL', `must be an email address, got "${raw}"`);
  return raw;
}

/** HTTP_KEEP_ALIVE_TIMEOUT_MS when unset (see httpLimits). */
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 360_000;

function httpLimits(env: Env): HttpLimits {
  const headersTimeoutMs = integer(env, 'HTTP_HEADERS_TIMEOUT_MS', 10_000, 100, 600_000);
  const requestTimeoutMs = integer(env, 'HTTP_REQUEST_TIMEOUT_MS', 30_000, 100, 600_000);
  // Node refuses a headers timeout longer than the request's: say so in the configuration's words.
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError('HTTP_HEADERS_TIMEOUT_MS', `must not be longer than HTTP_REQUEST_TIMEOUT_MS (${requestTimeoutMs}), got ${headersTimeoutMs}`);
  }
  return {
    headersTimeoutMs,
    requestTimeoutMs,
    // Longer than the idle timeouts of the proxies and clients that reuse connections (nginx's upstream
    // 60 s, Caddy's 2 min, browsers' 5 min, load balancers 60–350 s): the server must not close a
    // connection a client may be writing its next request onto (that request then fails with no
    // answer, seen as a 502 behind a proxy). Fastify's own default (72 s) is there for the same reason.
    // The headers timeout need not be above it: Node counts it from a request's first byte, not from
    // the connection's idle start (http-hardening.test.ts shows it).
    keepAliveTimeoutMs: integer(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', DEFAULT_KEEP_ALIVE_TIMEOUT_MS, 100, 3_600_000),
    // 0: no limit. Node answers a request past the limit with 503 instead of closing, so a client that
    // sends its next request before it reads `Connection: close` (a pipelining load generator) gets errors.
    maxRequestsPerSocket: integer(env, 'HTTP_MAX_REQUESTS_PER_SOCKET', 0, 0, 1_000_000),
    maxConnections: text(env, 'HTTP_MAX_CONNECTIONS') === undefined ? undefined : integer(env, 'HTTP_MAX_CONNECTIONS', 0, 1, 1_000_000),
    maxConnectionsPerAddress:
      text(env, 'HTTP_MAX_CONNECTIONS_PER_ADDRESS') === undefined ? undefined : integer(env, 'HTTP_MAX_CONNECTIONS_PER_ADDRESS', 0, 0, 1_000_000),
  };
}
