import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { request } from '../../core/http-client.js';
import { ProxyFailure, proxyFailureOf } from '../proxy/tunnel.js';
import { browserIdentity } from './browser.js';
import { DeliveryCookies } from './cookies.js';
import type { ConversationMessage } from './listening.js';
import {
  ACCEPT_EVENT_STREAM,
  HEARTBEAT_EVERY_MS,
  HEARTBEAT_HEADERS,
  heartbeatBody,
  readRealtimeLine,
  REALTIME_CONNECT_PATH,
  REALTIME_HEARTBEAT_PATH,
  realtimeConnectHeaders,
} from './realtime.js';
import { LOGIN_LOCATION, voyagerHeaders } from './voyager-requests.js';

/**
 * One li_at's realtime stream, kept open for as long as its listener wants it: opened as the web app
 * opens it (realtime.ts), read line by line, a heartbeat posted every minute while it is open, and
 * opened again when it closes, as mautrix-linkedin's realtimeConnectLoop does (pkg/linkedingo/realtime.go:
 * 159-278): at once after a stream that was open, after `attempts × 2 s` (at most a minute) after a
 * refused or failed opening, with a new realtime session id after a 400. A 401 or a redirect to the login
 * page (or li_at deleted) ends it for good: the session is signed out. A 999 rests the li_at.
 * Each opening, with its heartbeats, goes through the connection `connection` gives for it (the
 * sender's proxy: docs/proxies.md); a proxy that does not carry it is told and waited out as a failed
 * opening, never skipped.
 * Every wait goes through `clock`, so tests decide when a wait is over.
 */

/** The waits of the stream: the real ones, or a test's. */
export interface StreamClock {
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export const realClock: StreamClock = {
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    }),
};

/** The longest wait between two openings that failed (realtime.go:184-187). */
export const LONGEST_RECONNECT_WAIT_MS = 60_000;
export const reconnectWaitMs = (attempts: number): number => Math.min(attempts * 2_000, LONGEST_RECONNECT_WAIT_MS);

export interface StreamHandlers {
  /** LinkedIn took the stream (ClientConnection); `again` when an earlier one of this stream was open before. */
  connected(again: boolean): void;
  message(conversationUrn: string, message: ConversationMessage): Promise<void>;
  seen(receipt: { messageUrn: string; seenAt: number; seenBy: string | undefined }): Promise<void>;
  /** How long the li_at still rests (0: it does not). */
  restRemainingMs(): Promise<number>;
  /** LinkedIn refused the stream as automated (999): the li_at is to rest. */
  refusedAsAutomated(): Promise<void>;
  /** The session is signed out: the stream has ended for good. */
  signedOut(): Promise<void>;
  /** The sender's proxy did not carry the opening (nothing went direct instead). */
  proxyFailed(failure: ProxyFailure): Promise<void>;
  /** LinkedIn answered an opening (through the proxy, when there is one). */
  answered(): Promise<void>;
}

export interface StreamOptions {
  apiRoot: string;
  session: { li_at: string; csrf_token: string; cookies?: string | undefined; user_agent?: string | undefined };
  /** The mailbox's own profile urn: the heartbeats' actor. */
  actorUrn: string;
  handlers: StreamHandlers;
  clock: StreamClock;
  logger: Logger;
  signal: AbortSignal;
  /** Nothing read for this long (LinkedIn sends heartbeats far more often): the stream is opened again. */
  idleMs: number;
  timeoutMs: number;
  /** The dispatcher of the next opening and its heartbeats: direct or the sender's proxy; throws a ProxyFailure when that cannot be used. */
  connection(): Promise<Dispatcher>;
}

type Opening =
  | { kind: 'closed'; wasOpen: boolean }
  | { kind: 'failed'; why: string; status?: number }
  | { kind: 'proxy'; failure: ProxyFailure }
  | { kind: 'signed-out' }
  | { kind: 'rest' };

