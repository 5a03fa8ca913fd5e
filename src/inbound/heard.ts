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
  /** Set by listeners whose sender belongs to one account (a WhatsApp session): only its notes are looked at. */
  accountId?: string;
  /**
   * The environment heard: a credential the sandbox also accepts (a bot token, an li_at) is heard live
   * ('live'), so its replies never land on sandbox notes. Left out only where the sender key is one
   * account's own session (WhatsApp, a linked Telegram account).
   */
  env?: string;
  reply: {
    /** The platform's id of the message: unique within the chat, so a message heard twice is recorded once. */
    platformId: string;
    type: ReplyType;
    /** The text or the caption; null for media without one. Cut to 4,096 characters. */
    text: string | null;
    /** When the recipient sent it (epoch ms). */
    at: number;
    /**
     * The note it quotes, when the platform says so: that note's platform id as kept on it
     * (`platform_message_id`). The reply is recorded on that note; without one, on the latest.
     */
    quotes?: string | undefined;
  };
}
