import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe } from 'node:test';
import pg from 'pg';
import { it } from './fixtures/timed.js';
import { migrate, openDb } from '../src/store/db.js';
import { TEST_DATABASE_URL } from './fixtures/app-harness.js';

const schemaName = () => `t_${randomBytes(6).toString('hex')}`;

/**
 * Many apps share one PostgreSQL database, each in a schema of its own (the suite's files run side by
 * side this way). A start migrates while another user of the database drops its schema: the start
 * must not trip over the tables that vanish meanwhile. Kysely's own introspector reads every schema's
 * columns and failed such starts with 42P01 ("relation t_….suppressions does not exist").
 */
describe('migrating beside schemas being dropped (postgres)', { skip: TEST_DATABASE_URL ? false : 'PostgreSQL only (TEST_DATABASE_URL)' }, () => {
  it('every start migrates while other schemas, full of tables, are dropped at the same time', { timeout: 120_000 }, async () => {
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    const doomed: string[] = [];
    try {
      for (let i = 0; i < 12; i++) {
        const schema = schemaName();
        doomed.push(schema);
        const tables = Array.from({ length: 25 }, (_, t) => `create table ${schema}.table_${t} (id serial primary key, body text);`).join('\n');
        await admin.query(`create schema ${schema};\n${tables}`);
      }
      let dropping = true;
      const drops = (async () => {
        for (const schema of doomed) await admin.query(`drop schema ${schema} cascade`);
        dropping = false;
      })();
      const starts: Array<Promise<string[]>> = [];
      const made: string[] = [];
      for (let i = 0; i < 4; i++) {
        const schema = schemaName();
        made.push(schema);
        starts.push(
          (async () => {
            const db = await openDb({ databaseUrl: TEST_DATABASE_URL, dataDir: '/nonexistent', pgSchema: schema, poolSize: 2 });
            try {
              return await migrate(db);
            } finally {
              await db.close();
            }
          })(),
        );
      }
      const applied = await Promise.all(starts);
      await drops;
      assert.equal(dropping, false);
      for (const names of applied) assert.ok(names.includes('001_initial') && names.includes('029_suppressions'), `every migration applied: ${names.join(', ')}`);
      for (const schema of made) await admin.query(`drop schema if exists ${schema} cascade`);
    } finally {
      for (const schema of doomed) await admin.query(`drop schema if exists ${schema} cascade`).catch(() => undefined);
      await admin.end();
    }
  });
});
