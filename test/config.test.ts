import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { ConfigError, defaultConcurrentConversions, loadConfig, PACKAGE_ROOT } from '../src/config.js';
import { CONFIG_VARIABLES, runCli } from './fixtures/cli-process.js';

const HEX_KEY = randomBytes(32).toString('hex');
const BASE64_KEY = randomBytes(32).toString('base64');

describe('loadConfig: the documented defaults', () => {
  test('an empty environment gives every documented default', () => {
    const config = loadConfig({});
    assert.deepEqual(config, {
      port: 3000,
      host: '0.0.0.0',
      dataDir: path.join(PACKAGE_ROOT, 'data'),
      databaseUrl: undefined,
      redisUrl: undefined,
      secretKey: undefined,
      telegramApiRoot: 'https://api.telegram.org',
      telegramApiId: undefined,
      telegramApiHash: undefined,
      linkedinApiRoot: 'https://www.linkedin.com',
      whatsappWebSocketUrl: 'wss://web.whatsapp.com/ws/chat',
      telegramDcAddress: { host: '149.154.167.91', port: 80 },
      audioAllowPrivateUrls: false,
      ffmpegPath: undefined,
      logLevel: 'info',
      sandboxLatencyMs: 300,
      sandboxAutoScanSeconds: 3,
      workerConcurrency: 64,
      maxConcurrentConversions: defaultConcurrentConversions(),
      workerAccountShare: 75,
      databasePoolSize: 10,
      shutdownGraceMs: 10_000,
      shutdownMarginMs: 15_000,
      messageRetentionDays: 90,
      trustProxy: false,
      metricsPort: undefined,
      metricsToken: undefined,
      outboundProxy: undefined,
      maxEventLoopDelayMs: 1000,
      http: { headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, keepAliveTimeoutMs: 360_000, maxRequestsPerSocket: 0, maxConnections: undefined, maxConnectionsPerAddress: undefined },
      ownerEmail: undefined,
      passwordHashCost: 17,
      mcpEnabled: false,
    });
  });

  test('empty strings count as unset', () => {
    const blank = Object.fromEntries(CONFIG_VARIABLES.map((name) => [name, '']));
    assert.deepEqual(loadConfig(blank), loadConfig({}));
  });
});

