import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe } from 'node:test';
import { machineLoad, test } from './fixtures/timed.js';
import pg from 'pg';
import { BIN, childEnv, ROOT, runCli, type Run } from './fixtures/cli-process.js';
import { startAudioServer, type AudioServer } from './fakes/audio-server.js';
import { startTelegramApi } from './fakes/telegram-api.js';
import { sharedFixtures, testFfmpegPath } from './fixtures/audio-fixtures.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, TEST_DATABASE_URL, TEST_REDIS_URL } from './fixtures/app-harness.js';

/*
 * The CLI as its users run it: `node bin/voicenote.js …` in a child process (compiled dist/, so
 * `npm run build` first), against SQLite in a temp DATA_DIR or, with TEST_DATABASE_URL, a PostgreSQL
 * schema of this file's own (selected through the connection URL's `options=-c search_path=…`).
 */

const SECRET = /^sk_(test|live)_[0-9A-Za-z]{32}$/;
const KEY_ID = /^key_[0-9A-Za-z]+$/;
const ACCOUNT_ID = /^acct_[0-9A-Za-z]+$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$/;
const HOUR_MS = 3_600_000;

interface Storage {
  dataDir: string;
  schema: string | undefined;
  secretKey: string;
  /** Environment of a child process on this storage. */
  env: Record<string, string>;
  /** For startTestApp: an in-process app on the same storage. */
  reuse: { dataDir: string; pgSchema?: string; secretKey: string };
  cleanup(): Promise<void>;
}

