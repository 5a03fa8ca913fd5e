import { sql, type Kysely } from 'kysely';
import { dropListeningAccounts } from './listening-accounts.js';
import type { Database, LinkedinListenedConversationsTable, LinkedinListenersTable } from './schema.js';

export type LinkedinListenerRow = LinkedinListenersTable;
export type ListenedConversationRow = LinkedinListenedConversationsTable;

/** How long an li_at is listened to after its last note. */
export const LINKEDIN_LISTEN_DAYS = 14;
const DAY_MS = 86_400_000;

/**
 * A live send asked to listen: keep the session (sealed by the caller) until 14 days from now. The first
 * look is placed when a note is delivered (noteLinkedinConversation); until then there is nothing to read.
 */
export async function listenToLinkedin(
  db: Kysely<Database>,
  senderKey: string,
  sealedJar: string,
  now: number,
  owner: { accountId: string; env: string },
): Promise<void> {
  const until = now + LINKEDIN_LISTEN_DAYS * DAY_MS;
  await db
    .insertInto('linkedin_listeners')
    .values({ sender_key: senderKey, jar: sealedJar, account_id: owner.accountId, env: owner.env, listen_until: until, last_note_at: now, checks: 0, next_check_at: until, updated_at: now })
    .onConflict((oc) => oc.column('sender_key').doUpdateSet({ jar: sealedJar, account_id: owner.accountId, env: owner.env, listen_until: until, updated_at: now }))
    .execute();
}

/**
 * A note of this li_at went into a conversation: when the li_at is listened to, that conversation is read
 * from now on, the intervals start again from this note and the window moves to 14 days after it.
 * Nothing is kept for an li_at nobody asked to listen to.
 */
export async function noteLinkedinConversation(
  db: Kysely<Database>,
  note: { senderKey: string; conversationUrn: string; recipient: string; at: number },
  firstCheckAt: number,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const listener = await trx.selectFrom('linkedin_listeners').select('listen_until').where('sender_key', '=', note.senderKey).executeTakeFirst();
    if (!listener) return false;
    await trx
      .insertInto('linkedin_listened_conversations')
      .values({ sender_key: note.senderKey, conversation_urn: note.conversationUrn, recipient: note.recipient, note_at: note.at })
      .onConflict((oc) => oc.columns(['sender_key', 'conversation_urn']).doUpdateSet({ recipient: note.recipient, note_at: note.at }))
      .execute();
    const until = Math.max(Number(listener.listen_until), note.at + LINKEDIN_LISTEN_DAYS * DAY_MS);
    await trx
      .updateTable('linkedin_listeners')
      .set({ last_note_at: note.at, checks: 0, next_check_at: firstCheckAt, listen_until: until, updated_at: note.at })
      .where('sender_key', '=', note.senderKey)
      .execute();
    return true;
  });
}

/** li_ats whose next look is due. */
export async function dueLinkedinListeners(db: Kysely<Database>, now: number): Promise<LinkedinListenerRow[]> {
  return db.selectFrom('linkedin_listeners').selectAll().where('next_check_at', '<=', now).where('listen_until', '>', now).execute();
}

/** li_ats listened to that wrote into a conversation: each keeps a realtime stream open. */
export async function streamableLinkedinListeners(db: Kysely<Database>, now: number): Promise<LinkedinListenerRow[]> {
  return db
    .selectFrom('linkedin_listeners as l')
    .selectAll('l')
    .where('l.listen_until', '>', now)
    .where((eb) => eb.exists(eb.selectFrom('linkedin_listened_conversations as c').select('c.sender_key').whereRef('c.sender_key', '=', 'l.sender_key')))
    .execute();
}

export async function findLinkedinListener(db: Kysely<Database>, senderKey: string): Promise<LinkedinListenerRow | undefined> {
  return db.selectFrom('linkedin_listeners').selectAll().where('sender_key', '=', senderKey).executeTakeFirst();
}

export async function listenedConversations(db: Kysely<Database>, senderKey: string): Promise<ListenedConversationRow[]> {
  return db.selectFrom('linkedin_listened_conversations').selectAll().where('sender_key', '=', senderKey).execute();
}

/** A look was made: the next is placed. Only if no newer note restarted the intervals meanwhile. */
export async function checkedLinkedin(db: Kysely<Database>, senderKey: string, seen: { lastNoteAt: number; checks: number }, nextCheckAt: number, now: number): Promise<void> {
  await db
    .updateTable('linkedin_listeners')
    .set({ checks: seen.checks + 1, next_check_at: nextCheckAt, updated_at: now })
    .where('sender_key', '=', senderKey)
    .where('last_note_at', '=', seen.lastNoteAt)
    .execute();
}

/** The day's places under the sender's cap are taken: the next look waits until `at` (a new day), without counting as one. */
export async function postponeLinkedinLook(db: Kysely<Database>, senderKey: string, seen: { lastNoteAt: number }, at: number, now: number): Promise<void> {
  await db
    .updateTable('linkedin_listeners')
    .set({ next_check_at: at, updated_at: now })
    .where('sender_key', '=', senderKey)
    .where('last_note_at', '=', seen.lastNoteAt)
    .execute();
}

/** Erases an li_at's kept session and its conversations (the session ended, or the listening was deleted). */
export async function forgetLinkedinListener(db: Kysely<Database>, senderKey: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('linkedin_listened_conversations').where('sender_key', '=', senderKey).execute();
    await trx.deleteFrom('linkedin_listeners').where('sender_key', '=', senderKey).execute();
    await dropListeningAccounts(trx, 'linkedin', [senderKey]);
  });
}

/** Windows that ended (14 days without a note): their sessions are erased. Returns how many. */
export async function endExpiredLinkedinListening(db: Kysely<Database>, now: number): Promise<number> {
  const ended = await db.selectFrom('linkedin_listeners').select('sender_key').where('listen_until', '<=', now).execute();
  for (const { sender_key } of ended) await forgetLinkedinListener(db, sender_key);
  return ended.length;
}

/** A follow-up due soon into a listened conversation: that conversation is looked at once before it goes. */
export interface FollowUpDue {
  id: string;
  sender_key: string;
  conversation_urn: string;
}

/**
 * Live notes that asked for `cancel_on_reply`, still waiting for a worker and due before `until`, that go
 * into a conversation of a listened li_at: a person opens the thread before writing, so its latest
 * messages are read first (a reply since the last look cancels the note before a worker takes it).
 */
export async function followUpsDueBefore(db: Kysely<Database>, until: number): Promise<FollowUpDue[]> {
  return db
    .selectFrom('messages as m')
    .innerJoin('linkedin_listened_conversations as c', (join) => join.onRef('c.sender_key', '=', 'm.sender_key').onRef('c.recipient', '=', 'm.recipient'))
    .select(['m.id', 'c.sender_key', 'c.conversation_urn'])
    .where('m.platform', '=', 'linkedin')
    .where('m.env', '=', 'live')
    .where('m.status', '=', 'queued')
    // Written out, not bound: the planner picks the partial index (cancel_on_reply = 1) only for a literal.
    .where(sql<boolean>`m.cancel_on_reply = 1`)
    .where('m.next_attempt_at', '<=', until)
    .execute();
}
