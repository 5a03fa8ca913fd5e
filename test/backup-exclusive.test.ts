/**
 * `voicenote backup` never overwrites a file (docs/cli.md, "backup"), including one created while the copy
 * runs: the name is held from the start by an exclusive create, not checked once and renamed onto later.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import SqliteDatabase from 'better-sqlite3';
import { BackupFailure, backupSqlite } from '../src/cli/backup.js';
import { closeSharedAudio, TEST_DATABASE_URL, startTestApp } from './fixtures/app-harness.js';

after(closeSharedAudio);

describe('voicenote backup and a file that appears while it copies', { skip: TEST_DATABASE_URL !== undefined }, () => {
  test('an exclusive create of the name is refused while the copy runs, and the copy is whole', async (t) => {
    const app = await startTestApp({ worker: false });
    const dir = await mkdtemp(path.join(tmpdir(), 'voicenote-backup-race-'));
    t.after(async () => {
      await app.close();
      await rm(dir, { recursive: true, force: true });
    });
    await app.createAccount();
    const target = path.join(dir, 'copy.db');
    const running = backupSqlite(app.app.services.config, target);
    // The copy has started and waits on the event loop; someone else creates the name now (before it can end).
    assert.throws(() => writeFileSync(target, 'precious', { flag: 'wx' }), { code: 'EEXIST' });
    const report = await running;
    assert.equal(report.file, target);
    const copy = new SqliteDatabase(target, { readonly: true });
    assert.equal((copy.prepare('select count(*) as n from accounts').get() as { n: number }).n, report.accounts);
    copy.close();
  });

  test('what another writer puts in the name while the copy runs stays; the backup fails and says why', async (t) => {
    const app = await startTestApp({ worker: false });
    const dir = await mkdtemp(path.join(tmpdir(), 'voicenote-backup-race-'));
    t.after(async () => {
      await app.close();
      await rm(dir, { recursive: true, force: true });
    });
    await app.createAccount();
    const target = path.join(dir, 'copy.db');
    const outcome = backupSqlite(app.app.services.config, target).then(() => null, (error: unknown) => error);
    // Written before the copy can end (it waits on the event loop).
    writeFileSync(target, 'precious');
    const error = await outcome;
    assert.ok(error instanceof BackupFailure, String(error));
    assert.match(error.message, /written or replaced by something else/);
    assert.equal(await readFile(target, 'utf8'), 'precious');
    await assert.rejects(readFile(`${target}.partial`), { code: 'ENOENT' }, 'no partial copy left behind');
  });
});
