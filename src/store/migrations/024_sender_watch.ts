import type { Kysely } from 'kysely';

// What a sender's platform says of it beyond its status: WhatsApp's new-chat message cap as last read
// (JSON: status, used, total, cycle end), shown in GET /senders.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('sender_records').addColumn('new_chat_cap', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('sender_records').dropColumn('new_chat_cap').execute();
}