async function onPostgres<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function withSearchPath(databaseUrl: string, schema: string): string {
  const separator = databaseUrl.includes('?') ? '&' : '?';
  return `${databaseUrl}${separator}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
}

/** An empty DATA_DIR (and an empty PostgreSQL schema when TEST_DATABASE_URL is set). */
async function freshStorage(label: string, options: { secretKey?: boolean } = {}): Promise<Storage> {
  const dataDir = await mkdtemp(path.join(tmpdir(), `voicenote-cli-${label}-`));
  const schema = TEST_DATABASE_URL ? `t_cli_${randomBytes(6).toString('hex')}` : undefined;
  if (schema) await onPostgres((client) => client.query(`create schema ${schema}`));
  const secretKey = randomBytes(32).toString('base64');
  // PostgreSQL requires SECRET_KEY; SQLite may go without it and generate DATA_DIR/secret.key.
  const passSecret = options.secretKey !== false || schema !== undefined;
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    ...(passSecret ? { SECRET_KEY: secretKey } : {}),
    ...(TEST_DATABASE_URL && schema ? { DATABASE_URL: withSearchPath(TEST_DATABASE_URL, schema) } : {}),
  };
  return {
    dataDir,
    schema,
    secretKey,
    env,
    reuse: { dataDir, secretKey, ...(schema ? { pgSchema: schema } : {}) },
    async cleanup() {
      if (schema) await onPostgres((client) => client.query(`drop schema if exists ${schema} cascade`));
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** A command that must succeed: exit 0, nothing on stderr but the note that names a new or empty database. */
async function ok(args: string[], env: Record<string, string>): Promise<string> {
  const run = await runCli(args, env);
  assert.equal(run.code, 0, `voicenote ${args.join(' ')} failed: ${run.stderr}`);
  const others = run.stderr.split('\n').filter((line) => line !== '' && !line.startsWith('voicenote: note: '));
  assert.deepEqual(others, [], `nothing else on stderr for voicenote ${args.join(' ')}`);
  return run.stdout;
}

/** `--json`: the whole of stdout is one JSON object (and a newline). */
async function okJson(args: string[], env: Record<string, string>): Promise<any> {
  const stdout = await ok(args, env);
  assert.equal(stdout.trimEnd().split('\n').length, 1, `one line on stdout, got: ${stdout}`);
  const value: unknown = JSON.parse(stdout);
  assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value), 'one JSON object');
  return value;
}

/** A command that must fail: non-zero exit, exactly one line on stderr, nothing on stdout. */
async function fails(args: string[], env: Record<string, string>): Promise<string> {
  const run = await runCli(args, env);
  assert.notEqual(run.code, null, 'exited by itself');
  assert.notEqual(run.code, 0, `voicenote ${args.join(' ')} should fail`);
  assert.ok(run.stderr.endsWith('\n'), `stderr ends its line: ${JSON.stringify(run.stderr)}`);
  const lines = run.stderr.split('\n').slice(0, -1);
  assert.equal(lines.length, 1, `exactly one stderr line, got: ${JSON.stringify(run.stderr)}`);
  assert.match(lines[0]!, /^voicenote: \S/, 'one prefix for every failure, then what went wrong');
  assert.equal(run.stdout, '', 'nothing on stdout');
  return lines[0]!;
}

after(async () => {
  await closeSharedAudio();
});

describe(`voicenote accounts / keys / migrate (${STORAGE_LABEL})`, () => {
  let storage: Storage;
  let env: Record<string, string>;
  let accountId: string;
  let testKey: { id: string; secret: string };
  let liveKey: { id: string; secret: string };
  let extraKey: { id: string; secret: string };
  let rolled: { id: string; secret: string; replaces: string };
  let revokedKey: { id: string; secret: string };

  before(async () => {
    storage = await freshStorage('keys');
    env = storage.env;
  });
  after(async () => {
    await storage.cleanup();
  });

  test('migrate applies the migrations on an empty database, then finds nothing to do', async () => {
    const first = await ok(['migrate'], env);
    assert.match(first, /^applied \S/);
    const second = await ok(['migrate'], env);
    assert.equal(second, 'database is up to date\n');
  });

  test('accounts create --json prints exactly {account_id, keys: {test, live}}', async () => {
    const created = await okJson(['accounts', 'create', '--name', 'Acme', '--json'], env);
    assert.deepEqual(Object.keys(created).sort(), ['account_id', 'keys']);
    assert.match(created.account_id, ACCOUNT_ID);
    assert.deepEqual(Object.keys(created.keys).sort(), ['live', 'test']);
    for (const env of ['test', 'live'] as const) {
      const key = created.keys[env];
      assert.deepEqual(Object.keys(key).sort(), ['id', 'secret']);
      assert.match(key.id, KEY_ID);
      assert.match(key.secret, SECRET);
      assert.ok(key.secret.startsWith(`sk_${env}_`), `${env} key is sk_${env}_…`);
    }
    assert.notEqual(created.keys.test.id, created.keys.live.id);
    accountId = created.account_id;
    testKey = created.keys.test;
    liveKey = created.keys.live;
  });

  test('accounts create without --json prints the account id and both secrets', async () => {
    const stdout = await ok(['accounts', 'create', '--name', 'Human', '--email', 'h@example.com', '--plan', 'scale'], env);
    assert.match(stdout, /acct_[0-9A-Za-z]+/);
    assert.match(stdout, /sk_test_[0-9A-Za-z]{32}/);
    assert.match(stdout, /sk_live_[0-9A-Za-z]{32}/);
  });

  test('keys create --json prints exactly {id, env, secret, scope, senders} for either environment', async () => {
    const created = await okJson(['keys', 'create', '--account', accountId, '--env', 'test', '--json'], env);
    assert.deepEqual(Object.keys(created).sort(), ['env', 'id', 'scope', 'secret', 'senders']);
    assert.equal(created.scope, 'full', 'a key made without --scope may do everything');
    assert.equal(created.senders, null, 'and send from any sender');
    assert.match(created.id, KEY_ID);
    assert.equal(created.env, 'test');
    assert.match(created.secret, SECRET);
    assert.ok(created.secret.startsWith('sk_test_'));
    extraKey = { id: created.id, secret: created.secret };

    const live = await okJson(['keys', 'create', '--account', accountId, '--env', 'live', '--json'], env);
    assert.equal(live.env, 'live');
    assert.ok(live.secret.startsWith('sk_live_'));
    assert.match(live.secret, SECRET);
    revokedKey = { id: live.id, secret: live.secret };
  });

  test('keys list --json prints {keys: [...]} with exactly the nine fields and no secrets', async () => {
    const stdout = await ok(['keys', 'list', '--account', accountId, '--json'], env);
    const listed = JSON.parse(stdout);
    assert.deepEqual(Object.keys(listed), ['keys']);
    assert.ok(Array.isArray(listed.keys));
    const ids = listed.keys.map((k: any) => k.id).sort();
    assert.deepEqual(ids, [testKey.id, liveKey.id, extraKey.id, revokedKey.id].sort(), 'the four keys of this account, none of another');
    const bySecret = new Map([testKey, liveKey, extraKey, revokedKey].map((k) => [k.id, k.secret]));
    for (const key of listed.keys) {
      assert.deepEqual(Object.keys(key).sort(), ['created_at', 'env', 'expires_at', 'id', 'last_used_at', 'prefix', 'revoked_at', 'scope', 'senders']);
      assert.ok(key.env === 'test' || key.env === 'live');
      const secret = bySecret.get(key.id)!;
      assert.ok(secret.startsWith(`sk_${key.env}_`), 'env matches the secret');
      assert.ok(secret.startsWith(key.prefix) && key.prefix.length < secret.length - 16, `prefix ${key.prefix} is a short start of the secret`);
      assert.match(key.created_at, ISO);
      assert.equal(key.expires_at, null);
      assert.equal(key.revoked_at, null);
      assert.equal(key.last_used_at, null);
    }
    for (const secret of bySecret.values()) assert.ok(!stdout.includes(secret), 'secrets are never listed');
  });

  test('keys roll --json prints {id, env, secret, replaces, old_key_expires_at}; the old key lives 24 h by default', async () => {
    const before = Date.now();
    const view = await okJson(['keys', 'roll', testKey.id, '--json'], env);
    const afterRun = Date.now();
    assert.deepEqual(Object.keys(view).sort(), ['env', 'id', 'old_key_expires_at', 'replaces', 'secret']);
    assert.match(view.id, KEY_ID);
    assert.notEqual(view.id, testKey.id);
    assert.equal(view.env, 'test');
    assert.match(view.secret, SECRET);
    assert.ok(view.secret.startsWith('sk_test_'));
    assert.equal(view.replaces, testKey.id);
    assert.match(view.old_key_expires_at, ISO);
    const expiresAt = Date.parse(view.old_key_expires_at);
    assert.ok(expiresAt >= before + 24 * HOUR_MS - 1000 && expiresAt <= afterRun + 24 * HOUR_MS + 1000, `about 24 h from now: ${view.old_key_expires_at}`);
    rolled = { id: view.id, secret: view.secret, replaces: view.replaces };

    const listed = await okJson(['keys', 'list', '--account', accountId, '--json'], env);
    const old = listed.keys.find((k: any) => k.id === testKey.id);
    assert.equal(old.expires_at, view.old_key_expires_at, 'the list shows the old key expiring');
    assert.equal(old.revoked_at, null);
    const successor = listed.keys.find((k: any) => k.id === view.id);
    assert.ok(successor, 'the new key is listed');
    assert.equal(successor.expires_at, null);
  });

  test('keys roll --expires-in 1h keeps the old key for about an hour', async () => {
    const before = Date.now();
    const view = await okJson(['keys', 'roll', liveKey.id, '--expires-in', '1h', '--json'], env);
    const afterRun = Date.now();
    assert.equal(view.env, 'live');
    assert.ok(view.secret.startsWith('sk_live_'));
    assert.equal(view.replaces, liveKey.id);
    const expiresAt = Date.parse(view.old_key_expires_at);
    assert.ok(expiresAt >= before + HOUR_MS - 1000 && expiresAt <= afterRun + HOUR_MS + 1000, `about 1 h from now: ${view.old_key_expires_at}`);
  });

  test('keys revoke revokes at once: the key is listed with revoked_at; revoking again fails', async () => {
    const before = Date.now();
    const stdout = await ok(['keys', 'revoke', revokedKey.id], env);
    assert.match(stdout, new RegExp(revokedKey.id));
    const listed = await okJson(['keys', 'list', '--account', accountId, '--json'], env);
    const key = listed.keys.find((k: any) => k.id === revokedKey.id);
    assert.match(key.revoked_at, ISO);
    assert.ok(Date.parse(key.revoked_at) >= before - 1000);
    const line = await fails(['keys', 'revoke', revokedKey.id], env);
    assert.match(line, /revoked/);
  });

  test('accounts set-plan ID --plan growth --rate-limit 7 --quota 9 succeeds', async () => {
    const stdout = await ok(['accounts', 'set-plan', accountId, '--plan', 'growth', '--rate-limit', '7', '--quota', '9'], env);
    assert.match(stdout, /growth/);
  });

  test('the keys the CLI made authenticate against the API, with the plan set-plan gave', async () => {
    const app = await startTestApp({ worker: false, reuse: storage.reuse });
    try {
      const usage = async (secret: string) => app.request({ method: 'GET', url: '/api/v1/usage', key: secret });
      for (const secret of [testKey.secret, rolled.secret, extraKey.secret, liveKey.secret]) {
        const res = await usage(secret);
        assert.equal(res.statusCode, 200, `${secret.slice(0, 12)}… authenticates: ${res.body}`);
        const body = res.json();
        assert.equal(body.plan, 'growth');
        assert.equal(body.limits.rate_limit_per_minute, 7);
        assert.equal(body.limits.monthly_quota, 9);
        assert.equal(res.headers['x-usage-limit'], '9');
      }
      const revoked = await usage(revokedKey.secret);
      assert.equal(revoked.statusCode, 401, 'a revoked key is refused');
      assert.equal(revoked.json().error.code, 'unauthorized');
      assert.equal((await usage(`sk_test_${'x'.repeat(32)}`)).statusCode, 401);
    } finally {
      await app.close();
    }
    const listed = await okJson(['keys', 'list', '--account', accountId, '--json'], env);
    const used = listed.keys.find((k: any) => k.id === extraKey.id);
    assert.match(used.last_used_at, ISO, 'keys list shows when a key was last used');
  });

  describe('a failing command prints one line on stderr and exits non-zero: unknown ids', () => {
    test('accounts set-plan of an unknown account', async () => {
      const line = await fails(['accounts', 'set-plan', 'acct_doesnotexist', '--plan', 'growth'], env);
      assert.match(line, /acct_doesnotexist/);
    });
    test('keys create / keys list for an unknown account', async () => {
      assert.match(await fails(['keys', 'create', '--account', 'acct_doesnotexist', '--env', 'test', '--json'], env), /acct_doesnotexist/);
      assert.match(await fails(['keys', 'list', '--account', 'acct_doesnotexist', '--json'], env), /acct_doesnotexist/);
    });
    test('keys roll / keys revoke of an unknown key', async () => {
      assert.match(await fails(['keys', 'roll', 'key_doesnotexist', '--json'], env), /key_doesnotexist/);
      assert.match(await fails(['keys', 'revoke', 'key_doesnotexist'], env), /key_doesnotexist/);
    });
  });

  // These fail while parsing the command line, before storage is opened, so they can run side by side.
  describe('a failing command prints one line on stderr and exits non-zero: bad arguments', { concurrency: true }, () => {
    test('a bad --plan', async () => {
      assert.match(await fails(['accounts', 'set-plan', accountId, '--plan', 'gold'], env), /plan/);
      assert.match(await fails(['accounts', 'create', '--name', 'X', '--plan', 'gold', '--json'], env), /plan/);
    });
    test('a bad --env', async () => {
      assert.match(await fails(['keys', 'create', '--account', accountId, '--env', 'prod'], env), /env/);
    });
    test('a bad --rate-limit, --quota or --expires-in', async () => {
      assert.match(await fails(['accounts', 'set-plan', accountId, '--plan', 'growth', '--rate-limit', '0'], env), /rate-limit/);
      assert.match(await fails(['accounts', 'set-plan', accountId, '--plan', 'growth', '--quota', 'lots'], env), /quota/);
      assert.match(await fails(['keys', 'roll', extraKey.id, '--expires-in', 'tomorrow'], env), /expires-in/);
      assert.match(await fails(['keys', 'roll', extraKey.id, '--expires-in', '99999999999d'], env), /expires-in/);
    });
    test('a missing --name', async () => {
      assert.match(await fails(['accounts', 'create', '--json'], env), /name/);
      assert.match(await fails(['accounts', 'create', '--name', '', '--json'], env), /name/);
      assert.match(await fails(['accounts', 'create', '--name', 'A', '--email', 'not-an-email'], env), /email/);
      assert.match(await fails(['accounts', 'create', '--name', 'A', '--password', 'short'], env), /password/);
    });
    test('an unknown command, even a near miss', async () => {
      assert.match(await fails(['bogus'], env), /bogus/);
      assert.match(await fails(['acounts', 'create', '--name', 'x'], env), /acounts/);
    });
  });

  test('the failures changed nothing', async () => {
    const listed = await okJson(['keys', 'list', '--account', accountId, '--json'], env);
    assert.equal(listed.keys.length, 6, 'four keys plus the two roll successors');
    const extra = listed.keys.find((k: any) => k.id === extraKey.id);
    assert.equal(extra.expires_at, null, 'the failed roll did not touch the key');
  });

  test('keys create --scope read --sender …: the key shows its scope and senders, and a roll keeps them', async () => {
    const sender = `snd_${'A'.repeat(24)}`;
    const session = `ws_${'b'.repeat(24)}`;
    const created = await okJson(['keys', 'create', '--account', accountId, '--env', 'test', '--scope', 'read', '--sender', sender, '--sender', session, '--json'], env);
    assert.equal(created.scope, 'read');
    assert.deepEqual(created.senders, [sender, session]);
    const rolledScoped = await okJson(['keys', 'roll', created.id, '--json'], env);
    const listed = await okJson(['keys', 'list', '--account', accountId, '--json'], env);
    const successor = listed.keys.find((k: any) => k.id === rolledScoped.id);
    assert.equal(successor.scope, 'read', 'the successor may do what the old key did');
    assert.deepEqual(successor.senders, [sender, session]);
    const human = await ok(['keys', 'list', '--account', accountId], env);
    assert.match(human, new RegExp(`${created.id} .* read .*senders ${sender} ${session}`));
    assert.match(await fails(['keys', 'create', '--account', accountId, '--env', 'test', '--scope', 'admin'], env), /admin/);
    assert.match(await fails(['keys', 'create', '--account', accountId, '--env', 'test', '--sender', 'jane'], env), /jane.*not a sender id/);
  });

  test('set-plan without --rate-limit or --quota puts the account back on the plan\'s own limits', async () => {
    await ok(['accounts', 'set-plan', accountId, '--plan', 'growth'], env);
    const app = await startTestApp({ worker: false, reuse: storage.reuse });
    try {
      const res = await app.request({ method: 'GET', url: '/api/v1/usage', key: testKey.secret });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().plan, 'growth');
      assert.equal(res.json().limits.rate_limit_per_minute, 500, 'no stale override of 7');
      assert.equal(res.json().limits.monthly_quota, 2000, 'no stale override of 9');
    } finally {
      await app.close();
    }
  });
});

/** `voicenote serve` in a child process, listening on a port of the OS's choosing. */
interface Served {
  child: ChildProcessWithoutNullStreams;
  url: string;
  /** stdout up to the "listening" log line: what the operator reads at start-up. */
  banner: string;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first stdout/stderr text matching, or rejects after the time given. */
  waitFor(stream: 'stdout' | 'stderr', pattern: RegExp, timeoutMs?: number): Promise<string>;
}

const running = new Set<ChildProcessWithoutNullStreams>();

async function serve(storage: Storage, args: string[] = [], extraEnv: Record<string, string> = {}): Promise<Served> {
  const watched = spawnWatched(storage, ['serve', ...args], extraEnv);
  const listening = await watched.waitFor('stdout', /^.*"voicenote is listening".*$/m);
  const address = (JSON.parse(listening) as { address?: string }).address;
  assert.match(String(address), /^http:\/\/127\.0\.0\.1:\d+$/, 'the log line gives the address');
  return { ...watched, url: address!, banner: watched.stdout().slice(0, watched.stdout().indexOf(listening)) };
}

/** A `voicenote` child process whose output can be awaited. */
function spawnWatched(storage: Storage, args: string[], extraEnv: Record<string, string>, nodeArgs: string[] = []): Omit<Served, 'url' | 'banner'> {
  const env = {
    ...storage.env,
    PORT: '0',
    HOST: '127.0.0.1',
    SANDBOX_LATENCY_MS: '0',
    ...(TEST_REDIS_URL ? { REDIS_URL: TEST_REDIS_URL } : {}),
    ...extraEnv,
  };
  const child = spawn(process.execPath, [...nodeArgs, BIN, ...args], { cwd: ROOT, env: childEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
  running.add(child);
  let stdout = '';
  let stderr = '';
  const waiters: Array<() => void> = [];
  const notify = (): void => {
    for (const waiter of [...waiters]) waiter();
  };
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    notify();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    notify();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
      notify();
    });
  });
  // Generous: test files run several at a time, and a process started on a busy machine takes longer.
  const waitFor: Served['waitFor'] = (stream, pattern, timeoutMs = 60_000) =>
    new Promise((resolve, reject) => {
      let done = false;
      const check = (): void => {
        if (done) return;
        const text = stream === 'stdout' ? stdout : stderr;
        const match = pattern.exec(text);
        if (match) {
          finish();
          resolve(match[0]);
        } else if (child.exitCode !== null || child.signalCode !== null) {
          finish();
          reject(new Error(`${args[0]} exited (${child.exitCode ?? child.signalCode}) before ${pattern} on ${stream}; stdout: ${stdout}; stderr: ${stderr}`));
        }
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`no ${pattern} on ${stream} within ${timeoutMs} ms (${machineLoad()}); stdout: ${stdout}; stderr: ${stderr}`));
      }, timeoutMs);
      const finish = (): void => {
        done = true;
        clearTimeout(timer);
        waiters.splice(waiters.indexOf(check), 1);
      };
      waiters.push(check);
      check();
    });

  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    waitFor,
  };
}

/** SIGTERM, then the exit; a generous bound only so a hang fails the test instead of the run. */
async function terminate(served: Pick<Served, 'child' | 'exited' | 'stderr'>): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  served.child.kill('SIGTERM');
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`serve did not exit after SIGTERM; stderr: ${served.stderr()}`)), 20_000).unref());
  return Promise.race([served.exited, timeout]);
}

function stderrLines(served: Served): string[] {
  return served
    .stderr()
    .split('\n')
    .filter((line) => line !== '');
}

describe(`voicenote serve (${STORAGE_LABEL})`, () => {
  let storage: Storage;
  let ownerTestKey: string;
  let ownerLiveKey: string;
  let secretFile: string | undefined;

  before(async () => {
    // SQLite without SECRET_KEY: the first start generates DATA_DIR/secret.key.
    storage = await freshStorage('serve', { secretKey: false });
  });
  after(async () => {
    for (const child of running) child.kill('SIGKILL');
    await storage.cleanup();
  });

  test('first start on an empty DATA_DIR prints the owner keys and dashboard login once, framed on stderr, answers probes, and stops on SIGTERM with exit 0', async () => {
    const served = await serve(storage);
    const banner = served.stderr();
    const sandbox = /^sandbox key\s+(key_\S+)\s+(sk_test_\S+)$/m.exec(banner);
    const live = /^live key\s+(key_\S+)\s+(sk_live_\S+)$/m.exec(banner);
    assert.ok(sandbox && live, `both owner keys are printed on stderr once the server listens:\n${banner}`);
    assert.match(sandbox[2]!, SECRET);
    assert.match(live[2]!, SECRET);
    assert.match(banner, /acct_[0-9A-Za-z]+/);
    const login = /^dashboard login\s+(\S+@\S+)\s+password\s+(\S+)$/m.exec(banner);
    assert.ok(login, `the dashboard login is printed:\n${banner}`);
    assert.ok(login[2]!.length >= 12, 'a generated password of some length');
    const lines = banner.split('\n');
    const rules = lines.map((line, i) => (/^={40,}$/.test(line) ? i : -1)).filter((i) => i >= 0);
    assert.equal(rules.length, 2, `one block framed by two rules:\n${banner}`);
    const inside = lines.slice(rules[0]! + 1, rules[1]!).join('\n');
    for (const part of [sandbox[0], live[0], login[0]]) assert.ok(inside.includes(part), 'keys and login inside the frame');
    assert.ok(inside.includes(storage.schema ? 'DATABASE_URL' : storage.dataDir), `the frame names where the data is:\n${inside}`);
    assert.match(inside, storage.schema ? /Keep SECRET_KEY/ : /Keep \S*secret\.key/, 'a reminder to keep the secret key');
    assert.doesNotMatch(served.stdout(), /sk_(test|live)_|password/, 'nothing of it in the JSON logs on stdout');
    ownerTestKey = sandbox[2]!;
    ownerLiveKey = live[2]!;

    const health = await fetch(`${served.url}/healthz`);
    assert.equal(health.status, 200);
    const ready = await fetch(`${served.url}/readyz`);
    assert.equal(ready.status, 200);
    assert.equal(((await ready.json()) as { status: string }).status, 'ready');

    for (const key of [ownerTestKey, ownerLiveKey]) {
      const usage = await fetch(`${served.url}/api/v1/usage`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(usage.status, 200, 'the printed keys work');
      assert.equal(((await usage.json()) as { plan: string }).plan, 'scale', 'the owner account');
    }
    assert.ok(!served.stdout().includes(ownerTestKey) && !served.stdout().includes(ownerLiveKey), 'request logs never carry the key');

    if (!storage.schema) {
      secretFile = path.join(storage.dataDir, 'secret.key');
      const info = await stat(secretFile);
      assert.equal(info.mode & 0o777, 0o600, 'the generated secret key is readable by its owner only');
    }

    const exit = await terminate(served);
    assert.deepEqual(exit, { code: 0, signal: null }, `graceful shutdown exits 0; stderr: ${served.stderr()}`);
    const afterFrame = stderrLines(served).slice(stderrLines(served).findLastIndex((line) => /^={40,}$/.test(line)) + 1);
    assert.deepEqual(afterFrame, ['voicenote: SIGTERM received, shutting down'], 'no warnings or errors on stderr');
  });

  test('a second start prints no keys and no password; the owner keys still work', async () => {
    assert.ok(ownerTestKey, 'needs the first start');
    const keyFileBefore = secretFile ? await readFile(secretFile, 'utf8') : undefined;
    const served = await serve(storage);
    assert.doesNotMatch(served.banner + served.stderr(), /sk_(test|live)_/);
    assert.doesNotMatch(served.banner + served.stderr(), /password|first start/i);
    const usage = await fetch(`${served.url}/api/v1/usage`, { headers: { authorization: `Bearer ${ownerTestKey}` } });
    assert.equal(usage.status, 200);
    if (secretFile) assert.equal(await readFile(secretFile, 'utf8'), keyFileBefore, 'the generated secret key is reused, not replaced');
    const exit = await terminate(served);
    assert.deepEqual(exit, { code: 0, signal: null });
    assert.doesNotMatch(served.stdout(), /sk_(test|live)_/);
  });

  test('a request in flight at SIGTERM completes before the process exits 0', async () => {
    assert.ok(ownerTestKey, 'needs the first start');
    const served = await serve(storage, ['--no-worker']);
    const { port } = new URL(served.url);
    const body = JSON.stringify({
      platform: 'telegram',
      recipient: '123456789',
      audio_url: 'https://audio.example.com/voice.ogg',
      session: { bot_token: TELEGRAM_TOKEN },
    });
    const half = Math.floor(body.length / 2);

    const socket = net.connect(Number(port), '127.0.0.1');
    let response = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (response += chunk));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(
      `POST /api/v1/send HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\nAuthorization: Bearer ${ownerTestKey}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, half)}`,
    );
    // The server has the request (its log says so) but not yet all of its body.
    await served.waitFor('stdout', /"msg":"incoming request".*"url":"\/api\/v1\/send"|"url":"\/api\/v1\/send".*"msg":"incoming request"/);

    served.child.kill('SIGTERM');
    await served.waitFor('stderr', /SIGTERM received/);
    // write, not end: a half-closed socket means "abandoned" to Node's HTTP server.
    socket.write(body.slice(half));
    await closed;

    const [head, payload] = response.split('\r\n\r\n');
    assert.match(head!, /^HTTP\/1\.1 202 /, `the in-flight send is accepted: ${response}; stdout: ${served.stdout()}; stderr: ${served.stderr()}`);
    const message = JSON.parse(payload!) as Record<string, unknown>;
    assert.match(String(message.id), /^msg_[0-9A-Za-z]{24}$/);
    assert.equal(message.status, 'queued');

    const exit = await Promise.race([
      served.exited,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`serve did not exit; stderr: ${served.stderr()}`)), 20_000).unref()),
    ]);
    assert.deepEqual(exit, { code: 0, signal: null }, `exits 0; stderr: ${served.stderr()}`);
    // New connections are refused once it has gone.
    await assert.rejects(fetch(`${served.url}/healthz`));
  });
});

/** Resolves with `promise`, or fails the test once `ms` have passed: a bound so a hang fails instead of stalling the run. */
function within<T>(promise: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what()} (no end within ${ms} ms)`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * A client that sends the head of a POST /api/v1/send and half of its body, then nothing more: the
 * server has the request in hand and waits for the rest for ever (the API sets no request timeout).
 */
