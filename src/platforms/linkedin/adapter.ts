import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Agent, request, type Dispatcher } from 'undici';
import { PacingBusy, KeyedPacer } from '../pacing.js';
import { DeliveryError, type DeliveryJob, type PlatformAdapter } from '../platform.js';
import { browserIdentity, type BrowserIdentity } from './browser.js';
import { DeliveryCookies } from './cookies.js';
import { createMemoryRest, REST_AFTER_999_MS, type AccountRest } from './rest.js';
import { LINKEDIN_CONVERSATION_URN, threadIdOfUrl, type LinkedinSession } from './rules.js';
import {
  createMessageRequest,
  LOGIN_LOCATION,
  originTokenFor,
  meRequest,
  profileByPublicIdRequest,
  readOwnProfileUrn,
  readProfileUrn,
  readUploadSlot,
  UPLOAD_CONTENT_TYPE,
  uploadMetadataRequest,
  voyagerHeaders,
  type MessageTarget,
  type VoyagerRequest,
} from './voyager-requests.js';

/** Gap between two deliveries with the same `li_at`, drawn anew each time between the two bounds. */
export interface LinkedinPace {
  minMs: number;
  maxMs: number;
}

export interface LinkedinAdapterOptions {
  /** `LINKEDIN_API_ROOT`, without a trailing slash. */
  apiRoot: string;
  /** Default 3–5 s: LinkedIn restricts accounts that act in bursts. */
  pace?: LinkedinPace;
  /** Longest wait for the answer to one API call (default 30 s); the upload gets four times as long. */
  timeoutMs?: number;
  /** Where accounts refused as automated (999) rest: Redis when configured, so every process holds back; memory by default. */
  rest?: AccountRest;
  dispatcher?: Dispatcher;
  random?: () => number;
  /** After a note is sent, with LinkedIn's answer (listening: listen-setup.ts); never fails the delivery. */
  onSent?(sent: { account: string; recipient: string; answer: unknown; target: MessageTarget; at: number }): Promise<void>;
}

export const DEFAULT_LINKEDIN_PACE: LinkedinPace = { minMs: 3_000, maxMs: 5_000 };
const DEFAULT_TIMEOUT_MS = 30_000;
/** Enough of an error body to read what LinkedIn says (a CSRF failure, a refusal's message). */
const MAX_ERROR_BODY_BYTES = 8 * 1024;

export type FlowStep = 'own profile' | 'recipient lookup' | 'upload slot' | 'upload' | 'send';

const PROFILE_URN = /^urn:li:fsd_profile:[A-Za-z0-9_-]+$/;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

const SESSION_EXPIRED_MESSAGE =
  'the LinkedIn session is expired or invalid; sign in to LinkedIn again and send the new li_at and csrf_token';
const SESSION_ENDED_MESSAGE =
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

/** The failure an unwanted HTTP answer stands for (README, "Live delivery"; docs/platforms.md, "LinkedIn"). */
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
function networkFailure(step: FlowStep, error: unknown): DeliveryError {
  const code = typeof (error as { code?: unknown })?.code === 'string' ? (error as { code: string }).code : 'network error';
  return new DeliveryError('platform_error', `could not reach LinkedIn for the ${step} request (${code})`, true);
}

