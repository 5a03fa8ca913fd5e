import type { Kysely } from 'kysely';

// What a platform said of a recipient (POST /recipients/check, and a live WhatsApp send before its first
// note to a number): kept per sender for 30 days, with the address the platform gave (a WhatsApp JID).
// Beside 016 (the sender records), which was already applied where this lands.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('recipient_checks')
    .addColumn('sender_key', 'text', (c) => c.notNull())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('exists', 'integer', (c) => c.notNull())
    .addColumn('address', 'text')
    .addColumn('checked_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('recipient_checks_pk', ['sender_key', 'recipient'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('recipient_checks').execute();
}
