import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import { after, before, describe } from 'node:test';
import { it, machineLoad } from './fixtures/timed.js';
import pg from 'pg';
import { createAccountWithKeys } from '../src/admin/accounts.js';
import { updatePlan } from '../src/store/accounts.js';
import { migrate, openDb, type Db } from '../src/store/db.js';
import { findKey, revokeKey, rollKey } from '../src/store/keys.js';
import { makeDataDir, removeDir } from './fixtures/audio-harness.js';
import { BIN, childEnv, ROOT, runCli } from './fixtures/cli-process.js';
import { STORAGE_LABEL, TEST_DATABASE_URL } from './fixtures/app-harness.js';

/**
 * Revocation everywhere within a second: a service process (the compiled service, `serve`) caches the
 * callers it has read; a key revoked or rolled, or a plan changed, by ANOTHER process (this test
 * process, or the CLI) must take effect there at once, not when the cache entry ages out (5 s). Uses
 * dist/: run `npm run build` first.
 *
 * The promise is one second (measured in RELIABILITY.md); the bound asserted here is 2 s so that a
 * loaded machine does not fail it, still far under the 5 s an entry used to be trusted after a change
 * made elsewhere.
 */
const BOUND_MS = 2_000;

function withSearchPath(databaseUrl: string, schema: string): string {
  return `${databaseUrl}${databaseUrl.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe(`revocation across processes (${STORAGE_LABEL})`, () => {
  let dataDir: string;
  let pgSchema: string | undefined;
  let env: Record<string, string>;
  let db: Db;
  let service: ChildProcess;
  let base: string;

  before(async () => {
    dataDir = await makeDataDir('revocation');
    pgSchema = TEST_DATABASE_URL ? `t_${randomBytes(6).toString('hex')}` : undefined;
    env = {
      DATA_DIR: dataDir,
      SECRET_KEY: randomBytes(32).toString('base64'),
      LOG_LEVEL: 'silent',
      MAX_EVENT_LOOP_DELAY_MS: '0',
      ...(TEST_DATABASE_URL && pgSchema ? { DATABASE_URL: withSearchPath(TEST_DATABASE_URL, pgSchema) } : {}),
    };
    db = await openDb({ databaseUrl: TEST_DATABASE_URL, dataDir, ...(pgSchema ? { pgSchema } : {}) });
    await migrate(db);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    service = spawn(process.execPath, [BIN, 'serve', '--no-worker'], { cwd: ROOT, env: childEnv({ ...env, PORT: String(port), HOST: '127.0.0.1' }), stdio: 'ignore' });
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`${base}/healthz`)).ok) break;
      } catch {
        // not listening yet
      }
      assert.ok(i < 600, `the service did not start within 60 s (${machineLoad()})`);
      await sleep(100);
    }
  });

  after(async () => {
    service?.kill('SIGTERM');
    await new Promise((resolve) => (service.exitCode !== null ? resolve(undefined) : service.once('exit', resolve)));
    await db?.close();
    if (pgSchema) {
      const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await client.connect();
      await client.query(`drop schema if exists ${pgSchema} cascade`);
      await client.end();
    }
    await removeDir(dataDir);
  });

  const usage = (key: string) => fetch(`${base}/api/v1/usage`, { headers: { authorization: `Bearer ${key}` } });

  /** Asks the service until `done` holds for its answer; the time that took after the change. */
  async function untilSeen(key: string, done: (res: Response) => boolean): Promise<number> {
    const changedAt = Date.now();
    for (;;) {
      const res = await usage(key);
      await res.arrayBuffer();
      const elapsed = Date.now() - changedAt;
      if (done(res)) return elapsed;
      assert.ok(elapsed < 10_000, 'the change never showed in the service');
      await sleep(20);
    }
  }

  async function account(name: string) {
    return createAccountWithKeys(db.kysely, { name, plan: 'starter' });
  }

  it('a key revoked by another process is refused by the service within the bound', async () => {
    const created = await account('revoked');
    // Read (and cached) by the service just before the change.
    assert.equal((await usage(created.testKey.secret)).status, 200);
    await revokeKey(db.kysely, created.testKey.row.id);
    const elapsed = await untilSeen(created.testKey.secret, (res) => res.status === 401);
    assert.ok(elapsed < BOUND_MS, `401 after ${elapsed} ms`);
  });

  it('a key revoked with the CLI is refused by the service within the bound of the command ending', async () => {
    const created = await account('cli');
    assert.equal((await usage(created.liveKey.secret)).status, 200);
    const run = await runCli(['keys', 'revoke', created.liveKey.row.id], env);
    assert.equal(run.code, 0, run.stderr);
    const elapsed = await untilSeen(created.liveKey.secret, (res) => res.status === 401);
    assert.ok(elapsed < BOUND_MS, `401 after ${elapsed} ms`);
  });

  it("a roll's expiry set by another process is honoured by the service within the bound", async () => {
    const created = await account('rolled');
    assert.equal((await usage(created.testKey.secret)).status, 200);
    const rolled = await rollKey(db.kysely, (await findKey(db.kysely, created.testKey.row.id))!, 0);
    const elapsed = await untilSeen(created.testKey.secret, (res) => res.status === 401);
    assert.ok(elapsed < BOUND_MS, `401 after ${elapsed} ms`);
    assert.equal((await usage(rolled.secret)).status, 200, 'the successor works');
  });

  it('a plan change made by another process shows in the service within the bound', async () => {
    const created = await account('plan');
    const before = await usage(created.testKey.secret);
    assert.equal(before.status, 200);
    assert.notEqual(before.headers.get('x-usage-limit'), '1234');
    await updatePlan(db.kysely, created.account.id, { plan: 'growth', quota: 1234 });
    const elapsed = await untilSeen(created.testKey.secret, (res) => res.headers.get('x-usage-limit') === '1234');
    assert.ok(elapsed < BOUND_MS, `new limits after ${elapsed} ms`);
  });
});
