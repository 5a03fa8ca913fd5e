/**
 * A recipient as the suppression list compares it: the way its platform names it, whatever way it was
 * written. Each platform's forms, and what is the same person there:
 *  - WhatsApp: a phone number with or without "+", spaces, dashes, dots or parentheses → its digits.
 *  - Telegram: a chat id (kept, sign included) or an @username, which Telegram compares case-insensitively
 *    → "@" and the name in lower case.
 *  - LinkedIn: a public profile id, case-insensitive, or its profile URL (https://www.linkedin.com/in/<id>/,
 *    any subdomain, query or trailing slash) → the id, percent-decoded, in lower case; urn:li:… ids and
 *    messaging thread URLs are case-sensitive and kept as written.
 * One function for every platform, so that an entry for every platform ("*") and one for a platform
 * compare the same way: each form above is unambiguous on its own (a phone number is never a Telegram
 * @username nor a LinkedIn URL).
 */
export function recipientKey(recipient: string): string {
  const trimmed = recipient.trim();
  if (PHONE.test(trimmed)) return trimmed.replace(/\D/g, '');
  if (trimmed.startsWith('urn:') || THREAD_URL.test(trimmed)) return trimmed;
  const profile = PROFILE_URL.exec(trimmed)?.[1];
  if (profile !== undefined) return lowerDecoded(profile);
  return lowerDecoded(trimmed);
}

// Starts with "+" or a digit (a Telegram group's id starts with "-" and is kept as is), at least 5 digits.
const PHONE = /^\+?\d[\d\s().-]{3,}\d$/;
const PROFILE_URL = /^(?:https?:\/\/)?(?:[a-z]{2,3}\.)?(?:www\.)?linkedin\.com\/in\/([^/?#]{1,300})\/?(?:[?#].*)?$/i;
const THREAD_URL = /^(?:https?:\/\/)?(?:[a-z]{2,3}\.)?(?:www\.)?linkedin\.com\/messaging\//i;

function lowerDecoded(text: string): string {
  try {
    return decodeURIComponent(text).toLowerCase();
  } catch {
    return text.toLowerCase();
  }
}
