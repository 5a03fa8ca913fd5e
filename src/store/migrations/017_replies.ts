import { sql, type Kysely } from 'kysely';

// The other half of the conversation. `message_replies`: what a recipient answered to a delivered voice
// note (never media content: its type, and the text or caption). One row per message the platform names
// (its id is unique within a sender's chat), so a message heard twice (offline messages re-delivered on
// reconnect, two processes during a rolling restart) is recorded once. On the note: when it was first
// answered (null until then, for the log's `replied` filter), and `cancel_on_reply` (1: a reply from its
// recipient to its sender before a worker takes it cancels it). All times epoch milliseconds.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('message_replies')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env', 'text', (c) => c.notNull())
    .addColumn('platform', 'text', (c) => c.notNull())
    .addColumn('sender_key', 'text', (c) => c.notNull())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('platform_reply_id', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('text', 'text')
    .addColumn('received_at', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await sql`create unique index message_replies_once on message_replies (platform, sender_key, recipient, platform_reply_id, account_id, env)`.execute(db);
  await sql`create index message_replies_message on message_replies (message_id, received_at)`.execute(db);
  await db.schema.alterTable('messages').addColumn('first_replied_at', 'bigint').execute();
  await db.schema.alterTable('messages').addColumn('cancel_on_reply', 'integer').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').dropColumn('cancel_on_reply').execute();
  await db.schema.alterTable('messages').dropColumn('first_replied_at').execute();
  await db.schema.dropTable('message_replies').execute();
}
