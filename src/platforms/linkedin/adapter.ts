import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Dispatcher } from 'undici';
import { Agent, request } from '../../core/http-client.js';
import { proxyDeliveryError, ProxyDispatchers } from '../proxy/dispatchers.js';
import { PacingBusy, KeyedPacer } from '../pacing.js';
import { DeliveryError, type DeliveryJob, type PlatformAdapter, type RecipientCheck } from '../platform.js';
import { browserIdentity, type BrowserIdentity } from './browser.js';
import { DeliveryCookies } from './cookies.js';
import { createMemoryRest, REST_AFTER_999_MS, type AccountRest } from './rest.js';

export { automatedRefusal, failureForStatus, linkedinRecipient, retryAfterMs, type FlowStep, type LinkedinRecipient } from './voyager-answers.js';
import type { LinkedinSession } from './rules.js';
import {
  automatedRefusal,
  failureForStatus,
  linkedinRecipient,
  networkFailure,
  readCapped,
  SESSION_ENDED_MESSAGE,
  type FlowStep,
  type LinkedinRecipient,
} from './voyager-answers.js';
import {
  createMessageRequest,
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
  onSent?(sent: { account: string; messageId: string; recipient: string; answer: unknown; target: MessageTarget; at: number }): Promise<void>;
}

export const DEFAULT_LINKEDIN_PACE: LinkedinPace = { minMs: 3_000, maxMs: 5_000 };
const DEFAULT_TIMEOUT_MS = 30_000;
/** One delivery's state: the account, the browser it speaks as, its cookies (rotated ones included). */
interface Delivery {
  account: string;
  browser: BrowserIdentity;
  cookies: DeliveryCookies;
  signal: AbortSignal;
  /** Direct, or through the sender's proxy (docs/proxies.md). */
  dispatcher: Dispatcher;
}

/** A hash of the li_at: names the account in memory and in Redis without holding the secret. */
export const linkedinAccountKey = (liAt: string): string => createHash('sha256').update(liAt).digest('base64url').slice(0, 22);

/** The adapter, and the recipient check that resolves a recipient as its sends do. */
export interface LinkedinAdapter extends PlatformAdapter {
  recipientExists(session: LinkedinSession, recipient: string, signal: AbortSignal, proxy?: string | null): Promise<RecipientCheck>;
}

