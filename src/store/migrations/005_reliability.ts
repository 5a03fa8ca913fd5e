import type { Kysely } from 'kysely';

// orphaned_claims: claims in a row that ended without an outcome, to fail a message that keeps killing
// its workers. instance_settings: facts about this installation, such as the check value that tells
// whether SECRET_KEY is the key the stored credentials were sealed with.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('orphaned_claims', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema
    .createTable('instance_settings')
    .ifNotExists()
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('instance_settings').ifExists().execute();
  await db.schema.alterTable('messages').dropColumn('orphaned_claims').execute();
}
