// Tables of what the platforms tell us back (replies, the listeners that hear them, chats that blocked a
// bot): schema.ts re-exports them and lists them in `Database`. Every time is epoch milliseconds.

/** What a recipient answered to a delivered voice note: its kind and text, never media content. */
export interface MessageRepliesTable {
  /** rpl_… */
  id: string;
  message_id: string;
  account_id: string;
  env: string;
  platform: string;
  sender_key: string;
  /** The recipient as the note named it. */
  recipient: string;
  /** The platform's id of the incoming message (unique within the sender's chat with the recipient). */
  platform_reply_id: string;
  /** text | voice | audio | image | video | document | sticker | other */
  type: string;
  /** The text or the caption, at most 4,096 characters; null for media without one. */
  text: string | null;
  received_at: number;
  created_at: number;
}

/** A LinkedIn li_at listened to (`listen: true`): its session sealed until `listen_until`. */
export interface LinkedinListenersTable {
  sender_key: string;
  /** li_at, csrf_token, cookies and user_agent, sealed JSON. */
  jar: string;
  /** The account and environment that asked to listen: a look counts in their sender's daily rhythm. */
  account_id?: string | null;
  env?: string | null;
  listen_until: number;
  /** The latest listened note's delivery: the intervals count from it. */
  last_note_at: number;
  /** Looks made since that note. */
  checks: number;
  next_check_at: number;
  updated_at: number;
}

/** A conversation a listened li_at wrote into. */
export interface LinkedinListenedConversationsTable {
  sender_key: string;
  conversation_urn: string;
  /** The recipient as the notes name it (what a reply is matched on). */
  recipient: string;
  /** When the latest note went in: only messages delivered after it are read. */
  note_at: number;
}

/** A Telegram bot listened to (`listen: true`): its token sealed until `listen_until`. */
export interface TelegramListenersTable {
  sender_key: string;
  /** The bot token, sealed. */
  token: string;
  /** listening | conflict (the bot has a webhook: getUpdates is refused) */
  status: string;
  reason: string | null;
  listen_until: number;
  /** The next update_id to ask for; null before the first. */
  update_offset: number | null;
  updated_at: number;
}

/** A chat that blocked a sender: later notes to it fail at once (`recipient_blocked`). */
export interface BlockedChatsTable {
  platform: string;
  sender_key: string;
  recipient: string;
  blocked_at: number;
}

/** An account and environment that asked to listen to a sender (`listen: true`): only they see and end its listening. */
export interface ListeningAccountsTable {
  platform: string;
  sender_key: string;
  account_id: string;
  env: string;
  since: number;
}
