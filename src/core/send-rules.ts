/**
 * What a send request must look like for each platform (PRODUCT.md, "Recipients and credentials").
 * Pure rules: the route turns a violation into a 422 `invalid_parameter` naming the field.
 */
export const PLATFORMS = ['linkedin', 'telegram', 'whatsapp'] as const;
export type Platform = (typeof PLATFORMS)[number];

export const isPlatform = (value: string): value is Platform => (PLATFORMS as readonly string[]).includes(value);

export interface Violation {
  field: string;
  message: string;
}

export type PlatformSession =
  | { platform: 'linkedin'; li_at: string; csrf_token: string }
  | { platform: 'telegram'; bot_token: string }
  | { platform: 'whatsapp'; session_id: string };

/** Longest voice note each platform takes, in seconds (null: no limit of its own). */
export const MAX_DURATION_SECONDS: Record<Platform, number | null> = {
  linkedin: 60,
  telegram: null,
  whatsapp: null,
};

export const MAX_CAPTION_LENGTH = 1024;

const WHATSAPP_RECIPIENT = /^[0-9]{7,15}$/;
const TELEGRAM_CHAT_ID = /^-?[0-9]{1,20}$/;
// Telegram usernames: 5–32 characters, letters, digits and underscores, starting with a letter.
const TELEGRAM_USERNAME = /^@[A-Za-z][A-Za-z0-9_]{4,31}$/;
const TELEGRAM_BOT_TOKEN = /^[0-9]+:[A-Za-z0-9_-]{35,}$/;
// LinkedIn public profile ids ("vanity names"): 3–100 letters, digits and hyphens (percent-encoded letters too).
const LINKEDIN_PUBLIC_ID = /^(?:[A-Za-z0-9-]|%[0-9A-Fa-f]{2}){3,100}$/;
const LINKEDIN_PROFILE_URL = /^https?:\/\/(?:[a-z]{2,3}\.)?(?:www\.)?linkedin\.com\/in\/((?:[A-Za-z0-9-]|%[0-9A-Fa-f]{2}){3,100})\/?(?:[?#].*)?$/;
const LINKEDIN_PROFILE_URN = /^urn:li:fsd_profile:[A-Za-z0-9_-]+$/;
const LINKEDIN_CSRF = /^ajax:[0-9A-Za-z_-]+$/;
const WHATSAPP_SESSION_ID = /^ws_[0-9A-Za-z]{24}$/;

export function checkRecipient(platform: Platform, recipient: string): Violation | null {
  const field = 'recipient';
  switch (platform) {
    case 'whatsapp':
      return WHATSAPP_RECIPIENT.test(recipient)
        ? null
        : { field, message: 'whatsapp recipient must be the phone number with country code: 7 to 15 digits, no "+"' };
    case 'telegram':
      return TELEGRAM_CHAT_ID.test(recipient) || TELEGRAM_USERNAME.test(recipient)
        ? null
        : { field, message: 'telegram recipient must be an integer chat id or @channelusername' };
    case 'linkedin':
      return LINKEDIN_PUBLIC_ID.test(recipient) || LINKEDIN_PROFILE_URL.test(recipient) || LINKEDIN_PROFILE_URN.test(recipient)
        ? null
        : {
            field,
            message:
              'linkedin recipient must be a public profile id (jane-smith-a1b2c3), a profile URL (https://www.linkedin.com/in/…) or urn:li:fsd_profile:…',
          };
  }
}

function stringField(session: Record<string, unknown>, name: string): string | Violation {
  const value = session[name];
  if (value === undefined || value === null || value === '') {
    return { field: `session.${name}`, message: `session.${name} is required for this platform` };
  }
  if (typeof value !== 'string') return { field: `session.${name}`, message: `session.${name} must be a string` };
  return value;
}

const isViolation = (value: string | Violation): value is Violation => typeof value !== 'string';

export function checkSession(platform: Platform, session: Record<string, unknown>): PlatformSession | Violation {
  switch (platform) {
    case 'telegram': {
      const token = stringField(session, 'bot_token');
      if (isViolation(token)) return token;
      if (!TELEGRAM_BOT_TOKEN.test(token)) {
        return { field: 'session.bot_token', message: 'session.bot_token must look like <digits>:<35 or more of A-Z a-z 0-9 _ ->' };
      }
      return { platform, bot_token: token };
    }
    case 'linkedin': {
      const liAt = stringField(session, 'li_at');
      if (isViolation(liAt)) return liAt;
      const csrf = stringField(session, 'csrf_token');
      if (isViolation(csrf)) return csrf;
      if (/[\s;,"]/.test(liAt)) return { field: 'session.li_at', message: 'session.li_at must be a cookie value (no spaces, ";", "," or quotes)' };
      if (!LINKEDIN_CSRF.test(csrf)) return { field: 'session.csrf_token', message: 'session.csrf_token must be the "ajax:…" value of JSESSIONID' };
      return { platform, li_at: liAt, csrf_token: csrf };
    }
    case 'whatsapp': {
      const id = stringField(session, 'session_id');
      if (isViolation(id)) return id;
      if (!WHATSAPP_SESSION_ID.test(id)) return { field: 'session.session_id', message: 'session.session_id must be a WhatsApp session id (ws_…)' };
      return { platform, session_id: id };
    }
  }
}

export function checkDuration(platform: Platform, duration: number): Violation | null {
  if (!Number.isFinite(duration) || duration <= 0) return { field: 'duration', message: 'duration must be a positive number of seconds' };
  const max = MAX_DURATION_SECONDS[platform];
  if (max !== null && duration > max) return { field: 'duration', message: `duration must be at most ${max} seconds on ${platform}` };
  return null;
}

export function checkCaption(platform: Platform, caption: string): Violation | null {
  if (platform !== 'telegram') return { field: 'caption', message: 'caption applies to telegram only' };
  if (caption.length > MAX_CAPTION_LENGTH) return { field: 'caption', message: `caption must be at most ${MAX_CAPTION_LENGTH} characters` };
  return null;
}
