import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { sql } from 'kysely';
import { closeAll } from './fixtures/close-all.js';
import { captureLogs } from './fixtures/log-capture.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, type TestAccount, type TestApp } from './fixtures/app-harness.js';
import { test } from './fixtures/timed.js';

/**
 * A dry run "writes nothing but a log line" and "counts against the rate limit but not the quota"
 * (docs/sending.md, "Dry runs"): every table of the storage is read before and after, the data
 * directory's download folder is looked at, and the rate-limit headers of two dry runs compared.
 */

// A bot this account has never sent from: a dry run must not make it a sender.
const NEW_BOT = '555000111:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ';

after(async () => {
  await closeSharedAudio();
});

describe(`a dry run writes nothing but a log line (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  const logs = captureLogs('info');

  before(async () => {
    t = await startTestApp({ worker: true, logger: logs.logger });
    account = await t.createAccount({ quota: 5, rateLimit: 100 });
  });
  after(() => closeAll(t));

  /** Every row of every table of this app's storage (its own schema on PostgreSQL), by table. */
  async function everyRow(): Promise<Record<string, string>> {
    const db = t.app.services.db.kysely;
    const schema = t.app.services.db.dialect === 'postgres' ? (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0]!.s : undefined;
    const tables = (await db.introspection.getTables()).filter((table) => !table.isView && (schema === undefined || table.schema === schema));
    assert.ok(tables.some((table) => table.name === 'messages'), `the tables of the storage were found: ${tables.map((x) => x.name).join(', ')}`);
    const rows: Record<string, string> = {};
    for (const table of tables) {
      const found = await sql<Record<string, unknown>>`select * from ${sql.table(table.name)}`.execute(db);
      rows[table.name] = JSON.stringify(found.rows.map((row) => JSON.stringify(row)).sort());
    }
    return rows;
  }

  const changedTables = (before: Record<string, string>, after: Record<string, string>): string[] =>
    [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((name) => before[name] !== after[name]).sort();

  const dryBody = (extra: Record<string, unknown> = {}) => ({
    platform: 'telegram',
    recipient: '123456789',
    audio_url: t.voiceUrl,
    session: { bot_token: NEW_BOT },
    caption: 'hello',
    send_at: new Date(Date.now() + 3_600_000).toISOString(),
    recipient_time_zone: 'Europe/Paris',
    dry_run: true,
    ...extra,
  });

  test('no row of any table changes and no download is left, passing or failing; one log line says what was checked', async () => {
    // A first request of the key does what any request does (its last use noted): before the snapshot.
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/usage', key: account.testKey })).statusCode, 200);
    const rowsBefore = await everyRow();
    const linesBefore = logs.lines.length;

    const passing = await t.send(account.testKey, dryBody(), { 'idempotency-key': 'dry-writes-1' });
    assert.equal(passing.statusCode, 200, passing.body);
    assert.equal(passing.json().would_send, true, passing.body);
    assert.equal(passing.json().message.sender_id, null, 'the new bot is not made a sender');
    assert.equal(passing.json().message.recipient_time_zone, 'Europe/Paris', 'what would be sent, its zone too');
    const failing = await t.send(account.testKey, dryBody({ audio_url: t.voiceUrl.replace(/[^/]+$/, 'missing.ogg') }));
    assert.equal(failing.statusCode, 200, failing.body);
    assert.equal(failing.json().would_send, false, failing.body);

    assert.deepEqual(changedTables(rowsBefore, await everyRow()), [], 'no table written by two dry runs');
    const downloads = await readdir(join(t.dataDir, 'tmp', 'audio')).catch(() => []);
    assert.deepEqual(downloads, [], 'the probed downloads are deleted');
    const dryLines = logs.lines.slice(linesBefore).filter((line) => line.msg === 'dry run of a send');
    assert.equal(dryLines.length, 2, 'one log line a dry run');
    assert.deepEqual(
      dryLines.map((line) => line.would_send),
      [true, false],
    );
    assert.ok((dryLines[1]!.checks as string[]).includes('audio:fail'), JSON.stringify(dryLines[1]));
  });

  test('a dry run spends the send rate limit, not the quota', async () => {
    const first = await t.send(account.testKey, dryBody());
    const second = await t.send(account.testKey, dryBody());
    assert.equal(first.statusCode, 200, first.body);
    assert.equal(second.statusCode, 200, second.body);
    assert.equal(Number(second.headers['x-ratelimit-remaining']), Number(first.headers['x-ratelimit-remaining']) - 1, 'each dry run is one request of the rate limit');
    assert.equal(second.headers['x-usage-remaining'], '5');
    assert.equal(first.headers['x-usage-remaining'], '5');
    const usage = (await t.request({ method: 'GET', url: '/api/v1/usage', key: account.testKey })).json();
    assert.equal(usage.usage.total_sent, 0);
  });
});
