import type { Dispatcher } from 'undici';
import { networkErrorCode } from '../../core/error-code.js';
import { DeliveryError } from '../platform.js';
import { REST_AFTER_999_MS } from './rest.js';
import { LINKEDIN_CONVERSATION_URN, threadIdOfUrl } from './rules.js';
import { LOGIN_LOCATION } from './voyager-requests.js';

// What Voyager's answers mean for a delivery (docs/sending.md, "Live delivery"; docs/platforms.md, "LinkedIn"),
// and the recipient forms a send may name: the adapter's pure parts, kept apart from its calls.

/** Enough of an error body to read what LinkedIn says (a CSRF failure, a refusal's message). */
const MAX_ERROR_BODY_BYTES = 8 * 1024;

export type FlowStep = 'own profile' | 'recipient lookup' | 'upload slot' | 'upload' | 'send';

const PROFILE_URN = /^urn:li:fsd_profile:[A-Za-z0-9_-]+$/;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

export const SESSION_EXPIRED_MESSAGE =
  'the LinkedIn session is expired or invalid; sign in to LinkedIn again and send the new li_at and csrf_token';
export const SESSION_ENDED_MESSAGE =
  'LinkedIn ended the session (it deleted the li_at cookie); sign in again and send the new li_at, csrf_token, cookies and that browser\'s user_agent';
const CSRF_FAILED_MESSAGE =
  "LinkedIn's CSRF check failed: csrf_token is not the JSESSIONID of this li_at's browser session; copy li_at, JSESSIONID (as csrf_token) and the cookies from the same browser";

function decoded(id: string): string {
  try {
    return decodeURIComponent(id);
  } catch {
    return id;
  }
}

/** Where a voice note goes, from the recipient as the caller wrote it (rules.ts has already checked its form). */
export type LinkedinRecipient =
  | { urn: string }
  | { publicId: string }
  /** An existing conversation: its own URN, or a thread id whose URN is made with the sender's mailbox. */
  | { conversationUrn: string; threadId: string }
  | { threadId: string };

/** A recipient in one of the accepted forms: a profile URN as is, a conversation, or the public id on its own or inside a profile URL. */
export function linkedinRecipient(recipient: string): LinkedinRecipient {
  if (PROFILE_URN.test(recipient)) return { urn: recipient };
  const conversation = LINKEDIN_CONVERSATION_URN.exec(recipient);
  if (conversation) return { conversationUrn: recipient, threadId: conversation[2]! };
  const threadId = threadIdOfUrl(recipient);
  if (threadId !== undefined) return { threadId };
  if (/^https?:\/\//i.test(recipient)) {
    try {
      const match = /^\/in\/([^/]+)\/?$/.exec(new URL(recipient).pathname);
      if (match?.[1]) return { publicId: decoded(match[1]) };
    } catch {
      // Not a URL after all: treat it as an id, the lookup will say whether it exists.
    }
  }
  return { publicId: decoded(recipient) };
}

/** `Retry-After` in seconds or as an HTTP date, in ms; undefined when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined || raw.trim() === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(raw.trim())) return Math.round(Number(raw.trim()) * 1000);
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(at - now, 0);
}

/** LinkedIn's own words in a JSON error body (`{"message": "This profile can't be accessed", …}`), when short. */
function linkedinMessage(body: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body);
    const message = typeof parsed === 'object' && parsed !== null ? (parsed as { message?: unknown }).message : undefined;
    return typeof message === 'string' && message.length > 0 && message.length <= 200 ? message : undefined;
  } catch {
    return undefined;
  }
}

/** The message of a 999: LinkedIn took the request for a bot's. */
export function automatedRefusal(step: FlowStep): DeliveryError {
  return new DeliveryError(
    'platform_rate_limited',
    `LinkedIn refused the ${step} request as automated traffic (status 999); not retried: this li_at rests ${REST_AFTER_999_MS / 60_000} minutes before its other voice notes are tried`,
    false,
    // Not a retry of this note (it fails): how long its sender rests (GET /senders: `resting` until then).
    REST_AFTER_999_MS,
  );
}

/** The failure an unwanted HTTP answer stands for (docs/sending.md, "Live delivery"; docs/platforms.md, "LinkedIn"). */
export function failureForStatus(step: FlowStep, status: number, headers: Record<string, string | string[] | undefined>, body = ''): DeliveryError {
  if (status === 999) return automatedRefusal(step);
  if (status === 401) return new DeliveryError('session_expired', SESSION_EXPIRED_MESSAGE, false);
  if (status === 403) {
    // Voyager answers a csrf-token that is not the session's JSESSIONID with 403 "CSRF check failed.".
    if (/CSRF check failed/i.test(body)) return new DeliveryError('invalid_session', CSRF_FAILED_MESSAGE, false);
    const said = linkedinMessage(body);
    // A signed-in session refused one thing: on the recipient's steps, this recipient (tomquirk/linkedin-api #493).
    if (step === 'send' || step === 'recipient lookup') {
      return new DeliveryError('recipient_blocked', `LinkedIn does not let this account message this recipient (403${said ? `: ${said}` : ''})`, false);
    }
    return new DeliveryError('platform_error', `LinkedIn refused the ${step} request (403${said ? `: ${said}` : ''})`, false);
  }
  if (REDIRECTS.has(status)) {
    const location = headers.location;
    const target = Array.isArray(location) ? location[0] : location;
    if (target !== undefined && LOGIN_LOCATION.test(target)) return new DeliveryError('session_expired', SESSION_EXPIRED_MESSAGE, false);
    return new DeliveryError('platform_error', `LinkedIn answered the ${step} request with an unexpected redirect (${status})`, false);
  }
  if (status === 429) {
    return new DeliveryError('platform_rate_limited', `LinkedIn is throttling this account (429 on the ${step} request)`, true, retryAfterMs(headers['retry-after']));
  }
  if (step === 'recipient lookup' && status === 404) {
    return new DeliveryError('recipient_not_found', 'no LinkedIn profile has this public id', false);
  }
  if (status >= 500) return new DeliveryError('platform_error', `LinkedIn answered the ${step} request with ${status}`, true);
  return new DeliveryError('platform_error', `LinkedIn refused the ${step} request (${status})`, false);
}

/** Network failures and timeouts are worth another try; the error's own text may name URLs, so only its code is kept. */
export function networkFailure(step: FlowStep, error: unknown): DeliveryError {
  return new DeliveryError('platform_error', `could not reach LinkedIn for the ${step} request (${networkErrorCode(error)})`, true);
}

export async function readCapped(body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
    chunks.push(buffer);
    size += buffer.length;
    if (size >= MAX_ERROR_BODY_BYTES) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).toString('utf8').slice(0, MAX_ERROR_BODY_BYTES);
}
