import type { Kysely } from 'kysely';

// LinkedIn senders listened to (`listen: true`): one row per li_at (its sender key), the whole session
// (li_at, csrf_token, the browser's cookies and user agent) sealed in `jar`, kept until `listen_until`
// (14 days after its last note). `last_note_at` and `checks` place the next look (growing intervals after
// a note: platforms/linkedin/listening.ts); `next_check_at` when it is due. The conversations its notes
// went into are one row each in `linkedin_listened_conversations`, with the recipient as the notes name
// it and when the latest note went in (only newer messages are read as replies). `account_id` and `env`
// name whose daily rhythm a look counts in (the account that asked to listen). All times epoch ms.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('linkedin_listeners')
    .addColumn('sender_key', 'text', (c) => c.primaryKey())
    .addColumn('jar', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text')
    .addColumn('env', 'text')
    .addColumn('listen_until', 'bigint', (c) => c.notNull())
    .addColumn('last_note_at', 'bigint', (c) => c.notNull())
    .addColumn('checks', 'integer', (c) => c.notNull())
    .addColumn('next_check_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('linkedin_listened_conversations')
    .addColumn('sender_key', 'text', (c) => c.notNull())
    .addColumn('conversation_urn', 'text', (c) => c.notNull())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('note_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('linkedin_listened_conversations_pk', ['sender_key', 'conversation_urn'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('linkedin_listened_conversations').execute();
  await db.schema.dropTable('linkedin_listeners').execute();
}
