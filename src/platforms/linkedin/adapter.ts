import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Agent, request, type Dispatcher } from 'undici';
import { PacingBacklog, KeyedPacer } from '../pacing.js';
import { DeliveryError, type DeliveryJob, type PlatformAdapter } from '../platform.js';
import type { LinkedinSession } from './rules.js';
import {
  createMessageRequest,
  LOGIN_LOCATION,
  originTokenFor,
  meRequest,
  profileByPublicIdRequest,
  readOwnProfileUrn,
  readProfileUrn,
  readUploadSlot,
  sessionHeaders,
  UPLOAD_CONTENT_TYPE,
  uploadMetadataRequest,
  type VoyagerRequest,
  type VoyagerSession,
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
  dispatcher?: Dispatcher;
  random?: () => number;
}

export const DEFAULT_LINKEDIN_PACE: LinkedinPace = { minMs: 3_000, maxMs: 5_000 };
const DEFAULT_TIMEOUT_MS = 30_000;

export type FlowStep = 'own profile' | 'recipient lookup' | 'upload slot' | 'upload' | 'send';

const PROFILE_URN = /^urn:li:fsd_profile:[A-Za-z0-9_-]+$/;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

const SESSION_EXPIRED_MESSAGE =
  'the LinkedIn session is expired or invalid; sign in to LinkedIn again and send the new li_at and csrf_token';

function decoded(id: string): string {
  try {
    return decodeURIComponent(id);
  } catch {
    return id;
  }
}