describe('loadConfig: values are read and typed', () => {
  test('every variable is taken from the environment', () => {
    const config = loadConfig({
      PORT: '8080',
      HOST: '127.0.0.1',
      DATA_DIR: 'some/dir',
      DATABASE_URL: 'postgres://user:pw@db.example:5432/voicenote',
      REDIS_URL: 'redis://cache.example:6379',
      SECRET_KEY: HEX_KEY,
      TELEGRAM_API_ROOT: 'http://127.0.0.1:8081/',
      LINKEDIN_API_ROOT: 'https://linkedin.example',
      AUDIO_ALLOW_PRIVATE_URLS: 'true',
      FFMPEG_PATH: process.execPath,
      LOG_LEVEL: 'debug',
      SANDBOX_LATENCY_MS: '0',
      SANDBOX_AUTO_SCAN_SECONDS: '0',
      WORKER_CONCURRENCY: '48',
      MAX_CONCURRENT_CONVERSIONS: '3',
      DATABASE_POOL_SIZE: '25',
      SHUTDOWN_GRACE_MS: '2500',
      SHUTDOWN_MARGIN_MS: '4000',
      HTTP_HEADERS_TIMEOUT_MS: '2000',
      HTTP_REQUEST_TIMEOUT_MS: '7000',
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '65000',
      HTTP_MAX_REQUESTS_PER_SOCKET: '50',
      HTTP_MAX_CONNECTIONS: '300',
      HTTP_MAX_CONNECTIONS_PER_ADDRESS: '0',
      OWNER_EMAIL: 'Me@Example.com',
      PASSWORD_HASH_COST: '15',
    });
    assert.equal(config.port, 8080);
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.dataDir, path.join(PACKAGE_ROOT, 'some', 'dir'), 'a relative DATA_DIR is relative to the installation, not the current directory');
    assert.equal(config.databaseUrl, 'postgres://user:pw@db.example:5432/voicenote');
    assert.equal(config.redisUrl, 'redis://cache.example:6379');
    assert.deepEqual(config.secretKey, Buffer.from(HEX_KEY, 'hex'));
    assert.equal(config.telegramApiRoot, 'http://127.0.0.1:8081', 'a trailing slash is dropped so paths can be appended');
    assert.equal(config.linkedinApiRoot, 'https://linkedin.example');
    assert.equal(config.audioAllowPrivateUrls, true);
    assert.equal(config.ffmpegPath, process.execPath);
    assert.equal(config.logLevel, 'debug');
    assert.equal(config.sandboxLatencyMs, 0);
    assert.equal(config.sandboxAutoScanSeconds, 0, '0 turns sandbox auto-scan off');
    assert.equal(config.workerConcurrency, 48);
    assert.equal(config.maxConcurrentConversions, 3);
    assert.equal(config.databasePoolSize, 25);
    assert.equal(config.shutdownGraceMs, 2500);
    assert.equal(config.shutdownMarginMs, 4000);
    assert.deepEqual(config.http, { headersTimeoutMs: 2000, requestTimeoutMs: 7000, keepAliveTimeoutMs: 65_000, maxRequestsPerSocket: 50, maxConnections: 300, maxConnectionsPerAddress: 0 });
    assert.equal(config.ownerEmail, 'Me@Example.com');
    assert.equal(config.passwordHashCost, 15);
  });

  test('HTTP timeouts: the headers must not be given longer than the whole request; an email must look like one', () => {
    assert.throws(() => loadConfig({ HTTP_HEADERS_TIMEOUT_MS: '20000', HTTP_REQUEST_TIMEOUT_MS: '10000' }), /^ConfigError: HTTP_HEADERS_TIMEOUT_MS: must not be longer than HTTP_REQUEST_TIMEOUT_MS/);
    assert.throws(() => loadConfig({ HTTP_MAX_CONNECTIONS: '0' }), /HTTP_MAX_CONNECTIONS: must be between 1/);
    assert.throws(() => loadConfig({ OWNER_EMAIL: 'not an email' }), /OWNER_EMAIL: /);
    // Never cheaper than the hashes of before (2^14), nor so dear that a sign-in takes a minute.
    assert.throws(() => loadConfig({ PASSWORD_HASH_COST: '13' }), /^ConfigError: PASSWORD_HASH_COST: must be between 14 and 20/);
    assert.throws(() => loadConfig({ PASSWORD_HASH_COST: '21' }), /^ConfigError: PASSWORD_HASH_COST: must be between 14 and 20/);
  });

  test('SECRET_KEY is accepted as 64 hex characters or as base64 of 32 bytes', () => {
    assert.deepEqual(loadConfig({ SECRET_KEY: HEX_KEY }).secretKey, Buffer.from(HEX_KEY, 'hex'));
    assert.deepEqual(loadConfig({ SECRET_KEY: BASE64_KEY }).secretKey, Buffer.from(BASE64_KEY, 'base64'));
    assert.equal(loadConfig({ SECRET_KEY: BASE64_KEY }).secretKey?.length, 32);
  });

  test('postgresql:// and rediss:// are accepted too', () => {
    const config = loadConfig({ DATABASE_URL: 'postgresql://db/voicenote', SECRET_KEY: BASE64_KEY, REDIS_URL: 'rediss://cache:6380' });
    assert.equal(config.databaseUrl, 'postgresql://db/voicenote');
    assert.equal(config.redisUrl, 'rediss://cache:6380');
  });

  test('DATA_DIR: absolute as given; unset or relative, under the installation folder whatever the current directory', () => {
    assert.equal(loadConfig({ DATA_DIR: '/var/lib/voicenote' }).dataDir, '/var/lib/voicenote');
    const cwd = process.cwd();
    try {
      process.chdir(tmpdir());
      assert.equal(loadConfig({}).dataDir, path.join(PACKAGE_ROOT, 'data'));
      assert.equal(loadConfig({ DATA_DIR: 'state' }).dataDir, path.join(PACKAGE_ROOT, 'state'));
    } finally {
      process.chdir(cwd);
    }
  });

  test('MESSAGE_RETENTION_DAYS is a whole number of days; 0 keeps messages for ever', () => {
    assert.equal(loadConfig({ MESSAGE_RETENTION_DAYS: '30' }).messageRetentionDays, 30);
    assert.equal(loadConfig({ MESSAGE_RETENTION_DAYS: '0' }).messageRetentionDays, 0);
  });

  test('TRUST_PROXY: true, false, a hop count, or addresses and CIDR ranges', () => {
    assert.equal(loadConfig({ TRUST_PROXY: 'true' }).trustProxy, true);
    assert.equal(loadConfig({ TRUST_PROXY: 'false' }).trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: '0' }).trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: '2' }).trustProxy, 2);
    assert.deepEqual(loadConfig({ TRUST_PROXY: '127.0.0.1, 10.0.0.0/8,::1,loopback' }).trustProxy, ['127.0.0.1', '10.0.0.0/8', '::1', 'loopback']);
  });

  test('OUTBOUND_PROXY is read as a proxy URL, its port filled in', () => {
    assert.equal(loadConfig({ OUTBOUND_PROXY: 'socks5h://u:p@proxy.example' }).outboundProxy, 'socks5h://u:p@proxy.example:1080');
  });

  test('AUDIO_ALLOW_PRIVATE_URLS=false is false', () => {
    assert.equal(loadConfig({ AUDIO_ALLOW_PRIVATE_URLS: 'false' }).audioAllowPrivateUrls, false);
  });

  test('ALLOW_PRIVATE_URLS (audio and webhook URLs) is read; its old name AUDIO_ALLOW_PRIVATE_URLS still works; the new name wins', () => {
    assert.equal(loadConfig({ ALLOW_PRIVATE_URLS: 'true' }).audioAllowPrivateUrls, true);
    assert.equal(loadConfig({ AUDIO_ALLOW_PRIVATE_URLS: 'true' }).audioAllowPrivateUrls, true);
    assert.equal(loadConfig({ ALLOW_PRIVATE_URLS: 'false', AUDIO_ALLOW_PRIVATE_URLS: 'true' }).audioAllowPrivateUrls, false);
    assert.equal(loadConfig({ ALLOW_PRIVATE_URLS: 'true', AUDIO_ALLOW_PRIVATE_URLS: 'false' }).audioAllowPrivateUrls, true);
    assert.equal(loadConfig({}).audioAllowPrivateUrls, false);
  });
});