async function readCapped(body: Dispatcher.ResponseData['body']): Promise<string> {
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

/** One delivery's state: the account, the browser it speaks as, its cookies (rotated ones included). */
interface Delivery {
  account: string;
  browser: BrowserIdentity;
  cookies: DeliveryCookies;
  signal: AbortSignal;
}

/** A hash of the li_at: names the account in memory and in Redis without holding the secret. */
export const linkedinAccountKey = (liAt: string): string => createHash('sha256').update(liAt).digest('base64url').slice(0, 22);

/** Delivers voice notes through the Voyager API of linkedin.com with the user's own session cookie. */
export function createLinkedinAdapter(options: LinkedinAdapterOptions): PlatformAdapter {
  const apiRoot = options.apiRoot.replace(/\/+$/, '');
  const apiOrigin = new URL(apiRoot).origin;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const pace = options.pace ?? DEFAULT_LINKEDIN_PACE;
  const random = options.random ?? Math.random;
  const rest = options.rest ?? createMemoryRest();
  const dispatcher = options.dispatcher ?? new Agent({ connectTimeout: timeoutMs, keepAliveTimeout: 4_000 });
  // A delivery that finds its account busy or in its gap goes back to the queue until its turn (PacingBusy).
  const pacer = new KeyedPacer(() => pace.minMs + Math.max(pace.maxMs - pace.minMs, 0) * random(), Math.max(pace.minMs, pace.maxMs));

  /** Cookies LinkedIn set, a deleted li_at, a 999: what every answer is read for before its status. */
  async function takeAnswer(step: FlowStep, delivery: Delivery, url: string | URL, res: Dispatcher.ResponseData): Promise<void> {
    await delivery.cookies.absorb(url, res.headers['set-cookie']);
    if (res.statusCode === 999) {
      await res.body.dump().catch(() => undefined);
      await rest.begin(delivery.account, REST_AFTER_999_MS);
      throw automatedRefusal(step);
    }
    if (await delivery.cookies.signedOut()) {
      await res.body.dump().catch(() => undefined);
      throw new DeliveryError('session_expired', SESSION_ENDED_MESSAGE, false);
    }
    if (res.statusCode < 200 || res.statusCode >= 300) {
      const body = res.statusCode === 403 ? await readCapped(res.body).catch(() => '') : (await res.body.dump().catch(() => undefined), '');
      throw failureForStatus(step, res.statusCode, res.headers, body);
    }
  }

  async function headersFor(delivery: Delivery, url: string | URL, accept: string): Promise<Record<string, string>> {
    return voyagerHeaders({
      browser: delivery.browser,
      cookie: await delivery.cookies.header(url),
      csrfToken: (await delivery.cookies.value('JSESSIONID')) ?? '',
      accept,
    });
  }

  async function callJson(step: FlowStep, delivery: Delivery, req: VoyagerRequest): Promise<{ json: unknown }> {
    const url = `${apiRoot}${req.path}`;
    const headers = await headersFor(delivery, url, req.accept);
    if (req.body !== undefined) headers['content-type'] = req.contentType ?? 'application/json; charset=UTF-8';
    let res: Dispatcher.ResponseData;
    try {
      res = await request(url, {
        dispatcher,
        method: req.method,
        headers,
        signal: delivery.signal,
        ...(req.body !== undefined ? { body: JSON.stringify(req.body) } : {}),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
    } catch (error) {
      throw networkFailure(step, error);
    }
    await takeAnswer(step, delivery, url, res);
    let text: string;
    try {
      text = await res.body.text();
    } catch (error) {
      throw networkFailure(step, error);
    }
    try {
      return { json: text === '' ? null : (JSON.parse(text) as unknown) };
    } catch {
      throw new DeliveryError('platform_error', `LinkedIn answered the ${step} request with something other than JSON`, false);
    }
  }

  async function upload(delivery: Delivery, target: URL, extraHeaders: Record<string, string>, bytes: Buffer): Promise<void> {
    // The session goes only to LinkedIn's own origin; a storage host gets the slot's headers, the user
    // agent and whatever cookies are its own (none of linkedin.com's: the jar matches domains).
    const headers: Record<string, string> =
      target.origin === apiOrigin ? await headersFor(delivery, target, '*/*') : { 'user-agent': delivery.browser.userAgent };
    const cookie = await delivery.cookies.header(target);
    if (cookie === '') delete headers.cookie;
    else headers.cookie = cookie;
    headers['content-type'] = UPLOAD_CONTENT_TYPE;
    Object.assign(headers, extraHeaders);
    let res: Dispatcher.ResponseData;
    try {
      res = await request(target, {
        dispatcher,
        method: 'PUT',
        headers,
        signal: delivery.signal,
        body: bytes,
        headersTimeout: timeoutMs * 4,
        bodyTimeout: timeoutMs,
      });
    } catch (error) {
      throw networkFailure('upload', error);
    }
    await takeAnswer('upload', delivery, target, res);
    await res.body.dump().catch(() => undefined);
  }

  async function deliverOnce(job: DeliveryJob, session: LinkedinSession, account: string): Promise<void> {
    const recipient = linkedinRecipient(job.recipient);
    const cookies = await DeliveryCookies.of(apiRoot, session);
    // The page the web app would send from: the thread itself, or the messaging page for a new message.
    const referer = 'threadId' in recipient ? `${apiOrigin}/messaging/thread/${encodeURIComponent(recipient.threadId)}/` : `${apiOrigin}/messaging/`;
    const delivery: Delivery = {
      account,
      cookies,
      signal: job.signal,
      browser: browserIdentity({
        userAgent: session.user_agent,
        langCookie: await cookies.value('lang'),
        timezoneCookie: await cookies.value('timezone'),
        referer,
      }),
    };

    const me = await callJson('own profile', delivery, meRequest());
    const mailboxUrn = readOwnProfileUrn(me.json);
    if (mailboxUrn === undefined) throw new DeliveryError('platform_error', 'LinkedIn did not say which profile the session belongs to', false);

    let target: MessageTarget;
    if ('conversationUrn' in recipient) {
      // A conversation URN names the mailbox it belongs to: another account's cannot be written to.
      if (!recipient.conversationUrn.startsWith(`urn:li:msg_conversation:(${mailboxUrn},`)) {
        throw new DeliveryError('recipient_not_found', "this conversation is not in the mailbox of the session's LinkedIn account", false);
      }
      target = { conversationUrn: recipient.conversationUrn };
    } else if ('threadId' in recipient) {
      target = { conversationUrn: `urn:li:msg_conversation:(${mailboxUrn},${recipient.threadId})` };
    } else if ('urn' in recipient) {
      target = { recipientUrn: recipient.urn };
    } else {
      const found = readProfileUrn((await callJson('recipient lookup', delivery, profileByPublicIdRequest(recipient.publicId))).json);
      if (found === undefined) throw new DeliveryError('recipient_not_found', 'no LinkedIn profile has this public id', false);
      target = { recipientUrn: found };
    }

    let bytes: Buffer;
    try {
      bytes = await readFile(job.audio.path);
    } catch (error) {
      throw new DeliveryError('platform_error', `the converted audio could not be read: ${(error as Error).message}`, true);
    }
    const slot = readUploadSlot((await callJson('upload slot', delivery, uploadMetadataRequest(bytes.length))).json);
    if (slot === undefined) throw new DeliveryError('platform_error', 'LinkedIn did not hand out an upload slot for the voice note', false);
    let uploadUrl: URL;
    try {
      uploadUrl = new URL(slot.uploadUrl, `${apiRoot}/`);
    } catch {
      throw new DeliveryError('platform_error', 'LinkedIn handed out an upload slot that is not a URL', false);
    }
    if (uploadUrl.protocol !== 'https:' && uploadUrl.protocol !== 'http:') {
      throw new DeliveryError('platform_error', 'LinkedIn handed out an upload slot that is not an http(s) URL', false);
    }
    await upload(delivery, uploadUrl, slot.headers, bytes);

    const sent = await callJson(
      'send',
      delivery,
      createMessageRequest({
        mailboxUrn,
        target,
        assetUrn: slot.assetUrn,
        byteSize: bytes.length,
        durationMs: Math.max(1, Math.round(job.audio.durationSeconds * 1000)),
        originToken: originTokenFor(job.messageId),
      }),
    );
    await options.onSent?.({ account, recipient: job.recipient, answer: sent.json, target, at: Date.now() }).catch(() => undefined);
  }

  /** A resting account's voice note goes back to the queue until the rest is over, without counting as an attempt. */
  async function holdIfResting(account: string): Promise<void> {
    const left = await rest.remainingMs(account);
    if (left <= 0) return;
    throw new DeliveryError(
      'platform_rate_limited',
      `LinkedIn refused this li_at's requests as automated traffic (status 999); its voice notes wait until ${new Date(Date.now() + left).toISOString()} before they are tried`,
      true,
      left,
      { notAttempted: true },
    );
  }

  return {
    async deliver(job: DeliveryJob): Promise<void> {
      if (job.session.platform !== 'linkedin') throw new DeliveryError('invalid_session', 'a LinkedIn delivery needs li_at and csrf_token', false);
      const session = job.session as unknown as LinkedinSession;
      const account = linkedinAccountKey(session.li_at);
      await holdIfResting(account);
      try {
        await pacer.run(account, async () => {
          job.signal.throwIfAborted();
          return deliverOnce(job, session, account);
        });
      } catch (error) {
        if (!(error instanceof PacingBusy)) throw error;
        // Back to the queue, to come back at its turn: no worker slot sleeps while the account's gap runs.
        throw new DeliveryError(
          'platform_rate_limited',
          'another voice note of this LinkedIn account is being sent or was sent moments ago; it waits its turn in the queue, at a pace LinkedIn tolerates',
          true,
          error.retryAfterMs,
          { notAttempted: true },
        );
      }
    },
  };
}
