import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { ReplyType } from '../../../inbound/heard.js';
import type { Database } from '../../../store/schema.js';
import { telegramPlatformMessageId } from './adapter.js';

/**
 * A reply heard by a linked Telegram account, in the one shape every listener hands the inbound
 * recorder: the sender (the ts_ session), the recipient as our note named it, and what they sent.
 */
export interface HeardTelegramReply {
  kind: 'reply';
  platform: 'telegram';
  senderKey: string;
  from: string;
  reply: { platformId: string; type: ReplyType; text: string | null; at: number; quotes?: string };
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
      reply: {
        platformId: telegramPlatformMessageId(sessionId, incoming.userId, incoming.id),
        type: incoming.type,
        text: incoming.text,
        at: incoming.date * 1000,
        // Telegram's Reply names the message answered: our note's id in that chat, as the adapter kept it.
        ...(incoming.replyToMsgId !== undefined ? { quotes: telegramPlatformMessageId(sessionId, incoming.userId, incoming.replyToMsgId) } : {}),
      },
    });
  }
  return (sessionId, update) => void hear(sessionId, update).catch((err: unknown) => logger.warn({ err, session_id: sessionId }, 'could not hand on a Telegram reply'));
}

interface Incoming {
  id: number;
  userId: string;
  text: string | null;
  type: ReplyType;
  date: number;
  replyToMsgId: number | undefined;
}

type GramjsMedia = { className?: string; voice?: boolean; video?: boolean; round?: boolean; document?: { className?: string; attributes?: Array<{ className?: string; voice?: boolean }> } };

/**
 * What a message carries, as Telegram's apps show it (node_modules/telegram/tl/api.d.ts: MessageMediaPhoto,
 * MessageMediaDocument with its voice/video/round flags and the document's attributes): a voice message,
 * a sticker, a video (round ones and GIFs too), music (DocumentAttributeAudio without voice), any other
 * file; a photo is an image; a location, a contact, a poll… are 'other'.
 */
function mediaType(media: GramjsMedia | undefined): ReplyType {
  if (!media) return 'text';
  if (media.className === 'MessageMediaPhoto') return 'image';
  if (media.className !== 'MessageMediaDocument') return 'other';
  const attributes = media.document?.attributes ?? [];
  const has = (kind: string) => attributes.some((a) => a.className === kind);
  if (media.voice || attributes.some((a) => a.className === 'DocumentAttributeAudio' && a.voice)) return 'voice';
  if (has('DocumentAttributeSticker')) return 'sticker';
  if (media.video || media.round || has('DocumentAttributeVideo') || has('DocumentAttributeAnimated')) return 'video';
  if (has('DocumentAttributeAudio')) return 'audio';
  return 'document';
}

/** The message a private message answers (MessageReplyHeader.replyToMsgId), when it is a Reply within the chat. */
function replyToMsgIdOf(replyTo: unknown): number | undefined {
  const header = replyTo as { className?: string; replyToMsgId?: unknown; replyToPeerId?: unknown } | undefined;
  // A reply to a message of another chat (replyToPeerId set) answers nothing of ours in this one.
  return header?.className === 'MessageReplyHeader' && typeof header.replyToMsgId === 'number' && header.replyToPeerId === undefined ? header.replyToMsgId : undefined;
}

/** A private message someone sent the account (updateShortMessage, or updateNewMessage of a message from a user). */
function incomingMessage(update: unknown): Incoming | undefined {
  const u = update as { className?: string; out?: boolean; id?: number; userId?: unknown; message?: unknown; date?: number; update?: unknown; updates?: unknown[]; replyTo?: unknown };
  if (u.className === 'UpdateShortMessage' && !u.out && typeof u.id === 'number') {
    const text = typeof u.message === 'string' ? u.message : '';
    return { id: u.id, userId: String(u.userId), text, type: 'text', date: u.date ?? 0, replyToMsgId: replyToMsgIdOf(u.replyTo) };
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
    const m = u.message as { className?: string; out?: boolean; id?: number; peerId?: { className?: string; userId?: unknown }; message?: string; date?: number; media?: GramjsMedia; replyTo?: unknown };
    if (m?.className !== 'Message' || m.out || m.peerId?.className !== 'PeerUser' || typeof m.id !== 'number') return undefined;
    return { id: m.id, userId: String(m.peerId.userId), text: m.message ? m.message : null, type: mediaType(m.media), date: m.date ?? 0, replyToMsgId: replyToMsgIdOf(m.replyTo) };
  }
  return undefined;
}