/** A recipient in one of the accepted forms: a profile URN as is, or the public id on its own or inside a profile URL. */
export function linkedinRecipient(recipient: string): { urn: string } | { publicId: string } {
  if (PROFILE_URN.test(recipient)) return { urn: recipient };
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

/** The failure an unwanted HTTP answer stands for (README, "Live delivery"). */
export function failureForStatus(step: FlowStep, status: number, headers: Record<string, string | string[] | undefined>): DeliveryError {
  if (status === 401 || status === 403) return new DeliveryError('session_expired', SESSION_EXPIRED_MESSAGE, false);
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

interface JsonAnswer {
  json: unknown;
}

/** Delivers voice notes through the Voyager API of linkedin.com with the user's own session cookie. */
export function createLinkedinAdapter(options: LinkedinAdapterOptions): PlatformAdapter {
  const apiRoot = options.apiRoot.replace(/\/+$/, '');
  const apiOrigin = new URL(apiRoot).origin;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const pace = options.pace ?? DEFAULT_LINKEDIN_PACE;
  const random = options.random ?? Math.random;
  const dispatcher = options.dispatcher ?? new Agent({ connectTimeout: timeoutMs, keepAliveTimeout: 4_000 });
  // One delivery waits behind the running one at most: more go back to the queue (PacingBacklog).
  const pacer = new KeyedPacer(() => pace.minMs + Math.max(pace.maxMs - pace.minMs, 0) * random(), 1);

  async function callJson(step: FlowStep, session: VoyagerSession, req: VoyagerRequest, signal: AbortSignal): Promise<JsonAnswer> {
    const headers = sessionHeaders(session);
    if (req.body !== undefined) headers['content-type'] = req.contentType ?? 'application/json; charset=UTF-8';
    let res: Dispatcher.ResponseData;
    try {
      res = await request(`${apiRoot}${req.path}`, {
        dispatcher,
        method: req.method,
        headers,
        signal,
        ...(req.body !== undefined ? { body: JSON.stringify(req.body) } : {}),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
    } catch (error) {
      throw networkFailure(step, error);
    }
    if (res.statusCode < 200 || res.statusCode >= 300) {
      await res.body.dump().catch(() => undefined);
      throw failureForStatus(step, res.statusCode, res.headers);
    }
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

  async function upload(session: VoyagerSession, target: URL, extraHeaders: Record<string, string>, bytes: Buffer, signal: AbortSignal): Promise<void> {
    // The session goes only to LinkedIn's own origin; a storage host gets the slot's headers alone.
    const headers: Record<string, string> = target.origin === apiOrigin ? sessionHeaders(session) : {};
    headers['content-type'] = UPLOAD_CONTENT_TYPE;
    Object.assign(headers, extraHeaders);
    let res: Dispatcher.ResponseData;
    try {
      res = await request(target, {
        dispatcher,
        method: 'PUT',
        headers,
        signal,
        body: bytes,
        headersTimeout: timeoutMs * 4,
        bodyTimeout: timeoutMs,
      });
    } catch (error) {
      throw networkFailure('upload', error);
    }
    await res.body.dump().catch(() => undefined);
    if (res.statusCode < 200 || res.statusCode >= 300) throw failureForStatus('upload', res.statusCode, res.headers);
  }

  async function deliverOnce(job: DeliveryJob, session: VoyagerSession): Promise<void> {
    const me = await callJson('own profile', session, meRequest(), job.signal);
    const mailboxUrn = readOwnProfileUrn(me.json);
    if (mailboxUrn === undefined) throw new DeliveryError('platform_error', 'LinkedIn did not say which profile the session belongs to', false);

    const recipient = linkedinRecipient(job.recipient);
    let recipientUrn: string;
    if ('urn' in recipient) {
      recipientUrn = recipient.urn;
    } else {
      const found = readProfileUrn((await callJson('recipient lookup', session, profileByPublicIdRequest(recipient.publicId), job.signal)).json);
      if (found === undefined) throw new DeliveryError('recipient_not_found', 'no LinkedIn profile has this public id', false);
      recipientUrn = found;
    }

    let bytes: Buffer;
    try {
      bytes = await readFile(job.audio.path);
    } catch (error) {
      throw new DeliveryError('platform_error', `the converted audio could not be read: ${(error as Error).message}`, true);
    }
    const slot = readUploadSlot((await callJson('upload slot', session, uploadMetadataRequest(bytes.length), job.signal)).json);
    if (slot === undefined) throw new DeliveryError('platform_error', 'LinkedIn did not hand out an upload slot for the voice note', false);
    let target: URL;
    try {
      target = new URL(slot.uploadUrl, `${apiRoot}/`);
    } catch {
      throw new DeliveryError('platform_error', 'LinkedIn handed out an upload slot that is not a URL', false);
    }
    if (target.protocol !== 'https:' && target.protocol !== 'http:') {
      throw new DeliveryError('platform_error', 'LinkedIn handed out an upload slot that is not an http(s) URL', false);
    }
    await upload(session, target, slot.headers, bytes, job.signal);

    await callJson(
      'send',
      session,
      createMessageRequest({
        mailboxUrn,
        recipientUrn,
        assetUrn: slot.assetUrn,
        byteSize: bytes.length,
        durationMs: Math.max(1, Math.round(job.audio.durationSeconds * 1000)),
        originToken: originTokenFor(job.messageId),
      }),
      job.signal,
    );
  }

  return {
    async deliver(job: DeliveryJob): Promise<void> {
      if (job.session.platform !== 'linkedin') throw new DeliveryError('invalid_session', 'a LinkedIn delivery needs li_at and csrf_token', false);
      const linkedin = job.session as unknown as LinkedinSession;
      const session: VoyagerSession = { li_at: linkedin.li_at, csrf_token: linkedin.csrf_token };
      const account = createHash('sha256').update(session.li_at).digest('base64url');
      try {
        // A job aborted while it waited for its turn must not start its calls afterwards.
        await pacer.run(account, () => {
          job.signal.throwIfAborted();
          return deliverOnce(job, session);
        });
      } catch (error) {
        if (!(error instanceof PacingBacklog)) throw error;
        // Back to the queue, to come back about when the deliveries ahead of it are done.
        throw new DeliveryError(
          'platform_rate_limited',
          'more voice notes are queued for this LinkedIn account than it can send at a pace LinkedIn tolerates',
          true,
          error.ahead * (pace.maxMs + 1_000),
        );
      }
    },
  };
}
