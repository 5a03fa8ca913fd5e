import { sql, type Kysely } from 'kysely';

// Send windows (docs/sending.md, "Send windows"): the days and hours an account's notes may go on a
// platform, in an IANA time zone. Beside `rhythm_settings` rather than in it: a row there means "this
// account's own cap", and setting a window must not take the platform's default cap away.
// `days`: the weekdays as "mon,tue,…"; `start_time`, `end_time`: "HH:MM" in `time_zone`'s wall clock.
//
// On the message, the recipient's zone when the note named one: the window applies in both zones.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('send_windows')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('platform', 'text', (c) => c.notNull())
    .addColumn('days', 'text', (c) => c.notNull())
    .addColumn('start_time', 'text', (c) => c.notNull())
    .addColumn('end_time', 'text', (c) => c.notNull())
    .addColumn('time_zone', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('send_windows_pk', ['account_id', 'platform'])
    .execute();
  await db.schema.alterTable('messages').addColumn('recipient_time_zone', 'text').execute();
  // A changed window wakes the notes waiting for the old one: found without reading the account's other notes.
  await sql`create index messages_window_waiting on messages (account_id, platform) where status = 'queued' and wait_reason = 'send_window'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index messages_window_waiting`.execute(db);
  await db.schema.alterTable('messages').dropColumn('recipient_time_zone').execute();
  await db.schema.dropTable('send_windows').execute();
}
