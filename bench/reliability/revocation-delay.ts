/**
 * Revocation delay across processes: a `serve --no-worker` process (the compiled service) answers with
 * keys it has read (and cached); this process revokes them (or rolls them with no grace, or changes the
 * plan) straight in storage, as the CLI or another API process would, and asks the service every 10 ms
 * until the change shows. REL_CHANGES (20) of each kind; prints p50 and max.
 *   npm run build && BENCH_DATABASE_URL=postgres://… (default: SQLite) node --import tsx bench/reliability/revocation-delay.ts
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import { createAccountWithKeys } from '../../src/admin/accounts.js';
import { updatePlan } from '../../src/store/accounts.js';
import { migrate, openDb } from '../../src/store/db.js';
import { findKey, revokeKey, rollKey } from '../../src/store/keys.js';
import { makeDataDir, removeDir } from '../../test/fixtures/audio-harness.js';
import { BIN, childEnv, ROOT } from '../../test/fixtures/cli-process.js';
import { dropSchema } from '../pg-schema.js';

const CHANGES = Number(process.env.REL_CHANGES ?? 20);
const PG_URL = process.env.BENCH_DATABASE_URL?.trim() || undefined;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const dataDir = await makeDataDir('revocation-delay');
const pgSchema = PG_URL ? `rd_${randomBytes(5).toString('hex')}` : undefined;
const secretKey = randomBytes(32).toString('base64');
const db = await openDb({ databaseUrl: PG_URL, dataDir, ...(pgSchema ? { pgSchema } : {}) });
await migrate(db);
const probe = createServer();
await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
const port = (probe.address() as AddressInfo).port;
await new Promise((resolve) => probe.close(resolve));
const databaseUrl = PG_URL && pgSchema ? `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${pgSchema}`)}` : undefined;
const service = spawn(process.execPath, [BIN, 'serve', '--no-worker'], {
  cwd: ROOT,
  env: childEnv({ DATA_DIR: dataDir, SECRET_KEY: secretKey, LOG_LEVEL: 'silent', MAX_EVENT_LOOP_DELAY_MS: '0', PORT: String(port), HOST: '127.0.0.1', ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}) }),
  stdio: 'ignore',
});
const base = `http://127.0.0.1:${port}`;
const usage = async (key: string) => {
  const res = await fetch(`${base}/api/v1/usage`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res;
};
try {
  for (;;) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) break;
    } catch {
      await sleep(100);
    }
  }
  const kinds = {
    revoke: [] as number[],
    'roll (no grace)': [] as number[],
    'plan change': [] as number[],
  };
  for (let i = 0; i < CHANGES; i++) {
    for (const kind of Object.keys(kinds) as (keyof typeof kinds)[]) {
      const created = await createAccountWithKeys(db.kysely, { name: `r${i}`, plan: 'starter' });
      const key = created.testKey.secret;
      if ((await usage(key)).status !== 200) throw new Error('the key does not work');
      // A random moment within the service's watch interval.
      await sleep(Math.random() * 100);
      if (kind === 'revoke') await revokeKey(db.kysely, created.testKey.row.id);
      else if (kind === 'roll (no grace)') await rollKey(db.kysely, (await findKey(db.kysely, created.testKey.row.id))!, 0);
      else await updatePlan(db.kysely, created.account.id, { plan: 'growth', quota: 4321 });
      const changedAt = performance.now();
      for (;;) {
        const res = await usage(key);
        if (kind === 'plan change' ? res.headers.get('x-usage-limit') === '4321' : res.status === 401) break;
        await sleep(10);
      }
      kinds[kind].push(performance.now() - changedAt);
    }
  }
  console.log(`storage: ${PG_URL ? 'postgres' : 'sqlite'}, ${CHANGES} changes of each kind`);
  console.log('| change (made in another process) | p50 | max |');
  console.log('|---|---|---|');
  for (const [kind, values] of Object.entries(kinds)) {
    const sorted = [...values].sort((a, b) => a - b);
    console.log(`| ${kind} | ${Math.round(sorted[Math.floor(sorted.length / 2)]!)} ms | ${Math.round(sorted[sorted.length - 1]!)} ms |`);
  }
} finally {
  service.kill('SIGTERM');
  await new Promise((resolve) => service.once('exit', resolve));
  await db.close();
  await removeDir(dataDir);
  if (pgSchema) await dropSchema(PG_URL!, pgSchema);
}
