import { sql, type Kysely } from 'kysely';

// Telegram accounts linked by QR code (`ts_…` sessions), beside bots. `auth_key` holds the sealed
// MTProto authorization (auth key and data centre): never in clear. The process that holds a live
// session does so under an affinity lease keyed by the session id, as for WhatsApp. `resting_until`:
// Telegram said PEER_FLOOD; the account sends nothing before then.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('telegram_sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text')
    .addColumn('username', 'text')
    .addColumn('phone_number', 'text')
    .addColumn('auth_key', 'text')
    .addColumn('qr_payload', 'text')
    .addColumn('qr_expires_at', 'bigint')
    .addColumn('auto_connect_at', 'bigint')
    .addColumn('resting_until', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('last_connected_at', 'bigint')
    .execute();
  await sql`create index telegram_sessions_owner_idx on telegram_sessions (account_id, env, id)`.execute(db);
  await sql`create index telegram_sessions_holder_idx on telegram_sessions (env, status)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('telegram_sessions').execute();
}