async function stalledSend(url: string, key: string): Promise<{ response(): string; closed: Promise<void> }> {
  const { port } = new URL(url);
  const body = JSON.stringify({ platform: 'telegram', recipient: '123456789', audio_url: 'https://audio.example.com/voice.ogg', session: { bot_token: TELEGRAM_TOKEN } });
  const socket = net.connect(Number(port), '127.0.0.1');
  let response = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (response += chunk));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(
    `POST /api/v1/send HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, Math.floor(body.length / 2))}`,
  );
  return { response: () => response, closed };
}

describe(`the hard shutdown deadline: SHUTDOWN_GRACE_MS + SHUTDOWN_MARGIN_MS (${STORAGE_LABEL})`, () => {
  // Small, so a test waits under two seconds for the deadline instead of the default 25 s.
  const GRACE_MS = 300;
  const MARGIN_MS = 1_500;
  const deadlineEnv = { SHUTDOWN_GRACE_MS: String(GRACE_MS), SHUTDOWN_MARGIN_MS: String(MARGIN_MS) };
  const DEADLINE_LINE = `voicenote: shutdown did not finish in time (SHUTDOWN_GRACE_MS + SHUTDOWN_MARGIN_MS = ${GRACE_MS + MARGIN_MS} ms); exiting with code 1`;
  let storage: Storage;
  let key: string;
  before(async () => {
    storage = await freshStorage('deadline');
    key = (await okJson(['accounts', 'create', '--name', 'Deadline', '--json'], storage.env)).keys.test.secret as string;
  });
  after(async () => {
    for (const child of running) child.kill('SIGKILL');
    await storage.cleanup();
  });

  test('with nothing in flight, SIGTERM ends serve and worker with exit 0, and the deadline never speaks', async () => {
    const served = await serve(storage, ['--no-worker'], deadlineEnv);
    const worker = spawnWatched(storage, ['worker'], deadlineEnv);
    await worker.waitFor('stdout', /"voicenote worker started"/);
    for (const [name, child] of [['serve', served], ['worker', worker]] as const) {
      child.child.kill('SIGTERM');
      const exit = await within(child.exited, 10_000, () => `${name} after SIGTERM; stderr: ${child.stderr()}`);
      assert.deepEqual(exit, { code: 0, signal: null }, `${name} exits 0; stderr: ${child.stderr()}`);
      assert.match(child.stderr(), /^voicenote: SIGTERM received, shutting down$/m);
      assert.doesNotMatch(child.stderr(), /did not finish in time/, `${name}: the deadline did not cut a shutdown that finished`);
    }
  });

  test('a client that never finishes its request holds the shutdown up: at the deadline the process exits 1 and says why', async () => {
    const served = await serve(storage, [], deadlineEnv);
    const stalled = await stalledSend(served.url, key);
    // The server has the request (its log says so) but never gets all of its body.
    await served.waitFor('stdout', /"msg":"incoming request".*"url":"\/api\/v1\/send"|"url":"\/api\/v1\/send".*"msg":"incoming request"/);

    served.child.kill('SIGTERM');
    // Without the deadline the process would wait for that body for ever; the bound only turns a hang into a failure.
    const exit = await within(served.exited, 10_000, () => `serve after SIGTERM with a stalled client; stderr: ${served.stderr()}`);
    assert.deepEqual(exit, { code: 1, signal: null }, `the deadline ends the process with exit 1; stderr: ${served.stderr()}`);
    const lines = stderrLines(served);
    const received = lines.indexOf('voicenote: SIGTERM received, shutting down');
    assert.ok(received >= 0, `the signal is acknowledged: ${served.stderr()}`);
    assert.deepEqual(lines.slice(received), ['voicenote: SIGTERM received, shutting down', DEADLINE_LINE], 'then one line saying why it ended');
    await stalled.closed;
    assert.equal(stalled.response(), '', 'the stalled request got no answer: the connection just ended with the process');
  });

  test('a stalled client does not keep a delivery that hangs at the platform from being aborted at the grace', async () => {
    const telegram = await startTelegramApi();
    const audio = await startAudioServer();
    try {
      const fixtures = await sharedFixtures(await testFfmpegPath());
      audio.route('/voice.ogg', { kind: 'file', path: fixtures['voice.ogg'], contentType: 'audio/ogg' });
      const chat = '530000001';
      telegram.failForChat(chat, { kind: 'stall' });
      const liveKey = (await okJson(['accounts', 'create', '--name', 'Hanging', '--json'], storage.env)).keys.live.secret as string;
      const served = await serve(storage, [], { ...deadlineEnv, TELEGRAM_API_ROOT: telegram.apiRoot, AUDIO_ALLOW_PRIVATE_URLS: 'true' });
      const sent = await fetch(`${served.url}/api/v1/send`, {
        method: 'POST',
        headers: { authorization: `Bearer ${liveKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ platform: 'telegram', recipient: chat, audio_url: audio.url('/voice.ogg'), session: { bot_token: TELEGRAM_TOKEN } }),
      });
      assert.equal(sent.status, 202);
      const id = ((await sent.json()) as { id: string }).id;
      await within(
        (async () => {
          while (telegram.callsForChat(chat).length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
        })(),
        10_000,
        () => `the platform call; stdout: ${served.stdout()}`,
      );
      const stalled = await stalledSend(served.url, key);
      // The server has the stalled request in hand (its log says so) besides the send above.
      const sendsLogged = (): number => served.stdout().split('\n').filter((line) => line.includes('"incoming request"') && line.includes('"url":"/api/v1/send"')).length;
      await within(
        (async () => {
          while (sendsLogged() < 2) await new Promise((resolve) => setTimeout(resolve, 20));
        })(),
        10_000,
        () => `the stalled request in the log; stdout: ${served.stdout()}`,
      );

      served.child.kill('SIGTERM');
      const exit = await within(served.exited, 10_000, () => `serve after SIGTERM; stderr: ${served.stderr()}`);
      assert.deepEqual(exit, { code: 1, signal: null }, `the stalled client still ends it at the deadline; stderr: ${served.stderr()}`);
      const stopped = served
        .stdout()
        .split('\n')
        .filter((line) => line.includes('attempt stopped by shutdown'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      assert.equal(stopped.length, 1, `the hanging attempt was aborted at the grace and handed back, not cut off by the deadline; stdout: ${served.stdout()}`);
      assert.ok(Object.values(stopped[0]!).includes(id), `the line names the message: ${JSON.stringify(stopped[0])}`);
      await stalled.closed;
    } finally {
      await audio.close();
      await telegram.close();
    }
  });
});

describe(`true bugs end the process with exit code 70 (${STORAGE_LABEL})`, () => {
  // The bug is planted by a preloaded module (test/fixtures/planted-bug.ts); the handlers are voicenote's own.
  const plantedBug = ['--import', 'tsx', '--import', pathToFileURL(path.join(ROOT, 'test', 'fixtures', 'planted-bug.ts')).href];
  let storage: Storage;
  before(async () => {
    storage = await freshStorage('bugs');
    await ok(['migrate'], storage.env);
  });
  after(async () => {
    for (const child of running) child.kill('SIGKILL');
    await storage.cleanup();
  });

  const cases = [
    { command: 'serve', ready: /"voicenote is listening"/, bug: 'exception', line: /^voicenote: uncaught exception \(a bug\): Error: planted bug: an exception nobody catches$/m },
    { command: 'worker', ready: /"voicenote worker started"/, bug: 'rejection', line: /^voicenote: unhandled promise rejection \(a bug\): Error: planted bug: a rejection nobody handles$/m },
  ] as const;
  for (const { command, ready, bug, line } of cases) {
    test(`an ${bug === 'exception' ? 'uncaught exception' : 'unhandled rejection'} in a running \`voicenote ${command}\` is logged on stderr and exits 70`, async () => {
      const watched = spawnWatched(storage, [command], { PLANTED_BUG: bug }, plantedBug);
      await watched.waitFor('stdout', ready);
      watched.child.kill('SIGUSR2');
      const exit = await within(watched.exited, 10_000, () => `${command} after the planted bug; stderr: ${watched.stderr()}`);
      assert.deepEqual(exit, { code: 70, signal: null }, `exit code 70 (not Node's own 1); stderr: ${watched.stderr()}`);
      assert.match(watched.stderr(), line, 'one line says what happened and that it is a bug');
      assert.match(watched.stderr(), /^\s+at .*planted-bug\.ts/m, 'followed by the stack, to find it');
    });
  }
});

describe(`split mode: serve --no-worker and voicenote worker (${STORAGE_LABEL})`, () => {
  let storage: Storage;
  let audio: AudioServer;
  before(async () => {
    storage = await freshStorage('split');
    audio = await startAudioServer();
    const fixtures = await sharedFixtures(await testFfmpegPath());
    audio.route('/voice.ogg', { kind: 'file', path: fixtures['voice.ogg'], contentType: 'audio/ogg' });
  });
  after(async () => {
    await audio.close();
    await storage.cleanup();
  });

  test('the API process only queues; a separate worker process delivers; both stop on SIGTERM with exit 0', async () => {
    const created = await okJson(['accounts', 'create', '--name', 'Split', '--json'], storage.env);
    const key = created.keys.test.secret as string;
    const served = await serve(storage, ['--no-worker'], { AUDIO_ALLOW_PRIVATE_URLS: 'true' });
    const auth = { authorization: `Bearer ${key}` };
    const sent = await fetch(`${served.url}/api/v1/send`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ platform: 'telegram', recipient: '123456789', audio_url: audio.url('/voice.ogg'), session: { bot_token: TELEGRAM_TOKEN } }),
    });
    assert.equal(sent.status, 202);
    const id = ((await sent.json()) as { id: string }).id;
    const statusOf = async (): Promise<{ status: string; error: unknown }> =>
      (await (await fetch(`${served.url}/api/v1/status/${id}`, { headers: auth })).json()) as { status: string; error: unknown };

    await new Promise((resolve) => setTimeout(resolve, 1_500));
    assert.equal((await statusOf()).status, 'queued', 'serve --no-worker delivers nothing');
    assert.equal(audio.requests.length, 0, 'nor fetches audio');

    const worker = spawnWatched(storage, ['worker'], { AUDIO_ALLOW_PRIVATE_URLS: 'true' });
    try {
      await worker.waitFor('stdout', /"voicenote worker started"/);
      const deadline = Date.now() + 20_000;
      let last = await statusOf();
      while (last.status !== 'delivered' && last.status !== 'failed' && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        last = await statusOf();
      }
      assert.equal(last.status, 'delivered', `delivered by the worker process: ${JSON.stringify(last)}; worker stderr: ${worker.stderr()}`);
    } finally {
      assert.deepEqual(await terminate(worker), { code: 0, signal: null }, `worker exits 0; stderr: ${worker.stderr()}`);
      assert.deepEqual(await terminate(served), { code: 0, signal: null });
    }
  });
});
