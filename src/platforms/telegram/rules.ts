import { isViolation, stringField, type Violation } from '../rules.js';

export type TelegramSession = {
  platform: 'telegram';
  bot_token: string;
};

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
  const token = stringField(session, 'bot_token');
  if (isViolation(token)) return token;
  if (!TELEGRAM_BOT_TOKEN.test(token)) {
    return { field: 'session.bot_token', message: 'session.bot_token must look like <digits>:<35 or more of A-Z a-z 0-9 _ ->' };
  }
  return { platform: 'telegram', bot_token: token };
}
