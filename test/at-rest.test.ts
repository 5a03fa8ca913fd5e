/**
 * At rest: dashboard passwords hashed with scrypt at OWASP's current parameters (and older hashes
 * replaced at sign-in); DATA_DIR and everything the service creates in it for its own user only; the
 * owner's email chosen at the first start (OWNER_EMAIL).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes, scryptSync } from 'node:crypto';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe } from 'node:test';
import { machineLoad, test } from './fixtures/timed.js';
import { hashPasswordAsync, needsRehash, verifyPasswordAsync } from '../src/store/password-hash.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp } from './fixtures/app-harness.js';
import { createDashboardAccount, FormClient } from './fixtures/dashboard-harness.js';
import { BIN, childEnv, ROOT } from './fixtures/cli-process.js';

after(closeSharedAudio);

/** A hash as accounts had them before: no parameters, scrypt N=2^14. */
function legacyHash(password: string): string {
  const salt = randomBytes(16);
  return `scrypt$${salt.toString('base64url')}$${scryptSync(password, salt, 32).toString('base64url')}`;
}

describe('password hashes', () => {
  test('scrypt N=2^17, r=8, p=1, the parameters stored with the hash', async () => {
    const stored = await hashPasswordAsync('correct horse battery');
    assert.match(stored, /^scrypt\$ln=17,r=8,p=1\$[\w-]{22}\$[\w-]{43}$/);
    assert.equal(await verifyPasswordAsync('correct horse battery', stored), true);
    assert.equal(await verifyPasswordAsync('correct horse batterY', stored), false);
    assert.equal(needsRehash(stored), false);
  });

  test('a hash of older parameters still checks, and is due for a rehash', async () => {
    const old = legacyHash('correct horse battery');
    assert.equal(await verifyPasswordAsync('correct horse battery', old), true);
    assert.equal(await verifyPasswordAsync('wrong', old), false);
    assert.equal(needsRehash(old), true);
    assert.equal(needsRehash(await hashPasswordAsync('x', { ln: 15, r: 8, p: 1 })), true);
    // Parameters from storage that would make one check cost a fortune are not run.
    assert.equal(await verifyPasswordAsync('x', 'scrypt$ln=30,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAA'), false);
  });
});

describe(`rehash at sign-in (${STORAGE_LABEL})`, () => {
  test('signing in with a password stored with older parameters stores it again with the current ones; other sign-ins stay', async (t) => {
    // PASSWORD_HASH_COST unset (the harness lowers it): the production default, 2^17.
    const app = await startTestApp({ worker: false, env: { PASSWORD_HASH_COST: '' } });
    t.after(() => app.close());
    const account = await createDashboardAccount(app);
    const db = app.app.services.db.kysely;
    await db.updateTable('accounts').set({ password_hash: legacyHash(account.password) }).where('id', '=', account.accountId).execute();

    const first = new FormClient(app, '10.9.0.1');
    assert.equal((await first.signIn(account.email, account.password)).statusCode, 303);
    const row = await db.selectFrom('accounts').select('password_hash').where('id', '=', account.accountId).executeTakeFirstOrThrow();
    assert.match(String(row.password_hash), /^scrypt\$ln=17,r=8,p=1\$/);
    assert.equal(await verifyPasswordAsync(account.password, row.password_hash), true);

    // The session of the sign-in that upgraded the hash stays, and the password still works.
    assert.equal((await first.get('/dashboard/account')).statusCode, 200);
    assert.equal((await new FormClient(app, '10.9.0.2').signIn(account.email, account.password)).statusCode, 303);
  });
});

describe(`PASSWORD_HASH_COST (${STORAGE_LABEL})`, () => {
  test('new hashes are made at the configured cost, and a sign-in brings a hash of another cost to it', async (t) => {
    const app = await startTestApp({ worker: false, env: { PASSWORD_HASH_COST: '15' } });
    t.after(() => app.close());
    const account = await createDashboardAccount(app);
    const db = app.app.services.db.kysely;
    const stored = async () => String((await db.selectFrom('accounts').select('password_hash').where('id', '=', account.accountId).executeTakeFirstOrThrow()).password_hash);
    assert.match(await stored(), /^scrypt\$ln=15,r=8,p=1\$/);

    await db.updateTable('accounts').set({ password_hash: await hashPasswordAsync(account.password) }).where('id', '=', account.accountId).execute();
    assert.match(await stored(), /^scrypt\$ln=17,r=8,p=1\$/);
    assert.equal((await new FormClient(app, '10.9.1.1').signIn(account.email, account.password)).statusCode, 303);
    assert.match(await stored(), /^scrypt\$ln=15,r=8,p=1\$/);
    assert.equal(await verifyPasswordAsync(account.password, await stored()), true);
  });
});

describe('files at rest (the compiled service, SQLite)', () => {
  test('a first start creates DATA_DIR and everything in it for the service user only; OWNER_EMAIL is the owner login', async (t) => {
    const parent = await mkdtemp(path.join(tmpdir(), 'voicenote-modes-'));
    t.after(() => rm(parent, { recursive: true, force: true }));
    const dataDir = path.join(parent, 'data');
    const child = spawn(process.execPath, [BIN, 'serve'], {
      cwd: ROOT,
      env: childEnv({ DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', OWNER_EMAIL: 'Me@Example.com', SANDBOX_LATENCY_MS: '0' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.after(() => child.kill('SIGKILL'));
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    let base = '';
    // 60 s, the bound for starting a process (docs/development.md): 30 s ran out on a machine busy with other files.
    const deadline = Date.now() + 60_000;
    while (!base && Date.now() < deadline) {
      base = /"address":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(stdout)?.[1] ?? '';
      if (child.exitCode !== null) assert.fail(`serve exited: ${stdout}${stderr}`);
      if (!base) await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(base, `serve did not start within 60 s (${machineLoad()}): ${stdout}${stderr}`);

    // The owner login, as the first-start block prints it.
    const login = /^dashboard login\s+(\S+)\s+password\s+(\S+)$/m.exec(stderr);
    assert.ok(login, stderr);
    assert.equal(login[1], 'Me@Example.com');
    const form = await fetch(`${base}/dashboard/sign-in`);
    const cookie = String(form.headers.get('set-cookie')).split(';')[0]!;
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await form.text())![1]!;
    const signedIn = await fetch(`${base}/dashboard/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      body: new URLSearchParams({ _csrf: csrf, email: 'me@example.com', password: login[2]! }).toString(),
    });
    assert.equal(signedIn.status, 303, 'the owner signs in with the chosen email');

    // Every folder 0700, every file 0600: DATA_DIR itself, the database with its WAL, the secret key, the audio cache.
    const seen: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      const info = await stat(dir);
      assert.equal((info.mode & 0o777).toString(8), '700', `${path.relative(parent, dir)}/`);
      seen.push(`${path.relative(parent, dir)}/`);
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) await walk(full);
        else {
          assert.equal(((await stat(full)).mode & 0o777).toString(8), '600', path.relative(parent, full));
          seen.push(path.relative(parent, full));
        }
      }
    };
    await walk(dataDir);
    for (const expected of ['data/', 'data/voicenote.db', 'data/voicenote.db-wal', 'data/secret.key']) assert.ok(seen.includes(expected), `${expected} in ${seen.join(', ')}`);
    assert.ok(seen.some((p) => /audio/.test(p)), `the audio cache in ${seen.join(', ')}`);
  });
});
