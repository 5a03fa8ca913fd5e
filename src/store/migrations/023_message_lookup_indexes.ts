import { sql, type Kysely } from 'kysely';

// Every accepted send writes one entry into each index of `messages`, inside the commit the 202 waits
// for. Three of them only ever answer questions about a few notes, so they index only those:
//  - a reply is tied to a note delivered to that chat (delivered_at set), and cancels the waiting notes
//    that asked for it (cancel_on_reply = 1): two partial indexes instead of one over every note, whose
//    entries (ordered by sender and recipient, not by time) each touched a page of their own per send;
//  - a platform's receipt names a note the platform has answered (platform_message_id set).
// A send that is none of these (most of them) now writes to none of the three.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`drop index messages_sender_recipient_idx`.execute(db);
  await sql`create index messages_delivered_chat_idx on messages (sender_key, recipient, delivered_at) where delivered_at is not null`.execute(db);
  await sql`create index messages_cancel_on_reply_idx on messages (sender_key, recipient) where cancel_on_reply = 1`.execute(db);
  await sql`drop index messages_platform_message`.execute(db);
  await sql`create index messages_platform_message on messages (platform_message_id) where platform_message_id is not null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index messages_platform_message`.execute(db);
  await sql`create index messages_platform_message on messages (platform_message_id)`.execute(db);
  await sql`drop index messages_cancel_on_reply_idx`.execute(db);
  await sql`drop index messages_delivered_chat_idx`.execute(db);
  await sql`create index messages_sender_recipient_idx on messages (sender_key, recipient, account_id, env)`.execute(db);
}
