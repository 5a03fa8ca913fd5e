import type { Kysely } from 'kysely';

// A sender's own proxy (docs/proxies.md): the URL with its credentials, sealed like every other
// credential, and what may be shown of it (scheme://host:port) for GET /senders without opening the seal.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('sender_records').addColumn('proxy_sealed', 'text').execute();
  await db.schema.alterTable('sender_records').addColumn('proxy_shown', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('sender_records').dropColumn('proxy_shown').execute();
  await db.schema.alterTable('sender_records').dropColumn('proxy_sealed').execute();
}
