import type { Kysely } from 'kysely';

// The signal keys of a live WhatsApp session (pre-keys, sessions with contacts, sender keys, app-state
// keys…): one row per key, each value sealed. The creds themselves stay in whatsapp_sessions.auth_state.
// Deleting the session row takes its keys with it.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('whatsapp_keys')
    .addColumn('session_id', 'text', (c) => c.notNull().references('whatsapp_sessions.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('value', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('whatsapp_keys_pk', ['session_id', 'type', 'key_id'])
    .execute();
  // Lease holders look for the sessions they may take over.
  await db.schema.createIndex('whatsapp_sessions_holder').on('whatsapp_sessions').columns(['env', 'status', 'holder_expires_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('whatsapp_sessions_holder').execute();
  await db.schema.dropTable('whatsapp_keys').execute();
}
