import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { recordReceipt } from '../../../store/receipts.js';
import type { Database } from '../../../store/schema.js';

/**
 * Receipts a linked Telegram account hears (bots never get them): updateReadHistoryOutbox — the
 * recipient read the chat up to `max_id` — is `voice_note.read` for our notes up to it;
 * updateReadMessagesContents naming a note — its voice was played — is `voice_note.played`, at the
 * `date` it carries when it carries one. Updates missed while no connection listened come here too,
 * through updates.getDifference (update-feed.ts).
 * Our notes are found by the id Telegram gave them (`tg:<session>:<message id>@<user id>`, adapter.ts).
 */
export function createAccountReceipts(db: Kysely<Database>, logger: Logger): (sessionId: string, update: unknown) => void {
  async function hear(sessionId: string, update: unknown): Promise<void> {
    for (const one of flatten(update)) {
      const u = one as { className?: string; peer?: { className?: string; userId?: unknown }; maxId?: number; messages?: number[]; date?: number };
      const at = Date.now();
      if (u.className === 'UpdateReadHistoryOutbox' && u.peer?.className === 'PeerUser' && typeof u.maxId === 'number') {
        const rows = await db
          .selectFrom('messages')
          .select('platform_message_id')
          .where('sender_key', '=', sessionId)
          .where('platform_message_id', 'like', `tg:${sessionId}:%@${String(u.peer.userId)}`)
          .execute();
        for (const row of rows) {
          const sent = messageNumber(row.platform_message_id, sessionId);
          if (sent !== undefined && sent <= u.maxId) await recordReceipt(db, { platformMessageId: row.platform_message_id!, kind: 'read', at, source: 'telegram' });
        }
      } else if (u.className === 'UpdateReadMessagesContents' && Array.isArray(u.messages)) {
        for (const id of u.messages) {
          const rows = await db.selectFrom('messages').select('platform_message_id').where('platform_message_id', 'like', `tg:${sessionId}:${id}@%`).execute();
          // When it was played, as Telegram says (its `date`): heard later through a difference, it keeps its own time.
          const playedAt = typeof u.date === 'number' && u.date > 0 ? u.date * 1000 : at;
          for (const row of rows) await recordReceipt(db, { platformMessageId: row.platform_message_id!, kind: 'played', at: playedAt, source: 'telegram' });
        }
      }
    }
  }
  return (sessionId, update) => void hear(sessionId, update).catch((err: unknown) => logger.warn({ err, session_id: sessionId }, 'could not record a Telegram receipt'));
}

/** The single updates inside whatever container Telegram sent them in. */
function flatten(update: unknown): unknown[] {
  const u = update as { className?: string; update?: unknown; updates?: unknown[] };
  if (u.className === 'UpdateShort') return [u.update];
  if ((u.className === 'Updates' || u.className === 'UpdatesCombined') && Array.isArray(u.updates)) return u.updates;
  return [update];
}

function messageNumber(platformMessageId: string | null | undefined, sessionId: string): number | undefined {
  const match = platformMessageId ? new RegExp(`^tg:${sessionId}:(\\d+)@`).exec(platformMessageId) : null;
  return match ? Number(match[1]) : undefined;
}
