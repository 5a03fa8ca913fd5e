import type { Kysely } from 'kysely';

// Sending like a person (docs/sending.md, "Sending like a person"): the "recording…" indicator before a note, and
// each sender's daily rhythm (a cap per UTC day, a warm-up for new senders).
//
// On the message, what survives a restart: whether the indicator was asked for, when it was shown and
// for how long (so it is never shown twice), what a queued message waits for (a sender's cap, the
// indicator) and until when, and the UTC day whose count holds this message's place under its sender's cap.
//
// `rhythm_settings`: an account's choice per platform (no row: the platform's defaults; a row with a
// null cap: no cap). `sender_days`: notes counted per sender and UTC day, in the database so that every
// process counts alike. `senders`: the first day a sender was seen, where its warm-up starts.
// A sender is named by `sender_key`: a hash of its credential (or a WhatsApp session id), never the credential.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('recording_indicator', 'integer', (c) => c.defaultTo(0)).execute();
  await db.schema.alterTable('messages').addColumn('indicator_started_at', 'bigint').execute();
  await db.schema.alterTable('messages').addColumn('indicator_ms', 'integer').execute();
  await db.schema.alterTable('messages').addColumn('wait_reason', 'text').execute();
  await db.schema.alterTable('messages').addColumn('waited_until', 'bigint').execute();
  await db.schema.alterTable('messages').addColumn('cap_day', 'bigint').execute();

  await db.schema
    .createTable('rhythm_settings')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('platform', 'text', (c) => c.notNull())
    .addColumn('daily_cap', 'integer')
    .addColumn('warmup_start', 'integer')
    .addColumn('warmup_days', 'integer')
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('rhythm_settings_pk', ['account_id', 'platform'])
    .execute();
  await db.schema
    .createTable('sender_days')
    .addColumn('sender_key', 'text', (c) => c.notNull())
    .addColumn('day', 'bigint', (c) => c.notNull())
    .addColumn('sent', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('sender_days_pk', ['sender_key', 'day'])
    .execute();
  await db.schema
    .createTable('senders')
    .addColumn('sender_key', 'text', (c) => c.primaryKey())
    .addColumn('first_day', 'bigint', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('senders').execute();
  await db.schema.dropTable('sender_days').execute();
  await db.schema.dropTable('rhythm_settings').execute();
  for (const column of ['cap_day', 'waited_until', 'wait_reason', 'indicator_ms', 'indicator_started_at', 'recording_indicator']) {
    await db.schema.alterTable('messages').dropColumn(column).execute();
  }
}
