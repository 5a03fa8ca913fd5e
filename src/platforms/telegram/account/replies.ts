import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../../../store/schema.js';

/**
 * A reply heard by a linked Telegram account, in the one shape every listener hands the inbound
 * recorder: the sender (the ts_ session), the recipient as our note named it, and what they sent.
 */
export interface HeardTelegramReply {
  kind: 'reply';
  platform: 'telegram';
  senderKey: string;
  from: string;
  reply: { platformId: string; type: 'text' | 'voice' | 'other'; text: string | null; at: number };
}

/**
 * Turns the account's incoming private messages into replies for `onHeard`: only from people our notes
 * went to from this session (found by the ids Telegram gave the notes), never our own messages.
 * The recorder is wired to `onHeard` where it exists; this knows nothing of notes' rows beyond that.
 */
export function createAccountReplies(db: Kysely<Database>, logger: Logger, onHeard: (heard: HeardTelegramReply) => void | Promise<void>): (sessionId: string, update: unknown) => void {
  async function hear(sessionId: string, update: unknown): Promise<void> {
    const incoming = incomingMessage(update);
    if (!incoming) return;
    const note = await db
      .selectFrom('messages')
      .select('recipient')
      .where('sender_key', '=', sessionId)
      .where('platform_message_id', 'like', `tg:${sessionId}:%@${incoming.userId}`)
      .orderBy('created_at', 'desc')
      .limit(1)
      .executeTakeFirst();
    if (!note) return;
    await onHeard({
      kind: 'reply',
      platform: 'telegram',
      senderKey: sessionId,
      from: note.recipient,
      reply: { platformId: `tg:${sessionId}:${incoming.id}@${incoming.userId}`, type: incoming.type, text: incoming.text, at: incoming.date * 1000 },
    });
  }
  return (sessionId, update) => void hear(sessionId, update).catch((err: unknown) => logger.warn({ err, session_id: sessionId }, 'could not hand on a Telegram reply'));
}

interface Incoming {
  id: number;
  userId: string;
  text: string | null;
  type: 'text' | 'voice' | 'other';
  date: number;
}

/** A private message someone sent the account (updateShortMessage, or updateNewMessage of a message from a user). */
function incomingMessage(update: unknown): Incoming | undefined {
  const u = update as { className?: string; out?: boolean; id?: number; userId?: unknown; message?: unknown; date?: number; update?: unknown; updates?: unknown[] };
  if (u.className === 'UpdateShortMessage' && !u.out && typeof u.id === 'number') {
    const text = typeof u.message === 'string' ? u.message : '';
    return { id: u.id, userId: String(u.userId), text, type: 'text', date: u.date ?? 0 };
  }
  if (u.className === 'UpdateShort') return incomingMessage(u.update);
  if ((u.className === 'Updates' || u.className === 'UpdatesCombined') && Array.isArray(u.updates)) {
    for (const inner of u.updates) {
      const found = incomingMessage(inner);
      if (found) return found;
    }
    return undefined;
  }
  if (u.className === 'UpdateNewMessage') {
    const m = u.message as { className?: string; out?: boolean; id?: number; peerId?: { className?: string; userId?: unknown }; message?: string; date?: number; media?: { className?: string; voice?: boolean } };
    if (m?.className !== 'Message' || m.out || m.peerId?.className !== 'PeerUser' || typeof m.id !== 'number') return undefined;
    const type = m.media ? (m.media.className === 'MessageMediaDocument' && m.media.voice ? 'voice' : 'other') : 'text';
    return { id: m.id, userId: String(m.peerId.userId), text: m.message ? m.message : null, type, date: m.date ?? 0 };
  }
  return undefined;
}
