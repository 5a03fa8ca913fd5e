import { sql, type Kysely } from 'kysely';

// Who sent a note, on the note itself: `sender_key` is the platform's own name for the sender (a
// WhatsApp session id, a hash of a bot token or an `li_at`; never the credential), set when the send
// is accepted. What the platforms tell us back (replies, a sender's status) names a sender and a
// chat; this column and its index find the notes they concern without opening sealed credentials.
// Older rows stay null.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('sender_key', 'text').execute();
  await sql`create index messages_sender_recipient_idx on messages (sender_key, recipient, account_id, env)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index messages_sender_recipient_idx`.execute(db);
  await db.schema.alterTable('messages').dropColumn('sender_key').execute();
}
