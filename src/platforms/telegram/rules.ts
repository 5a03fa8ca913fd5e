import { isViolation, stringField, type Violation } from '../rules.js';

export type TelegramSession =
  | {
      platform: 'telegram';
      bot_token: string;
    }
  | {
      platform: 'telegram';
      /** A Telegram account linked with POST /telegram/sessions. */
      session_id: string;
    };

const TELEGRAM_SESSION_ID = /^ts_[0-9A-Za-z]{24}$/;
const present = (value: unknown): boolean => value !== undefined && value !== null;

const TELEGRAM_CHAT_ID = /^-?[0-9]{1,20}$/;
// Telegram usernames: 5–32 characters, letters, digits and underscores, starting with a letter.
const TELEGRAM_USERNAME = /^@[A-Za-z][A-Za-z0-9_]{4,31}$/;
const TELEGRAM_BOT_TOKEN = /^[0-9]+:[A-Za-z0-9_-]{35,}$/;

/** Captions are 0–1024 characters (after entity parsing; we send plain text). */
export const MAX_CAPTION_LENGTH = 1024;

export function checkTelegramRecipient(recipient: string): Violation | null {
  return TELEGRAM_CHAT_ID.test(recipient) || TELEGRAM_USERNAME.test(recipient)
    ? null
    : { field: 'recipient', message: 'telegram recipient must be an integer chat id or @channelusername' };
}

export function checkTelegramSession(session: Record<string, unknown>): TelegramSession | Violation {
  if (present(session.session_id) && present(session.bot_token)) {
    return { field: 'session', message: 'session takes bot_token (a bot) or session_id (a Telegram account linked with POST /telegram/sessions), not both' };
  }
  if (present(session.session_id)) {
    const id = stringField(session, 'session_id');
    if (isViolation(id)) return id;
    if (!TELEGRAM_SESSION_ID.test(id)) return { field: 'session.session_id', message: 'session.session_id must be a Telegram account session id (ts_…) from POST /telegram/sessions' };
    return { platform: 'telegram', session_id: id };
  }
  const token = stringField(session, 'bot_token');
  if (isViolation(token)) return token;
  if (!TELEGRAM_BOT_TOKEN.test(token)) {
    return { field: 'session.bot_token', message: 'session.bot_token must look like <digits>:<35 or more of A-Z a-z 0-9 _ ->' };
  }
  return { platform: 'telegram', bot_token: token };
}
