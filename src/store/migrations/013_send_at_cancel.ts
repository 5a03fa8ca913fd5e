import type { Kysely } from 'kysely';

// A send may be scheduled (`send_at`, the moment asked for; the due time is next_attempt_at as for
// every message) and a note not yet taken by a worker may be canceled (`canceled_at`). Both epoch ms,
// null when not given / not canceled; older rows stay null.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('send_at', 'bigint').execute();
  await db.schema.alterTable('messages').addColumn('canceled_at', 'bigint').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').dropColumn('canceled_at').execute();
  await db.schema.alterTable('messages').dropColumn('send_at').execute();
}
