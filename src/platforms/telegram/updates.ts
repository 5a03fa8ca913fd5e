import type { HeardReply, ReplyType } from '../../inbound/heard.js';

/**
 * What a bot's `getUpdates` brings, turned into what the service acts on: a message in a private chat
 * (a reply from the person the bot wrote to), and `my_chat_member` moves in a private chat (the person
 * blocked the bot: status `kicked`; or let it back: `member`). Groups, channels and other bots are
 * never heard. Media is described by its kind and caption, never downloaded.
 */

interface TelegramMessage {
  message_id?: number;
  date?: number;
  chat?: { id?: number | string; type?: string };
  from?: { is_bot?: boolean };
  text?: string;
  caption?: string;
  /** The message it answers, when the person used Telegram's Reply (Bot API Message.reply_to_message). */
  reply_to_message?: { message_id?: number };
  [kind: string]: unknown;
}

/** How a bot's delivered note is known (`platform_message_id`): the bot, the chat and Telegram's message id in it. */
export const botPlatformMessageId = (botKey: string, chatId: string | number, messageId: number): string => `tgbot:${botKey}:${chatId}:${messageId}`;

export interface TelegramUpdate {
  update_id: number;
  message?: TelegramMessage;
  my_chat_member?: { chat?: { id?: number | string; type?: string }; new_chat_member?: { status?: string } };
}

const KINDS: Array<[string, ReplyType]> = [
  ['voice', 'voice'],
  ['audio', 'audio'],
  ['photo', 'image'],
  ['video', 'video'],
  ['video_note', 'video'],
  ['animation', 'video'],
  ['document', 'document'],
  ['sticker', 'sticker'],
];

function describe(message: TelegramMessage): { type: ReplyType; text: string | null } {
  if (typeof message.text === 'string') return { type: 'text', text: message.text };
  const caption = typeof message.caption === 'string' && message.caption !== '' ? message.caption : null;
  const kind = KINDS.find(([field]) => message[field] !== undefined);
  return { type: kind ? kind[1] : 'other', text: caption };
}

export type HeardUpdate = { kind: 'reply'; heard: HeardReply } | { kind: 'membership'; chat: string; blocked: boolean };

/** What one update means for the bot `senderKey`; undefined when nothing (a group, a bot, an edit, a service message). */
export function readUpdate(update: TelegramUpdate, senderKey: string): HeardUpdate | undefined {
  const message = update.message;
  if (message) {
    if (message.chat?.type !== 'private' || message.chat.id === undefined || message.from?.is_bot === true || message.message_id === undefined) return undefined;
    const described = describe(message);
    return {
      kind: 'reply',
      heard: {
        kind: 'reply',
        platform: 'telegram',
        senderKey,
        from: String(message.chat.id),
        // Only live sends listen: a sandbox note sent with the same bot is never answered by a real person.
        env: 'live',
        reply: {
          platformId: String(message.message_id),
          type: described.type,
          text: described.text,
          at: (message.date ?? Date.now() / 1000) * 1000,
          ...(typeof message.reply_to_message?.message_id === 'number' ? { quotes: botPlatformMessageId(senderKey, message.chat.id, message.reply_to_message.message_id) } : {}),
        },
      },
    };
  }
  const member = update.my_chat_member;
  if (member?.chat?.type === 'private' && member.chat.id !== undefined) {
    const status = member.new_chat_member?.status;
    if (status === 'kicked') return { kind: 'membership', chat: String(member.chat.id), blocked: true };
    if (status === 'member') return { kind: 'membership', chat: String(member.chat.id), blocked: false };
  }
  return undefined;
}
