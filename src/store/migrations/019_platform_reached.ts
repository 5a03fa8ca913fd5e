import type { Kysely } from 'kysely';

// Whether any attempt of a note may have reached its platform (1) or none did (0): an attempt that
// called the platform (whatever it answered, a timeout included), or a claim that ended without an
// outcome (its worker died; it may have called). A canceled note is given back to the monthly quota
// only when this is 0: a note that waits for a retry after a timeout may have been delivered already.
// Rows from before this column read 0, as before (their cancel gave the note back).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('platform_reached', 'integer', (c) => c.notNull().defaultTo(0)).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').dropColumn('platform_reached').execute();
}
