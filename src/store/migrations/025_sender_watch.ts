import type { Kysely } from 'kysely';

// What a sender's platform says of it beyond its status, and what it asked the platform:
//  - WhatsApp's new-chat message cap as last read (JSON: status, used, total, cycle end);
//  - live recipient checks asked today (UTC day in checks_day), counted against a daily budget.
// Both shown in GET /senders.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('sender_records').addColumn('new_chat_cap', 'text').execute();
  await db.schema.alterTable('sender_records').addColumn('checks_day', 'bigint').execute();
  await db.schema.alterTable('sender_records').addColumn('checks_today', 'integer', (c) => c.notNull().defaultTo(0)).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('sender_records').dropColumn('checks_today').execute();
  await db.schema.alterTable('sender_records').dropColumn('checks_day').execute();
  await db.schema.alterTable('sender_records').dropColumn('new_chat_cap').execute();
}