/** Delivers voice notes through the Voyager API of linkedin.com with the user's own session cookie. */
export function createLinkedinAdapter(options: LinkedinAdapterOptions): LinkedinAdapter {
  const apiRoot = options.apiRoot.replace(/\/+$/, '');
  const apiOrigin = new URL(apiRoot).origin;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const pace = options.pace ?? DEFAULT_LINKEDIN_PACE;
  const random = options.random ?? Math.random;
  const rest = options.rest ?? createMemoryRest();
  // Each sender's proxy its own dispatcher (docs/proxies.md); senders without one go direct.
  const dispatchers = new ProxyDispatchers(options.dispatcher ?? new Agent({ connectTimeout: timeoutMs, keepAliveTimeout: 4_000 }), {
    connectTimeoutMs: timeoutMs,
    keepAliveTimeout: 4_000,
  });
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
        dispatcher: delivery.dispatcher,
        method: req.method,
        headers,
        signal: delivery.signal,
        ...(req.body !== undefined ? { body: JSON.stringify(req.body) } : {}),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
    } catch (error) {
      throw proxyDeliveryError(error) ?? networkFailure(step, error);
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
        dispatcher: delivery.dispatcher,
        method: 'PUT',
        headers,
        signal: delivery.signal,
        body: bytes,
        headersTimeout: timeoutMs * 4,
        bodyTimeout: timeoutMs,
      });
    } catch (error) {
      throw proxyDeliveryError(error) ?? networkFailure('upload', error);
    }
    await takeAnswer('upload', delivery, target, res);
    await res.body.dump().catch(() => undefined);
  }

  /** A delivery's state for this session, speaking as the page the web app would send from. */
  async function openDelivery(session: LinkedinSession, account: string, recipient: LinkedinRecipient, signal: AbortSignal, proxy?: string | null): Promise<Delivery> {
    const cookies = await DeliveryCookies.of(apiRoot, session);
    // The page the web app would send from: the thread itself, or the messaging page for a new message.
    const referer = 'threadId' in recipient ? `${apiOrigin}/messaging/thread/${encodeURIComponent(recipient.threadId)}/` : `${apiOrigin}/messaging/`;
    return {
      account,
      cookies,
      signal,
      dispatcher: dispatchers.for(proxy),
      browser: browserIdentity({
        userAgent: session.user_agent,
        langCookie: await cookies.value('lang'),
        timezoneCookie: await cookies.value('timezone'),
        referer,
      }),
    };
  }

  /** The session's own profile (its mailbox), then where the note goes: a conversation, or a profile looked up by its public id. */
  async function resolveTarget(delivery: Delivery, recipient: LinkedinRecipient): Promise<{ mailboxUrn: string; target: MessageTarget }> {
    const me = await callJson('own profile', delivery, meRequest());
    const mailboxUrn = readOwnProfileUrn(me.json);
    if (mailboxUrn === undefined) throw new DeliveryError('platform_error', 'LinkedIn did not say which profile the session belongs to', false);
    if ('conversationUrn' in recipient) {
      // A conversation URN names the mailbox it belongs to: another account's cannot be written to.
      if (!recipient.conversationUrn.startsWith(`urn:li:msg_conversation:(${mailboxUrn},`)) {
        throw new DeliveryError('recipient_not_found', "this conversation is not in the mailbox of the session's LinkedIn account", false);
      }
      return { mailboxUrn, target: { conversationUrn: recipient.conversationUrn } };
    }
    if ('threadId' in recipient) return { mailboxUrn, target: { conversationUrn: `urn:li:msg_conversation:(${mailboxUrn},${recipient.threadId})` } };
    if ('urn' in recipient) return { mailboxUrn, target: { recipientUrn: recipient.urn } };
    const found = readProfileUrn((await callJson('recipient lookup', delivery, profileByPublicIdRequest(recipient.publicId))).json);
    if (found === undefined) throw new DeliveryError('recipient_not_found', 'no LinkedIn profile has this public id', false);
    return { mailboxUrn, target: { recipientUrn: found } };
  }

  async function deliverOnce(job: DeliveryJob, session: LinkedinSession, account: string): Promise<void> {
    const recipient = linkedinRecipient(job.recipient);
    const delivery = await openDelivery(session, account, recipient, job.signal, job.proxy);
    const { mailboxUrn, target } = await resolveTarget(delivery, recipient);

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
    await options.onSent?.({ account, messageId: job.messageId, recipient: job.recipient, answer: sent.json, target, at: Date.now() }).catch(() => undefined);
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
    /**
     * POST /recipients/check: resolves the recipient as a send does (the session's mailbox, then the
     * profile by its public id, or the conversation in that mailbox), without sending. A profile URN is
     * taken as named, as a send takes it. Checks of one li_at are spaced as its sends are (3–5 s); null
     * while it rests after a 999, or when LinkedIn did not say.
     */
    async recipientExists(session: LinkedinSession, recipient: string, signal: AbortSignal, proxy?: string | null): Promise<RecipientCheck> {
      const account = linkedinAccountKey(session.li_at);
      if ((await rest.remainingMs(account)) > 0) return { exists: null, reason: 'this li_at rests after LinkedIn refused it as automated (999); ask again later' };
      const named = linkedinRecipient(recipient);
      try {
        for (;;) {
          try {
            await pacer.run(account, async () => resolveTarget(await openDelivery(session, account, named, signal, proxy), named));
            return { exists: true, reason: null };
          } catch (error) {
            // Another check of this li_at is running or was moments ago: wait for its turn (until the signal ends).
            if (!(error instanceof PacingBusy)) throw error;
            await sleep(error.retryAfterMs, undefined, { signal });
          }
        }
      } catch (error) {
        if (signal.aborted) return { exists: null, reason: 'LinkedIn did not answer in time' };
        if (error instanceof DeliveryError && error.code === 'recipient_not_found') return { exists: false, reason: error.message };
        if (error instanceof DeliveryError) return { exists: null, reason: `LinkedIn did not say: ${error.message}` };
        throw error;
      }
    },

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
