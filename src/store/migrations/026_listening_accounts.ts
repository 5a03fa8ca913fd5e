import { sql, type Kysely } from 'kysely';

// Whose listening it is: one row per account and environment that asked to listen (`listen: true`) to a
// sender (a Telegram bot or a LinkedIn li_at, by its sender key). A listener (telegram_listeners,
// linkedin_listeners) is one per credential, shared when two accounts send with the same bot; its state is
// shown to, and ended by, only the accounts named here, so a sandbox note sent with a live bot's token
// neither sees nor erases the live listener. Filled from what was kept before: a LinkedIn listener's own
// account, and the accounts with a live note from a listened bot.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('listening_accounts')
    .addColumn('platform', 'text', (c) => c.notNull())
    .addColumn('sender_key', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env', 'text', (c) => c.notNull())
    .addColumn('since', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('listening_accounts_pk', ['platform', 'sender_key', 'account_id', 'env'])
    .execute();
  await sql`
    insert into listening_accounts (platform, sender_key, account_id, env, since)
    select 'linkedin', sender_key, account_id, env, updated_at from linkedin_listeners where account_id is not null and env is not null`.execute(db);
  await sql`
    insert into listening_accounts (platform, sender_key, account_id, env, since)
    select distinct 'telegram', l.sender_key, m.account_id, m.env, l.updated_at
    from telegram_listeners l join messages m on m.sender_key = l.sender_key and m.platform = 'telegram' and m.env = 'live'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('listening_accounts').execute();
}
