import { isViolation, stringField, type Violation } from '../rules.js';

export type LinkedinSession = {
  platform: 'linkedin';
  li_at: string;
  csrf_token: string;
};

// LinkedIn public profile ids ("vanity names"): 3–100 letters, digits and hyphens (percent-encoded letters too).
const LINKEDIN_PUBLIC_ID = /^(?:[A-Za-z0-9-]|%[0-9A-Fa-f]{2}){3,100}$/;
const LINKEDIN_PROFILE_URL = /^https?:\/\/(?:[a-z]{2,3}\.)?(?:www\.)?linkedin\.com\/in\/((?:[A-Za-z0-9-]|%[0-9A-Fa-f]{2}){3,100})\/?(?:[?#].*)?$/;
const LINKEDIN_PROFILE_URN = /^urn:li:fsd_profile:[A-Za-z0-9_-]+$/;
const LINKEDIN_CSRF = /^ajax:[0-9A-Za-z_-]+$/;

export function checkLinkedinRecipient(recipient: string): Violation | null {
  return LINKEDIN_PUBLIC_ID.test(recipient) || LINKEDIN_PROFILE_URL.test(recipient) || LINKEDIN_PROFILE_URN.test(recipient)
    ? null
    : {
        field: 'recipient',
        message:
          'linkedin recipient must be a public profile id (jane-smith-a1b2c3), a profile URL (https://www.linkedin.com/in/…) or urn:li:fsd_profile:…',
      };
}

export function checkLinkedinSession(session: Record<string, unknown>): LinkedinSession | Violation {
  const liAt = stringField(session, 'li_at');
  if (isViolation(liAt)) return liAt;
  const csrf = stringField(session, 'csrf_token');
  if (isViolation(csrf)) return csrf;
  if (/[\s;,"]/.test(liAt)) return { field: 'session.li_at', message: 'session.li_at must be a cookie value (no spaces, ";", "," or quotes)' };
  if (!LINKEDIN_CSRF.test(csrf)) return { field: 'session.csrf_token', message: 'session.csrf_token must be the "ajax:…" value of JSESSIONID' };
  return { platform: 'linkedin', li_at: liAt, csrf_token: csrf };
}
