import { isViolation, stringField, type Violation } from '../rules.js';
import { parseCookieHeader, unquoted } from './cookies.js';

/** The fields a LinkedIn `session` may hold: the first two are required. */
export const LINKEDIN_SESSION_FIELDS = ['li_at', 'csrf_token', 'user_agent', 'cookies'] as const;

export type LinkedinSession = {
  platform: 'linkedin';
  li_at: string;
  csrf_token: string;
  /** The User-Agent of the browser that holds the session, sent verbatim. */
  user_agent?: string;
  /** That browser's whole `Cookie` header for linkedin.com. */
  cookies?: string;
};

// LinkedIn public profile ids ("vanity names"): 3–100 letters, digits and hyphens (percent-encoded letters too).
const LINKEDIN_PUBLIC_ID = /^(?:[A-Za-z0-9-]|%[0-9A-Fa-f]{2}){3,100}$/;
const LINKEDIN_PROFILE_URL = /^https?:\/\/(?:[a-z]{2,3}\.)?(?:www\.)?linkedin\.com\/in\/((?:[A-Za-z0-9-]|%[0-9A-Fa-f]{2}){3,100})\/?(?:[?#].*)?$/;
const LINKEDIN_PROFILE_URN = /^urn:li:fsd_profile:[A-Za-z0-9_-]+$/;
/** A messaging thread's id: `2-…` (base64 text) in today's messenger, digits in older threads. */
const THREAD_ID = '[A-Za-z0-9_+/=-]{1,200}';
export const LINKEDIN_CONVERSATION_URN = new RegExp(`^urn:li:msg_conversation:\\((urn:li:fsd_profile:[A-Za-z0-9_-]+),(${THREAD_ID})\\)$`);
const LINKEDIN_THREAD_URL = /^https?:\/\/(?:[a-z]{2,3}\.)?(?:www\.)?linkedin\.com\/messaging\/thread\/([^/?#]{1,600})\/?(?:[?#].*)?$/;
const THREAD_ID_ONLY = new RegExp(`^${THREAD_ID}$`);
const LINKEDIN_CSRF = /^ajax:[0-9A-Za-z_-]+$/;
const USER_AGENT = /^Mozilla\/5\.0 \([\x20-\x7e]{1,1000}$/;

/** The thread id of a messaging thread URL (percent-decoded), or undefined when `recipient` is none. */
export function threadIdOfUrl(recipient: string): string | undefined {
  const raw = LINKEDIN_THREAD_URL.exec(recipient)?.[1];
  if (raw === undefined) return undefined;
  let id: string;
  try {
    id = decodeURIComponent(raw);
  } catch {
    return undefined;
  }
  return THREAD_ID_ONLY.test(id) ? id : undefined;
}

export function checkLinkedinRecipient(recipient: string): Violation | null {
  return LINKEDIN_PUBLIC_ID.test(recipient) ||
    LINKEDIN_PROFILE_URL.test(recipient) ||
    LINKEDIN_PROFILE_URN.test(recipient) ||
    LINKEDIN_CONVERSATION_URN.test(recipient) ||
    threadIdOfUrl(recipient) !== undefined
    ? null
    : {
        field: 'recipient',
        message:
          'linkedin recipient must be a public profile id (jane-smith-a1b2c3), a profile URL (https://www.linkedin.com/in/…), urn:li:fsd_profile:…, ' +
          'an existing conversation urn:li:msg_conversation:(urn:li:fsd_profile:…,<thread id>) or a messaging thread URL (https://www.linkedin.com/messaging/thread/<id>/)',
      };
}

/** An optional string field: absent when missing, null or empty. */
function optionalString(session: Record<string, unknown>, name: string): string | undefined | Violation {
  const value = session[name];
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') return { field: `session.${name}`, message: `session.${name} must be a string` };
  return value;
}

export function checkLinkedinSession(session: Record<string, unknown>): LinkedinSession | Violation {
  const liAt = stringField(session, 'li_at');
  if (isViolation(liAt)) return liAt;
  const csrf = stringField(session, 'csrf_token');
  if (isViolation(csrf)) return csrf;
  if (/[\s;,"]/.test(liAt)) return { field: 'session.li_at', message: 'session.li_at must be a cookie value (no spaces, ";", "," or quotes)' };
  if (!LINKEDIN_CSRF.test(csrf)) return { field: 'session.csrf_token', message: 'session.csrf_token must be the "ajax:…" value of JSESSIONID' };

  const userAgent = optionalString(session, 'user_agent');
  if (isViolation(userAgent)) return userAgent;
  if (userAgent !== undefined && !USER_AGENT.test(userAgent)) {
    return {
      field: 'session.user_agent',
      message: 'session.user_agent must be the User-Agent of the browser the cookies come from: printable ASCII, starting with "Mozilla/5.0 (", at most 1,013 characters',
    };
  }

  const cookies = optionalString(session, 'cookies');
  if (isViolation(cookies)) return cookies;
  if (cookies !== undefined) {
    const pairs = parseCookieHeader(cookies);
    if (typeof pairs === 'string') return { field: 'session.cookies', message: `session.cookies must be the browser's Cookie header for linkedin.com: ${pairs}` };
    // The values themselves are secrets: the message names the cookie, never its value.
    for (const { name, value } of pairs) {
      if (name === 'li_at' && value !== liAt) return { field: 'session.cookies', message: 'session.cookies holds another li_at than session.li_at: both must come from the same browser session' };
      if (name === 'JSESSIONID' && unquoted(value) !== csrf) {
        return { field: 'session.cookies', message: 'session.cookies holds another JSESSIONID than session.csrf_token: both must come from the same browser session' };
      }
    }
  }

  return {
    platform: 'linkedin',
    li_at: liAt,
    csrf_token: csrf,
    ...(userAgent !== undefined ? { user_agent: userAgent } : {}),
    ...(cookies !== undefined ? { cookies } : {}),
  };
}
