/**
 * A copy of a sent WhatsApp note (kept for resend requests) must not outlive its session's logout. On
 * PostgreSQL the keeping read the session with a plain SELECT: a logout could commit between that read
 * and the insert, and the copy stayed for a device that was gone.
 */
import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../src/store/schema.js';
import { endLiveSession } from '../src/store/whatsapp-live.js';
import { keepSentMessage } from '../src/store/whatsapp-sent-messages.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, TEST_DATABASE_URL } from './fixtures/app-harness.js';
import { eventually } from './fixtures/eventually.js';

after(closeSharedAudio);

async function liveSession(db: Kysely<Database>, accountId: string, id: string): Promise<void> {
  const now = Date.now();
  await db
    .insertInto('whatsapp_sessions')
    .values({ id, account_id: accountId, env: 'live', status: 'connected', phone_number: '14155550100', qr_expires_at: null, auto_connect_at: null, auth_state: 'sealed-creds', created_at: now, updated_at: now, last_connected_at: now })
    .execute();
}

const copiesOf = async (db: Kysely<Database>, sessionId: string): Promise<number> =>
  (await db.selectFrom('whatsapp_sent_messages').select('message_id').where('session_id', '=', sessionId).execute()).length;

const note = (sessionId: string, messageId: string) => ({ sessionId, remoteJid: '14155550199@s.whatsapp.net', messageId, content: 'sealed-content', createdAt: Date.now() });

describe(`a kept WhatsApp copy and a logout at the same moment (${STORAGE_LABEL})`, () => {
  test('keeping and logging out together, many times over: no copy outlives its session\'s logout', async (t) => {
    const app = await startTestApp({ worker: false });
    t.after(() => app.close());
    const db = app.app.services.db.kysely;
    const account = await app.createAccount();
    for (let round = 0; round < 20; round++) {
      const id = `ws_race${round}`;
      await liveSession(db, account.accountId, id);
      await Promise.all([
        ...[0, 1, 2].map((i) => keepSentMessage(db, note(id, `3EB0${round}_${i}`))),
        endLiveSession(db, id, ['connected'], 'disconnected', Date.now()),
        keepSentMessage(db, note(id, `3EB0${round}_last`)),
      ]);
      assert.equal(await copiesOf(db, id), 0, `round ${round}`);
    }
  });

  test('a logout that commits while the keeping waits to insert: the copy is deleted with the others', { skip: TEST_DATABASE_URL === undefined }, async (t) => {
    const app = await startTestApp({ worker: false });
    t.after(() => app.close());
    const db = app.app.services.db.kysely;
    const account = await app.createAccount();
    const id = 'ws_racewait';
    await liveSession(db, account.accountId, id);
    const copy = note(id, '3EB0WAIT');
    // Another transaction holds the copy's key uncommitted: the keeping waits there, after reading the session.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let holding!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    const blocker = db
      .transaction()
      .execute(async (trx) => {
        await trx.insertInto('whatsapp_sent_messages').values({ session_id: id, remote_jid: copy.remoteJid, message_id: copy.messageId, content: 'other', created_at: 0 }).execute();
        holding();
        await released;
        throw new Error('rolled back on purpose');
      })
      .catch(() => undefined);
    await held;
    const waitingOnLocks = async (): Promise<number> => {
      const rows = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query ilike ${'%whatsapp_se%'}`.execute(db);
      return rows.rows[0]!.n;
    };
    const kept = keepSentMessage(db, copy);
    await eventually(async () => ((await waitingOnLocks()) >= 1 ? true : undefined), 'the keeping to wait on the held key', 10_000);
    // The logout: without a lock on the session's row it commits now, before the copy is in.
    let loggedOut = false;
    const logout = endLiveSession(db, id, ['connected'], 'disconnected', Date.now()).then(() => (loggedOut = true));
    await eventually(async () => (loggedOut || (await waitingOnLocks()) >= 2 ? true : undefined), 'the logout to end or to wait', 10_000);
    release();
    await blocker;
    await Promise.all([kept, logout]);
    assert.equal(await copiesOf(db, id), 0, 'the copy went with the logout');
    const session = await db.selectFrom('whatsapp_sessions').select(['auth_state', 'status']).where('id', '=', id).executeTakeFirstOrThrow();
    assert.deepEqual(session, { auth_state: null, status: 'disconnected' });
  });
});
