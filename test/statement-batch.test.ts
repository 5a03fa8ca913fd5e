import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { it } from './fixtures/timed.js';
import { openDb, type Db } from '../src/store/db.js';
import { FixedStatement } from '../src/store/fixed-statement.js';
import { runSideBySide } from '../src/store/statement-batch.js';
import { TEST_DATABASE_URL } from './fixtures/app-harness.js';

/**
 * The worker's outcomes on PostgreSQL: pieces of one transaction run side by side, and their calls of a
 * batched statement in one turn become one statement. A count marked `atEnd` (the account's usage row,
 * which every batch changes) runs once, after every piece is done: its row lock is then held for the
 * commit only. Checked on a real PostgreSQL, by the order the statements left their rows in a table.
 */
describe('statements batched across the pieces of a PostgreSQL transaction', { skip: TEST_DATABASE_URL ? false : 'PostgreSQL only (TEST_DATABASE_URL)' }, () => {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  let db: Db;
  let kysely: Kysely<any>;

  // `trail` keeps the order in which statements ran (a serial id per row they wrote).
  const PIECE_STEP = new FixedStatement(`insert into trail (what) values (?)`, {
    text: `insert into trail (what) select w from unnest($1::text[]) as x(w)`,
    arrays: [[0, 'text[]']],
    perCall: 'none',
  });
  const COUNT = new FixedStatement(`with c as (update counters set n = n + 1 where name = ? returning 1) insert into trail (what) select 'count' from c`, {
    text: `with c as (update counters as k set n = k.n + v.n from (select w, count(*) as n from unnest($1::text[]) as x(w) group by w) as v where k.name = v.w returning 1)
      insert into trail (what) select 'count' from c`,
    arrays: [[0, 'text[]']],
    perCall: 'none',
    atEnd: true,
  });

  before(async () => {
    db = await openDb({ databaseUrl: TEST_DATABASE_URL, dataDir: '/nonexistent', pgSchema: schema });
    kysely = db.kysely as unknown as Kysely<any>;
    await sql`create table trail (id serial primary key, what text not null)`.execute(kysely);
    await sql`create table counters (name text primary key, n integer not null check (n < 1000))`.execute(kysely);
    await sql`insert into counters (name, n) values ('usage', 0)`.execute(kysely);
  });
  after(async () => {
    if (!db) return;
    await sql`drop schema if exists ${sql.id(schema)} cascade`.execute(kysely).catch(() => undefined);
    await db.close();
  });

  it('a count marked atEnd runs once for all the pieces, after the statements they make after it, and its callers go on at once', async () => {
    const pieces = Array.from({ length: 5 }, () => async (trx: Kysely<any>) => {
      await PIECE_STEP.execute(trx, ['before']);
      await COUNT.execute(trx, ['usage']);
      await PIECE_STEP.execute(trx, ['after']);
      return 'done';
    });
    const values = await kysely.transaction().execute((trx) => runSideBySide(trx, pieces));
    assert.deepEqual(values, ['done', 'done', 'done', 'done', 'done']);
    const trail = await sql<{ what: string }>`select what from trail order by id`.execute(kysely);
    assert.deepEqual(
      trail.rows.map((r) => r.what),
      [...Array(5).fill('before'), ...Array(5).fill('after'), 'count'],
    );
    const counted = await sql<{ n: number }>`select n from counters where name = 'usage'`.execute(kysely);
    assert.equal(counted.rows[0]!.n, 5);
  });

  it('a count that fails at the end fails the whole batch, and nothing of it is committed', async () => {
    await sql`update counters set n = 998 where name = 'usage'`.execute(kysely);
    await sql`delete from trail`.execute(kysely);
    const pieces = Array.from({ length: 3 }, () => async (trx: Kysely<any>) => {
      await PIECE_STEP.execute(trx, ['piece']);
      await COUNT.execute(trx, ['usage']); // 998 + 3 breaks the check
    });
    await assert.rejects(kysely.transaction().execute((trx) => runSideBySide(trx, pieces)), /check constraint/);
    const trail = await sql<{ n: string }>`select count(*) as n from trail`.execute(kysely);
    assert.equal(Number(trail.rows[0]!.n), 0);
    const counted = await sql<{ n: number }>`select n from counters where name = 'usage'`.execute(kysely);
    assert.equal(counted.rows[0]!.n, 998);
  });
});
