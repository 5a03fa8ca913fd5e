import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import pg from 'pg';
import { STORAGE_LABEL, TEST_DATABASE_URL } from './fixtures/app-harness.js';
import { runCli, type Run } from './fixtures/cli-process.js';

/**
 * The right key or no start: a process whose SECRET_KEY is not the key the stored data was sealed
 * with refuses to start, with one line saying so, instead of starting and then failing every message.
 * Runs the real `voicenote` bin (`npm run build` first).
 */

async function onPostgres(query: string): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    await client.query(query);
  } finally {
    await client.end();
  }
}

function assertRefused(run: Run): void {
  assert.notEqual(run.code, 0, run.stderr);
  assert.notEqual(run.code, null, 'exited by itself');
  const lines = run.stderr.split('\n').filter((line) => line !== '');
  assert.equal(lines.length, 1, `exactly one stderr line, got: ${run.stderr}`);
  assert.match(lines[0]!, /^voicenote: SECRET_KEY: .*not the key/);
  assert.doesNotMatch(run.stdout, /sk_(test|live)_|First start|listening/);
}

describe(`the right SECRET_KEY or no start (${STORAGE_LABEL})`, () => {
  let dataDir: string;
  let schema: string | undefined;
  const withKey = (key: string): Record<string, string> => ({
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    SECRET_KEY: key,
    ...(TEST_DATABASE_URL && schema
      ? { DATABASE_URL: `${TEST_DATABASE_URL}${TEST_DATABASE_URL.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}` }
      : {}),
  });

  before(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'voicenote-keycheck-'));
    schema = TEST_DATABASE_URL ? `t_key_${randomBytes(6).toString('hex')}` : undefined;
    if (schema) await onPostgres(`create schema ${schema}`);
  });
  after(async () => {
    if (schema) await onPostgres(`drop schema if exists ${schema} cascade`);
    await rm(dataDir, { recursive: true, force: true });
  });

  it('serve, worker and migrate refuse another key with one line naming SECRET_KEY; the original key still starts', async () => {
    const original = randomBytes(32).toString('base64');
    const other = randomBytes(32).toString('hex');
    const first = await runCli(['migrate'], withKey(original));
    assert.equal(first.code, 0, first.stderr);
    for (const command of [['serve'], ['serve', '--no-worker'], ['worker'], ['migrate']]) {
      assertRefused(await runCli(command, withKey(other)));
    }
    const again = await runCli(['migrate'], withKey(original));
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stderr, '');
  });

  it('a lost DATA_DIR/secret.key (a new one generated) is refused too', { skip: TEST_DATABASE_URL !== undefined }, async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'voicenote-keyfile-'));
    try {
      const env = { DATA_DIR: dir, PORT: '0', HOST: '127.0.0.1' };
      assert.equal((await runCli(['migrate'], env)).code, 0);
      await rm(path.join(dir, 'secret.key'));
      assertRefused(await runCli(['serve'], env));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
