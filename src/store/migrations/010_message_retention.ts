import type { Kysely } from 'kysely';

// Retention finds old settled messages by age: without this index, every purge would read the whole table.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('messages_age').on('messages').column('created_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('messages_age').execute();
}
