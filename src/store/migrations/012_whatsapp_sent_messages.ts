import type { Kysely } from 'kysely';

// What a live WhatsApp session sent, kept so the session can answer a recipient's resend request
// (Baileys' getMessage) in whichever process holds it now: the message content Baileys sent (the
// uploaded audio's URL and media key inside), sealed. One row per (session, chat, message id); kept
// 14 days (retention sweeps older rows by `created_at`); deleting the session takes its rows.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('whatsapp_sent_messages')
    .addColumn('session_id', 'text', (c) => c.notNull().references('whatsapp_sessions.id').onDelete('cascade'))
    .addColumn('remote_jid', 'text', (c) => c.notNull())
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('whatsapp_sent_messages_pk', ['session_id', 'remote_jid', 'message_id'])
    .execute();
  await db.schema.createIndex('whatsapp_sent_messages_age').on('whatsapp_sent_messages').column('created_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('whatsapp_sent_messages').execute();
}
