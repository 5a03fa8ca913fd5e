import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { sql } from 'kysely';
import { SQLITE_FILE } from '../src/store/db.js';
import { closeSharedAudio, defaultSendBody, startTestApp, TEST_DATABASE_URL } from './fixtures/app-harness.js';

/**
 * Another process (a CLI command, a backup, a second worker on the same file) holds SQLite's write lock
 * for longer than the busy timeout. The service waits for it without stopping its event loop, and
 * every write it was asked for meanwhile lands once the lock is free: none is lost, none doubled.
 */

/** A second process that takes the write lock of `file` and keeps it until told to let go (stdin). */
async function holdWriteLock(file: string): Promise<{ release(): Promise<void> }> {
  const program = `
    const Database = require('better-sqlite3');
    const db = new Database(process.argv[1]);
    db.exec('begin immediate');
    db.prepare("insert into schema_notes (note) values ('written by the other process')").run();
    console.log('locked');
    process.stdin.once('data', () => { db.exec('commit'); db.close(); console.log('released'); process.exit(0); });
  `;
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, ['-e', program, file], { cwd: process.cwd() });
  const lines = createInterface({ input: child.stdout });
  const [first] = (await once(lines, 'line')) as [string];
  assert.equal(first, 'locked');
  return {
    async release() {
      child.stdin.write('go\n');
      await once(child, 'exit');
    },
  };
}

describe('SQLite: waiting for another process’s write lock', { skip: TEST_DATABASE_URL ? 'SQLite only' : false }, () => {
  after(closeSharedAudio);

  it('writes asked for while another process holds the lock all land once it lets go, and the service answers meanwhile', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount({ quota: 100 });
      const db = t.app.services.db.kysely;
      // A table of the test's own, for the other process's write and ours.
      await sql`create table schema_notes (id integer primary key, note text not null)`.execute(db);
      const lock = await holdWriteLock(path.join(t.dataDir, SQLITE_FILE));

      // All three kinds of write, started while the lock is held: a send (the hot path's batch), a
      // transaction, and a single statement outside any transaction.
      const send = t.send(a.testKey, defaultSendBody('telegram', t.voiceUrl));
      const inTransaction = db.transaction().execute(async (trx) => {
        await sql`insert into schema_notes (note) values ('ours, in a transaction')`.execute(trx);
        await sql`insert into schema_notes (note) values ('ours, in the same transaction')`.execute(trx);
      });
      const alone = sql`insert into schema_notes (note) values ('ours, alone')`.execute(db);

      // The event loop is free and reads go on while the writes wait: a read through the app's one
      // connection answers before the lock is let go (with the lock waited for on the event loop,
      // nothing would answer until the writes had given up).
      const usage = await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey });
      assert.equal(usage.statusCode, 200, usage.body);
      assert.equal(usage.json().usage.total_sent, 0, 'the send is not counted while the lock is held elsewhere');

      await lock.release();
      const accepted = await send;
      assert.equal(accepted.statusCode, 202, accepted.body);
      await inTransaction;
      await alone;

      const notes = await sql<{ note: string }>`select note from schema_notes order by id`.execute(db);
      const seen = notes.rows.map((row) => row.note);
      assert.equal(seen[0], 'written by the other process', 'the other process’s write committed first');
      assert.deepEqual(seen.slice(1).sort(), ['ours, alone', 'ours, in a transaction', 'ours, in the same transaction'], 'each of ours exactly once');
      const status = await t.request({ method: 'GET', url: `/api/v1/status/${accepted.json().id}`, key: a.testKey });
      assert.equal(status.statusCode, 200, status.body);
      const after = await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey });
      assert.equal(after.json().usage.total_sent, 1, 'the send counted once');
      const messages = await db.selectFrom('messages').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      assert.equal(Number(messages.n), 1, 'one message row');
    } finally {
      await t.close();
    }
  });
});