const BAD_VALUES: Array<{ env: Record<string, string>; variable: string }> = [
  { env: { PORT: 'abc' }, variable: 'PORT' },
  { env: { PORT: '70000' }, variable: 'PORT' },
  { env: { PORT: '-1' }, variable: 'PORT' },
  { env: { LOG_LEVEL: 'loud' }, variable: 'LOG_LEVEL' },
  { env: { DATABASE_URL: 'mysql://x' }, variable: 'DATABASE_URL' },
  { env: { REDIS_URL: 'http://x' }, variable: 'REDIS_URL' },
  { env: { SECRET_KEY: 'short' }, variable: 'SECRET_KEY' },
  { env: { SECRET_KEY: randomBytes(16).toString('hex') }, variable: 'SECRET_KEY' },
  { env: { AUDIO_ALLOW_PRIVATE_URLS: 'maybe' }, variable: 'AUDIO_ALLOW_PRIVATE_URLS' },
  { env: { ALLOW_PRIVATE_URLS: 'maybe' }, variable: 'ALLOW_PRIVATE_URLS' },
  { env: { SANDBOX_LATENCY_MS: '-1' }, variable: 'SANDBOX_LATENCY_MS' },
  { env: { SANDBOX_LATENCY_MS: '1.5' }, variable: 'SANDBOX_LATENCY_MS' },
  { env: { SANDBOX_AUTO_SCAN_SECONDS: 'soon' }, variable: 'SANDBOX_AUTO_SCAN_SECONDS' },
  { env: { WORKER_CONCURRENCY: '0' }, variable: 'WORKER_CONCURRENCY' },
  { env: { WORKER_CONCURRENCY: 'many' }, variable: 'WORKER_CONCURRENCY' },
  { env: { MAX_CONCURRENT_CONVERSIONS: '0' }, variable: 'MAX_CONCURRENT_CONVERSIONS' },
  { env: { MAX_CONCURRENT_CONVERSIONS: '257' }, variable: 'MAX_CONCURRENT_CONVERSIONS' },
  { env: { MAX_CONCURRENT_CONVERSIONS: 'cores' }, variable: 'MAX_CONCURRENT_CONVERSIONS' },
  { env: { DATABASE_POOL_SIZE: '0' }, variable: 'DATABASE_POOL_SIZE' },
  { env: { SHUTDOWN_GRACE_MS: 'forever' }, variable: 'SHUTDOWN_GRACE_MS' },
  { env: { SHUTDOWN_MARGIN_MS: '-1' }, variable: 'SHUTDOWN_MARGIN_MS' },
  { env: { SHUTDOWN_MARGIN_MS: '600001' }, variable: 'SHUTDOWN_MARGIN_MS' },
  { env: { TELEGRAM_API_ROOT: 'ftp://x' }, variable: 'TELEGRAM_API_ROOT' },
  { env: { TELEGRAM_API_ROOT: 'not a url' }, variable: 'TELEGRAM_API_ROOT' },
  { env: { LINKEDIN_API_ROOT: 'file:///etc/passwd' }, variable: 'LINKEDIN_API_ROOT' },
  { env: { DATABASE_URL: 'postgres://db/voicenote' }, variable: 'SECRET_KEY' },
  { env: { FFMPEG_PATH: '/nonexistent/ffmpeg' }, variable: 'FFMPEG_PATH' },
  { env: { FFMPEG_PATH: '/tmp' }, variable: 'FFMPEG_PATH' },
  { env: { MESSAGE_RETENTION_DAYS: 'forever' }, variable: 'MESSAGE_RETENTION_DAYS' },
  { env: { MESSAGE_RETENTION_DAYS: '-5' }, variable: 'MESSAGE_RETENTION_DAYS' },
  { env: { TRUST_PROXY: 'maybe' }, variable: 'TRUST_PROXY' },
  { env: { TRUST_PROXY: '10.0.0.0/33' }, variable: 'TRUST_PROXY' },
  { env: { TRUST_PROXY: '99' }, variable: 'TRUST_PROXY' },
  { env: { OUTBOUND_PROXY: 'ftp://proxy.example:21' }, variable: 'OUTBOUND_PROXY' },
  { env: { WHATSAPP_WEB_SOCKET_URL: 'https://web.whatsapp.com/ws/chat' }, variable: 'WHATSAPP_WEB_SOCKET_URL' },
  { env: { TELEGRAM_DC_ADDRESS: '149.154.167.91' }, variable: 'TELEGRAM_DC_ADDRESS' },
  { env: { OUTBOUND_PROXY: 'proxy.example:3128' }, variable: 'OUTBOUND_PROXY' },
];

