import { sql, type Kysely } from 'kysely';

// Why a note was canceled: `requested` (DELETE /messages/{id}, the dashboard) or `replied` (its recipient
// answered a cancel_on_reply note first), so GET /messages/{id} and the dashboard say so, not only the
// voice_note.canceled webhook. Notes canceled before this column: one that did not ask for
// cancel_on_reply can only have been canceled on request; one that did stays null (not recorded).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('cancel_reason', 'text').execute();
  await sql`update messages set cancel_reason = 'requested' where status = 'canceled' and coalesce(cancel_on_reply, 0) = 0`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').dropColumn('cancel_reason').execute();
}