export async function runRealtimeStream(options: StreamOptions): Promise<void> {
  const { apiRoot, clock, signal, logger } = options;
  const origin = new URL(apiRoot).origin;
  const cookies = await DeliveryCookies.of(apiRoot, options.session);
  let sessionId = randomUUID();
  let attempts = 0;
  let everOpen = false;

  const headersFor = async (url: string, accept: string): Promise<Record<string, string>> =>
    voyagerHeaders({
      browser: browserIdentity({
        userAgent: options.session.user_agent,
        langCookie: await cookies.value('lang'),
        timezoneCookie: await cookies.value('timezone'),
        referer: `${origin}/messaging/`,
      }),
      cookie: await cookies.header(url),
      csrfToken: (await cookies.value('JSESSIONID')) ?? '',
      accept,
    });

  /** What an answer's status says of the session, as for every other call. */
  const signedOutBy = async (status: number, location: string): Promise<boolean> =>
    status === 401 || (status >= 300 && status < 400 && LOGIN_LOCATION.test(location)) || (await cookies.signedOut());

  async function heartbeats(dispatcher: Dispatcher, connection: AbortSignal, onSignedOut: () => void): Promise<void> {
    let first = true;
    while (!connection.aborted) {
      const url = `${apiRoot}${REALTIME_HEARTBEAT_PATH}`;
      try {
        const res = await request(url, {
          method: 'POST',
          headers: { ...(await headersFor(url, '*/*')), ...HEARTBEAT_HEADERS, origin },
          body: JSON.stringify(heartbeatBody({ first, sessionId, actorUrn: options.actorUrn })),
          dispatcher,
          signal: connection,
          headersTimeout: options.timeoutMs,
          bodyTimeout: options.timeoutMs,
        });
        await cookies.absorb(url, res.headers['set-cookie']);
        await res.body.dump().catch(() => undefined);
        if (await signedOutBy(res.statusCode, String(res.headers.location ?? ''))) return onSignedOut();
        if (res.statusCode >= 300) logger.warn({ status: res.statusCode }, 'LinkedIn did not take a realtime heartbeat');
      } catch (err) {
        if (connection.aborted) return;
        logger.warn({ why: (err as { code?: string }).code ?? 'network error' }, 'could not post a realtime heartbeat');
      }
      first = false;
      await clock.sleep(HEARTBEAT_EVERY_MS, connection);
    }
  }

  /** The dispatcher of the next opening, or why the sender's proxy cannot be used (never a direct one instead). */
  async function connection(): Promise<Dispatcher | ProxyFailure> {
    try {
      return await options.connection();
    } catch (err) {
      const failure = proxyFailureOf(err);
      if (!failure) throw err;
      return failure;
    }
  }

  async function open(dispatcher: Dispatcher): Promise<Opening> {
    const connection = new AbortController();
    const stop = () => connection.abort();
    signal.addEventListener('abort', stop, { once: true });
    let signedOut = false;
    try {
      const url = `${apiRoot}${REALTIME_CONNECT_PATH}`;
      let res;
      try {
        res = await request(url, {
          method: 'GET',
          headers: { ...(await headersFor(url, ACCEPT_EVENT_STREAM)), ...realtimeConnectHeaders(sessionId) },
          dispatcher,
          signal: connection.signal,
          headersTimeout: options.timeoutMs,
          bodyTimeout: options.idleMs,
        });
      } catch (err) {
        const failure = proxyFailureOf(err);
        if (failure) return { kind: 'proxy', failure };
        return { kind: 'failed', why: (err as { code?: string }).code ?? 'network error' };
      }
      await options.handlers.answered().catch((err: unknown) => logger.warn({ err }, "could not record that the sender's proxy carried its stream"));
      await cookies.absorb(url, res.headers['set-cookie']);
      if (res.statusCode !== 200) {
        await res.body.dump().catch(() => undefined);
        if (res.statusCode === 999) return { kind: 'rest' };
        if (await signedOutBy(res.statusCode, String(res.headers.location ?? ''))) return { kind: 'signed-out' };
        return { kind: 'failed', why: `status ${res.statusCode}`, status: res.statusCode };
      }
      let wasOpen = false;
      let pending = '';
      const decoder = new TextDecoder();
      try {
        reading: for await (const chunk of res.body) {
          pending += decoder.decode(chunk as Buffer, { stream: true });
          let end: number;
          while ((end = pending.indexOf('\n')) >= 0) {
            const line = pending.slice(0, end).replace(/\r$/, '');
            pending = pending.slice(end + 1);
            const event = readRealtimeLine(line);
            if (!event) continue;
            switch (event.kind) {
              case 'connected':
                options.handlers.connected(wasOpen || everOpen);
                wasOpen = everOpen = true;
                attempts = 0;
                void heartbeats(dispatcher, connection.signal, () => {
                  signedOut = true;
                  connection.abort();
                });
                break;
              case 'message':
                await options.handlers.message(event.conversationUrn, event.message);
                break;
              case 'seen':
                await options.handlers.seen(event);
                break;
              case 'unreadable':
                logger.warn('LinkedIn sent a realtime event that is not JSON: the stream is opened again');
                break reading;
              default:
                break;
            }
          }
        }
      } catch (err) {
        if (!connection.signal.aborted) logger.info({ why: (err as { code?: string }).code ?? 'network error' }, 'the LinkedIn realtime stream broke');
      }
      if (signedOut) return { kind: 'signed-out' };
      return { kind: 'closed', wasOpen };
    } finally {
      signal.removeEventListener('abort', stop);
      connection.abort();
    }
  }

  while (!signal.aborted) {
    // Read before the rest is checked: a look-up between that check and the opening would widen the
    // window in which another call's 999 (the rest it begins) goes unseen.
    const through = await connection();
    const resting = await options.handlers.restRemainingMs();
    if (resting > 0) {
      await clock.sleep(resting, signal);
      continue;
    }
    const opening: Opening = through instanceof ProxyFailure ? { kind: 'proxy', failure: through } : await open(through);
    if (signal.aborted) return;
    switch (opening.kind) {
      case 'signed-out':
        await options.handlers.signedOut();
        return;
      case 'rest':
        await options.handlers.refusedAsAutomated();
        continue;
      case 'closed':
        // A stream that was open is opened again at once (realtime.go:239-243, 276); one that closed
        // before LinkedIn took it counts as a failed opening, so a server that closes at once is not hammered.
        if (opening.wasOpen) continue;
        break;
      case 'proxy':
        await options.handlers.proxyFailed(opening.failure);
        break;
      case 'failed':
        // A 400 asks for a new realtime session id (realtime.go:202-205).
        if (opening.status === 400) sessionId = randomUUID();
        logger.info({ why: opening.why }, 'could not open the LinkedIn realtime stream');
        break;
    }
    attempts += 1;
    await clock.sleep(reconnectWaitMs(attempts), signal);
  }
}