describe('loadConfig: a bad value is one line naming the variable', () => {
  for (const { env, variable } of BAD_VALUES) {
    test(`${Object.entries(env)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')} → ${variable}`, () => {
      assert.throws(
        () => loadConfig(env),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`);
          assert.doesNotMatch(error.message, /\n/, 'one line');
          assert.match(error.message, new RegExp(`\\b${variable}\\b`), `the message names ${variable}: ${error.message}`);
          return true;
        },
      );
    });
  }
});

describe('the process refuses to start on a bad value', () => {
  let dataDir: string;
  before(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'voicenote-config-'));
  });
  after(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  const cases: Array<{ env: Record<string, string>; variable: string }> = [
    { env: { PORT: 'abc' }, variable: 'PORT' },
    { env: { LOG_LEVEL: 'loud' }, variable: 'LOG_LEVEL' },
    { env: { MAX_CONCURRENT_CONVERSIONS: '0' }, variable: 'MAX_CONCURRENT_CONVERSIONS' },
    { env: { DATABASE_URL: 'postgres://127.0.0.1:1/none' }, variable: 'SECRET_KEY' },
  ];
  for (const { env, variable } of cases) {
    test(`serve with ${Object.entries(env)[0]!.join('=')} exits non-zero with one stderr line naming ${variable}`, async () => {
      const run = await runCli(['serve'], { DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', ...env });
      assert.notEqual(run.code, 0);
      assert.notEqual(run.code, null, 'exited by itself');
      const lines = run.stderr.split('\n').filter((line) => line !== '');
      assert.equal(lines.length, 1, `exactly one stderr line, got: ${run.stderr}`);
      assert.match(lines[0]!, new RegExp(`\\b${variable}\\b`));
      assert.doesNotMatch(run.stdout, /listening/, 'never started listening');
      // Nothing was created on disk: start-up stopped before storage was touched.
      assert.deepEqual(await readdir(dataDir), []);
    });
  }

  // Values that parse but do not work: found while starting, still said in terms of the variable, and no owner keys
  // are printed by a start that did not come up (they would never be shown again).
  const unusable: Array<{ label: string; env: () => Record<string, string>; variable: RegExp }> = [
    { label: 'DATA_DIR under a file', env: () => ({ DATA_DIR: '/dev/null/voicenote' }), variable: /\bDATA_DIR\b/ },
    {
      label: 'an unreachable DATABASE_URL',
      env: () => ({ DATA_DIR: dataDir, DATABASE_URL: 'postgres://127.0.0.1:1/none', SECRET_KEY: randomBytes(32).toString('base64') }),
      variable: /\bDATABASE_URL\b/,
    },
    { label: 'a port that is taken', env: () => ({ DATA_DIR: dataDir, PORT: String(takenPort) }), variable: /\bPORT\b/ },
  ];
  let takenPort = 0;
  let blocker: Server | undefined;
  before(async () => {
    blocker = createServer();
    await new Promise<void>((resolve) => blocker!.listen(0, '127.0.0.1', resolve));
    takenPort = (blocker.address() as AddressInfo).port;
  });
  after(async () => {
    await new Promise((resolve) => blocker?.close(resolve));
  });
  for (const { label, env, variable } of unusable) {
    test(`serve with ${label} exits non-zero with one stderr line naming the variable, printing no keys`, async () => {
      const run = await runCli(['serve'], { PORT: '0', HOST: '127.0.0.1', ...env() });
      assert.notEqual(run.code, 0);
      assert.notEqual(run.code, null, 'exited by itself');
      const lines = run.stderr.split('\n').filter((line) => line !== '');
      assert.equal(lines.length, 1, `exactly one stderr line, got: ${run.stderr}`);
      assert.match(lines[0]!, variable);
      assert.doesNotMatch(run.stdout + run.stderr, /sk_(test|live)_|first start/i);
    });
  }
});
