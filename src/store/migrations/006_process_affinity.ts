import { sql, type Kysely } from 'kysely';

// Some messages can only be sent by the process that holds a platform resource (a WhatsApp session's
// socket is the first such resource). The store names no platform: a message carries an opaque
// `affinity` key, and `affinity_leases` says which process holds that key until when. A worker leaves
// a message whose key another process holds under a live lease to that process.
// The WhatsApp session leases (whatsapp_sessions.holder / holder_expires_at) move here, and the
// WhatsApp-only routing column (messages.whatsapp_session_id) becomes the generic key.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('affinity_leases')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('holder', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await sql`insert into affinity_leases (key, holder, expires_at)
            select id, holder, holder_expires_at from whatsapp_sessions
            where holder is not null and holder_expires_at is not null`.execute(db);

  await db.schema.alterTable('messages').addColumn('affinity', 'text').execute();
  await sql`update messages set affinity = whatsapp_session_id where whatsapp_session_id is not null`.execute(db);
  await db.schema.alterTable('messages').dropColumn('whatsapp_session_id').execute();

  await db.schema.dropIndex('whatsapp_sessions_holder').execute();
  await db.schema.alterTable('whatsapp_sessions').dropColumn('holder').execute();
  await db.schema.alterTable('whatsapp_sessions').dropColumn('holder_expires_at').execute();
  await db.schema.createIndex('whatsapp_sessions_env_status').on('whatsapp_sessions').columns(['env', 'status']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('whatsapp_sessions_env_status').execute();
  await db.schema.alterTable('whatsapp_sessions').addColumn('holder', 'text').execute();
  await db.schema.alterTable('whatsapp_sessions').addColumn('holder_expires_at', 'bigint').execute();
  await sql`update whatsapp_sessions set holder = (select holder from affinity_leases where key = whatsapp_sessions.id),
            holder_expires_at = (select expires_at from affinity_leases where key = whatsapp_sessions.id)`.execute(db);
  await db.schema.createIndex('whatsapp_sessions_holder').on('whatsapp_sessions').columns(['env', 'status', 'holder_expires_at']).execute();
  await db.schema.alterTable('messages').addColumn('whatsapp_session_id', 'text').execute();
  await sql`update messages set whatsapp_session_id = affinity where platform = 'whatsapp'`.execute(db);
  await db.schema.alterTable('messages').dropColumn('affinity').execute();
  await db.schema.dropTable('affinity_leases').execute();
}
