import type { Kysely } from 'kysely';

// The WhatsApp session a message goes through, in clear (an id, not a credential; the sealed `credentials`
// still carry it for delivery). A worker claims only messages whose session no other live process holds,
// so a live message goes to the process with the socket instead of bouncing between workers.
// Older rows stay null: claimable by any worker, as before.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('whatsapp_session_id', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').dropColumn('whatsapp_session_id').execute();
}
