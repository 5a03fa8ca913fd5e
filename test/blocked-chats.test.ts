import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe } from 'node:test';
import { sql } from 'kysely';
import { it } from './fixtures/timed.js';
import { migrate, openDb, type Db } from '../src/store/db.js';
import { isChatBlocked, setChatBlocked } from '../src/store/listeners.js';
import { STORAGE_LABEL, TEST_DATABASE_URL } from './fixtures/app-harness.js';

/**
 * A chat that blocked a sender: the worker asks before each note, and the notes that ask in the same
 * turn share one query. Each must get the answer for its own sender AND recipient, not for a sender
 * of one of them with the recipient of another.
 */
describe(`blocked chats asked together (${STORAGE_LABEL})`, () => {
  let dataDir: string;
  const schema = `t_${randomBytes(6).toString('hex')}`;
  let db: Db;

  before(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'voicenote-blocked-'));
    db = await openDb({ databaseUrl: TEST_DATABASE_URL, dataDir, ...(TEST_DATABASE_URL ? { pgSchema: schema } : {}) });
    await migrate(db);
  });
  after(async () => {
    if (db && TEST_DATABASE_URL) await sql`drop schema if exists ${sql.id(schema)} cascade`.execute(db.kysely).catch(() => undefined);
    await db?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('each note of one look-up gets the answer for its own pair; a chat let back in is no longer blocked', async () => {
    await setChatBlocked(db.kysely, { platform: 'telegram', senderKey: 'bot_a', recipient: '100' }, true, Date.now());
    await setChatBlocked(db.kysely, { platform: 'telegram', senderKey: 'bot_b', recipient: '200' }, true, Date.now());
    const ask = (senderKey: string, recipient: string) => isChatBlocked(db.kysely, { platform: 'telegram', senderKey, recipient });
    // In one turn: both senders and both recipients are in the query's lists.
    const answers = await Promise.all([ask('bot_a', '100'), ask('bot_a', '200'), ask('bot_b', '100'), ask('bot_b', '200'), ask('bot_c', '300')]);
    assert.deepEqual(answers, [true, false, false, true, false]);
    // Another platform's rows are not this one's.
    assert.equal(await isChatBlocked(db.kysely, { platform: 'whatsapp', senderKey: 'bot_a', recipient: '100' }), false);

    await setChatBlocked(db.kysely, { platform: 'telegram', senderKey: 'bot_a', recipient: '100' }, false, Date.now());
    assert.deepEqual(await Promise.all([ask('bot_a', '100'), ask('bot_b', '200')]), [false, true]);
  });
});
