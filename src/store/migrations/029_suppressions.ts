import type { Kysely } from 'kysely';

// The recipients an account must never write to (its suppression list), per account and environment, and
// how the account hears opt-outs by reply (on or off, its own keywords beside the built-in ones).
// `recipient_key` is the recipient as compared (core/recipient-key.ts): a WhatsApp number without "+",
// a LinkedIn profile id out of its URL, a Telegram @username in lower case; `platform` is a platform's
// name or "*" (every platform). One row per (account, environment, platform, key): listing a recipient
// twice keeps the first row.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('suppressions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env', 'text', (c) => c.notNull())
    .addColumn('platform', 'text', (c) => c.notNull())
    .addColumn('recipient_key', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('reply_id', 'text')
    .addColumn('note', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('suppressions_recipient').unique().on('suppressions').columns(['account_id', 'env', 'recipient_key', 'platform']).execute();
  // The list, newest first, paged by id.
  await db.schema.createIndex('suppressions_list').on('suppressions').columns(['account_id', 'env', 'id']).execute();
  await db.schema
    .createTable('opt_out_settings')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env', 'text', (c) => c.notNull())
    .addColumn('enabled', 'integer', (c) => c.notNull())
    // A JSON array of the account's own keywords, folded as replies are (store/opt-out-settings.ts).
    .addColumn('keywords', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('opt_out_settings_pk', ['account_id', 'env'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('opt_out_settings').execute();
  await db.schema.dropTable('suppressions').execute();
}
