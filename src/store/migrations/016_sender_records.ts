import { sql, type Kysely } from 'kysely';

// Each sender's health in one place (docs/senders.md, "Senders"): one row per sender an account has used in an
// environment, named by the platform's own `sender_key` (a WhatsApp session id, a hash of a bot token or
// an `li_at`; never the credential). `status` is what the platform last said of it (`ok`, `resting`,
// `restricted`, `expired`, `disconnected`), `reason` why in words, `until` when a rest or lock ends;
// `failure_code` the delivery error that made it `expired` (its other notes fail with it).
// `sent_today` counts the notes delivered on UTC day `sent_day`. `label` is what a person recognises
// when the platform told us (a bot's @username), never a credential.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('sender_records')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env', 'text', (c) => c.notNull())
    .addColumn('platform', 'text', (c) => c.notNull())
    .addColumn('sender_key', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('label', 'text')
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('ok'))
    .addColumn('reason', 'text')
    .addColumn('until', 'bigint')
    .addColumn('failure_code', 'text')
    .addColumn('last_sent_at', 'bigint')
    .addColumn('sent_day', 'bigint')
    .addColumn('sent_today', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await sql`create unique index sender_records_key_idx on sender_records (sender_key, platform, account_id, env)`.execute(db);
  await sql`create index sender_records_owner_idx on sender_records (account_id, env, id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('sender_records').execute();
}
