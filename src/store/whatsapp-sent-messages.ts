import type { Kysely, Transaction } from 'kysely';
import { dialectOf } from './dialect.js';
import type { Database } from './schema.js';

/**
 * The voice notes live WhatsApp sessions sent, kept for answering resend requests. Content arrives and
 * leaves sealed; this module never sees it in clear.
 */

export interface SentMessageRow {
  sessionId: string;
  /** The chat: `<digits>@s.whatsapp.net`. */
  remoteJid: string;
  messageId: string;
  /** The sealed message content. */
  content: string;
  createdAt: number;
}

/**
 * Keeps a sent message while its session exists with credentials (one deleted or ended meanwhile keeps nothing). The same
 * id sent again (a retry after a lost acknowledgement) replaces the content: the latest upload wins.
 * Returns false when the session is gone.
 *
 * On PostgreSQL the session's row is read FOR SHARE: a logout (endLiveSession) updates that row before
 * it deletes what the session sent, so it either waits for this insert to commit and then deletes it,
 * or commits first and this sees no credentials. A plain read let a logout commit between the read and
 * the insert, and the copy outlived it. SQLite runs one writer at a time, which orders the two anyway.
 */
export async function keepSentMessage(db: Kysely<Database>, row: SentMessageRow): Promise<boolean> {
  const postgres = dialectOf(db) === 'postgres';
  return db.transaction().execute(async (trx) => {
    let live = trx.selectFrom('whatsapp_sessions').select('id').where('id', '=', row.sessionId).where('auth_state', 'is not', null);
    if (postgres) live = live.forShare();
    if (!(await live.executeTakeFirst())) return false;
    await trx
      .insertInto('whatsapp_sent_messages')
      .values({ session_id: row.sessionId, remote_jid: row.remoteJid, message_id: row.messageId, content: row.content, created_at: row.createdAt })
      .onConflict((oc) =>
        oc.columns(['session_id', 'remote_jid', 'message_id']).doUpdateSet((eb) => ({ content: eb.ref('excluded.content'), created_at: eb.ref('excluded.created_at') })),
      )
      .execute();
    return true;
  });
}

/** The sealed content of a message the session sent to `remoteJid` no earlier than `since`. */
export async function findSentMessage(
  db: Kysely<Database>,
  key: { sessionId: string; remoteJid: string; messageId: string; since: number },
): Promise<string | undefined> {
  const row = await db
    .selectFrom('whatsapp_sent_messages')
    .select('content')
    .where('session_id', '=', key.sessionId)
    .where('remote_jid', '=', key.remoteJid)
    .where('message_id', '=', key.messageId)
    .where('created_at', '>=', key.since)
    .executeTakeFirst();
  return row?.content;
}

/** Forgets everything a session sent (it is deleted, or its device is gone for good). */
export async function forgetSentMessages(trx: Transaction<Database> | Kysely<Database>, sessionId: string): Promise<void> {
  await trx.deleteFrom('whatsapp_sent_messages').where('session_id', '=', sessionId).execute();
}

/**
 * Deletes sent messages created before `cutoff`, oldest first, at most about `batchSize` a statement
 * (rows sharing the last time of a batch go with it); returns how many went.
 */
export async function purgeSentMessagesBefore(
  db: Kysely<Database>,
  cutoff: number,
  options: { batchSize: number; shouldStop?: () => boolean; pause?: () => Promise<void> },
): Promise<number> {
  let purged = 0;
  for (;;) {
    if (options.shouldStop?.()) return purged;
    const oldest = await db
      .selectFrom('whatsapp_sent_messages')
      .select('created_at')
      .where('created_at', '<', cutoff)
      .orderBy('created_at')
      .limit(options.batchSize)
      .execute();
    const bound = oldest.at(-1)?.created_at;
    if (bound === undefined) return purged;
    const result = await db
      .deleteFrom('whatsapp_sent_messages')
      .where('created_at', '<=', Number(bound))
      .where('created_at', '<', cutoff)
      .executeTakeFirst();
    purged += Number(result.numDeletedRows);
    if (oldest.length < options.batchSize) return purged;
    await options.pause?.();
  }
}
