import type { Kysely } from 'kysely';

// The X-Request-Id of the request that created a message: its delivery log lines carry it, so an
// operator can follow one send from the HTTP request to the platform. Older rows stay null.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('request_id', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').dropColumn('request_id').execute();
}
