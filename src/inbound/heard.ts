import type { ReplyType } from '../core/public-views.js';

export type { ReplyType };

/**
 * What a listener heard, in one shape whatever the platform: a WhatsApp socket's messages, a Telegram
 * bot's updates, a LinkedIn conversation's events. Listeners know their protocol and nothing of notes or
 * webhooks; they hand this to the recorder (recorder.ts), which finds the note it concerns.
 */
export type Heard = HeardReply;

/** A message a recipient wrote to one of our senders. */
export interface HeardReply {
  kind: 'reply';
  platform: string;
  /** The platform's own name for the sender (platform.senderKey: a WhatsApp session id, a hash of a bot token or an li_at). */
  senderKey: string;
  /** The recipient as our notes name it (a phone number, a chat id, a profile). */
  from: string;
  /** Set by listeners whose sender belongs to one account and environment (a WhatsApp session): only its notes are looked at. */
  accountId?: string;
  env?: string;
  reply: {
    /** The platform's id of the message: unique within the chat, so a message heard twice is recorded once. */
    platformId: string;
    type: ReplyType;
    /** The text or the caption; null for media without one. Cut to 4,096 characters. */
    text: string | null;
    /** When the recipient sent it (epoch ms). */
    at: number;
    /** The platform's id of the message it quotes, when the platform says (WhatsApp `contextInfo.stanzaId`): the note it answers. */
    quotes?: string;
  };
}
