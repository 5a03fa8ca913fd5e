import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { request } from '../../core/http-client.js';
import { capKey, nextDayStart, type Rhythm } from '../../core/rhythm.js';
import type { SecretBox } from '../../core/secret-box.js';
import { findRhythm, takeSenderPlace } from '../../store/rhythm.js';
import type { OnHeard } from '../../inbound/recorder.js';
import { expireLiveSender } from '../../store/senders.js';
import { claimAffinity, releaseAffinity } from '../../store/affinity.js';
import {
  checkedLinkedin,
  dueLinkedinListeners,
  endExpiredLinkedinListening,
  findLinkedinListener,
  followUpsDueBefore,
  forgetLinkedinListener,
  listenedConversations,
  postponeLinkedinLook,
  type LinkedinListenerRow,
  type ListenedConversationRow,
} from '../../store/linkedin-listeners.js';
import { REPLY_CLOCK_SLACK_MS } from '../../store/replies.js';
import type { Database } from '../../store/schema.js';
import { proxyFailureOf, type ProxyFailure } from '../proxy/tunnel.js';
import { browserIdentity } from './browser.js';
import { linkedinListenProxies, type ListenConnection } from './listen-proxy.js';
import { DeliveryCookies } from './cookies.js';
import { checkAt, conversationMessagesRequest, LISTEN_DAILY_MS, LISTEN_INTERVALS_MS, mailboxOf, readConversationMessages, replyHeard } from './listening.js';
import { realClock, type StreamClock } from './realtime-stream.js';
import { keepLinkedinStreams } from './stream-keeper.js';
import { SESSION_EXPIRED_MESSAGE } from './voyager-answers.js';
import { REST_AFTER_999_MS, type AccountRest } from './rest.js';
import { LOGIN_LOCATION, meRequest, readOwnProfileUrn, voyagerHeaders, type VoyagerRequest } from './voyager-requests.js';

/**
 * Listens to the LinkedIn senders that asked for it (`listen: true`): LinkedIn tells a browser of new
 * messages only while its page is open, so each conversation a listened li_at wrote into is read as the
 * web app reads it (listening.ts), at growing intervals after the latest note, with the session's own
 * cookies and browser. One checker per li_at across processes, under a lease (affinity_leases, key
 * `linkedin-listen:<sender key>`), as Telegram bots are polled. A 999 rests the li_at (the same rest as
 * its deliveries) and the look waits for the rest's end; a signed-out session (401, a redirect to the
 * login page, li_at deleted) ends listening and erases the kept session, as 14 days without a note do,
 * and makes its live senders `expired` as a delivery's 401 does.
 * A `cancel_on_reply` note due soon into a listened conversation has that conversation looked at once
 * before it goes (a person opens the thread before writing), whatever the intervals say.
 *
 * Beside the looks, each listened li_at that wrote into a conversation keeps LinkedIn's realtime stream
 * open (stream-keeper.ts), in one process at a time (lease `linkedin-stream:<sender key>`): a reply
 * is recorded the moment LinkedIn pushes it, and a seen event of one of our notes is its read receipt.
 * Whenever the stream opens again after being open (a gap), or first opens after a look was already
 * made since the latest note, every listened conversation is looked at once (uncounted), so nothing
 * said meanwhile waits for the next look. The looks stay as they are: the fallback while no stream is
 * open.
 *
 * The looks and the stream go through the li_at's proxy, as its deliveries do (listen-proxy.ts,
 * docs/proxies.md), never directly when it fails: a look whose proxy does not answer waits (without
 * counting under the daily cap) and the sender shows `disconnected` (`proxy_unreachable`).
 */

/** What is kept, sealed, of the session that sent a listened note. */
export interface KeptLinkedinSession {
  li_at: string;
  csrf_token: string;
  cookies?: string;
  user_agent?: string;
}

export interface LinkedinListenerOptions {
  db: Kysely<Database>;
  secretBox: SecretBox;
  logger: Logger;
  apiRoot: string;
  onHeard: OnHeard;
  /** Where li_ats refused as automated rest: the deliveries' own (Redis when configured). */
  rest: AccountRest;
  /** Tests: the platforms' default rhythms instead of the built-in ones (as the worker's). */
  rhythmDefaults?: Readonly<Record<string, Rhythm>>;
  /** How often to look for due senders (default 30 s). */
  scanMs?: number;
  /** Tests: the intervals after a note and the daily one (listening.ts has the real ones). */
  intervalsMs?: readonly number[];
  dailyMs?: number;
  /** The lease of one sender's look (default 5 min). */
  leaseMs?: number;
  /** How long before a `cancel_on_reply` note is due its conversation is looked at (default two scans). */
  preSendLeadMs?: number;
  timeoutMs?: number;
  /** The realtime stream's waits (reconnects, heartbeats): tests pass their own clock. */
  streamClock?: StreamClock;
  /** Nothing read on an open stream for this long: it is opened again (default 90 s; LinkedIn sends heartbeats more often). */
  streamIdleMs?: number;
  /** OUTBOUND_PROXY: the proxy of li_ats without one of their own (docs/proxies.md). */
  outboundProxy?: string;
  /** ALLOW_PRIVATE_URLS: a cookie's proxy at a private address is used; otherwise it is checked again before each connection. */
  allowPrivateProxies?: boolean;
  /** A look whose proxy did not carry it is tried again after this long (default 5 min). */
  proxyRetryMs?: number;
  /** The looks' clock (when one is due, when the next is placed); tests move it ahead instead of sleeping. */
  now?: () => number;
}

export interface LinkedinListener {
  stop(): Promise<void>;
}

type Answer = { kind: 'ok'; json: unknown } | { kind: 'rest' } | { kind: 'ended' } | { kind: 'failed'; why: string } | { kind: 'proxy'; failure: ProxyFailure };
type Outcome = 'done' | 'rest' | 'ended' | 'unreadable' | { proxy: ProxyFailure };

const leaseKey = (senderKey: string): string => `linkedin-listen:${senderKey}`;

export function startLinkedinListener(options: LinkedinListenerOptions): LinkedinListener {
  const { db, logger } = options;
  const now = options.now ?? Date.now;
  const apiRoot = options.apiRoot.replace(/\/+$/, '');
  const origin = new URL(apiRoot).origin;
  const scanMs = options.scanMs ?? 30_000;
  const leaseMs = options.leaseMs ?? 5 * 60_000;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const intervals = options.intervalsMs ?? LISTEN_INTERVALS_MS;
  const dailyMs = options.dailyMs ?? LISTEN_DAILY_MS;
  const preSendLeadMs = options.preSendLeadMs ?? 2 * scanMs;
  /** Follow-ups whose conversation this process looked at before they go (by id, with when): once each. */
  const lookedBeforeSending = new Map<string, number>();
  const holder = `lil_${randomUUID()}`;
  const stopping = new AbortController();
  const looks = new Map<string, Promise<void>>();
  const log = logger.child({ component: 'linkedin-listener' });
  const proxyRetryMs = options.proxyRetryMs ?? 5 * 60_000;
  // Every look and stream of an li_at through its proxy, never directly instead (docs/proxies.md).
  const proxies = linkedinListenProxies({ db, secretBox: options.secretBox, outboundProxy: options.outboundProxy, allowPrivate: options.allowPrivateProxies ?? false, apiRoot, timeoutMs, log });
  const streams = keepLinkedinStreams({
    db,
    log,
    apiRoot,
    holder,
    leaseMs,
    timeoutMs,
    rest: options.rest,
    onHeard: options.onHeard,
    clock: options.streamClock ?? realClock,
    idleMs: options.streamIdleMs ?? 90_000,
    stopping: stopping.signal,
    proxies,
    openSession: (row) => openSession(row),
    lookAt: (senderKey, urns) => lookAt(senderKey, urns),
    sessionEnded: (senderKey) => sessionEnded(senderKey),
    forgetUnreadable: (senderKey) => forgetUnreadable(senderKey),
  });

  async function scan(): Promise<void> {
    const ended = await endExpiredLinkedinListening(db, now());
    if (ended > 0) log.info({ senders: ended }, 'stopped listening to LinkedIn senders without a note for 14 days; their sessions are erased');
    for (const row of await dueLinkedinListeners(db, now())) {
      if (looks.has(row.sender_key) || stopping.signal.aborted) continue;
      if ((await options.rest.remainingMs(row.sender_key)) > 0) continue;
      if (!(await claimAffinity(db, leaseKey(row.sender_key), holder, now(), leaseMs))) continue;
      const running = look(row.sender_key)
        .catch((err: unknown) => log.warn({ err, sender: row.sender_key }, 'could not read the LinkedIn conversations'))
        .finally(async () => {
          looks.delete(row.sender_key);
          await releaseAffinity(db, leaseKey(row.sender_key), holder).catch(() => undefined);
        });
      looks.set(row.sender_key, running);
    }
    await lookBeforeFollowUps();
    await streams.keep();
  }

  /**
   * The session is signed out (401, a redirect to the login page, li_at deleted): its live senders are
   * `expired` as a delivery's 401 makes them, listening ends and the kept session is erased.
   */
  async function sessionEnded(senderKey: string): Promise<void> {
    await expireLiveSender(db, 'linkedin', senderKey, SESSION_EXPIRED_MESSAGE);
    await forgetLinkedinListener(db, senderKey);
    streams.end(senderKey);
    log.warn({ sender: senderKey }, 'the LinkedIn session is signed out: listening ended and the kept session erased');
  }

  /** A kept session sealed with another key (SECRET_KEY changed) can never be read again: listening to it ends. */
  async function forgetUnreadable(senderKey: string): Promise<void> {
    await forgetLinkedinListener(db, senderKey);
    streams.end(senderKey);
    log.warn({ sender: senderKey }, 'the kept LinkedIn session cannot be opened (SECRET_KEY changed?): listening ended and it is erased');
  }

  function openSession(row: LinkedinListenerRow): KeptLinkedinSession | undefined {
    try {
      return JSON.parse(options.secretBox.open(row.jar)) as KeptLinkedinSession;
    } catch {
      // Sealed with another key (SECRET_KEY changed): it can never be read again, so it ends.
      return undefined;
    }
  }

  /** Before a `cancel_on_reply` note goes into a listened conversation, one look at that conversation. */
  async function lookBeforeFollowUps(): Promise<void> {
    const scanAt = now();
    // Forgotten after an hour: by then the note went (or waits for a retry, and is looked at again before it).
    for (const [id, at] of lookedBeforeSending) if (at < scanAt - 60 * 60_000) lookedBeforeSending.delete(id);
    const due = await followUpsDueBefore(db, scanAt + preSendLeadMs);
    for (const senderKey of new Set(due.map((d) => d.sender_key))) {
      const notes = due.filter((d) => d.sender_key === senderKey && !lookedBeforeSending.has(d.id));
      // A look of this sender under way reads every conversation already; the next scan comes back.
      if (notes.length === 0 || looks.has(senderKey) || stopping.signal.aborted) continue;
      if ((await options.rest.remainingMs(senderKey)) > 0) continue;
      if (!(await claimAffinity(db, leaseKey(senderKey), holder, now(), leaseMs))) continue;
      for (const note of notes) lookedBeforeSending.set(note.id, scanAt);
      const urns = new Set(notes.map((n) => n.conversation_urn));
      const running = lookAt(senderKey, urns)
        .catch((err: unknown) => {
          // Not recorded: looked at again at the next scan, while the note is still waiting.
          for (const note of notes) lookedBeforeSending.delete(note.id);
          log.warn({ err, sender: senderKey }, 'could not read a LinkedIn conversation before a follow-up');
        })
        .finally(async () => {
          looks.delete(senderKey);
          await releaseAffinity(db, leaseKey(senderKey), holder).catch(() => undefined);
        });
      looks.set(senderKey, running);
    }
  }

  /** One look at some conversations of one sender, outside its intervals (nothing is counted or placed). */
  async function lookAt(senderKey: string, conversationUrns: ReadonlySet<string>): Promise<void> {
    const row = await findLinkedinListener(db, senderKey);
    if (!row || Number(row.listen_until) <= now()) return;
    const conversations = (await listenedConversations(db, senderKey)).filter((c) => conversationUrns.has(c.conversation_urn));
    let outcome: Outcome;
    try {
      outcome = await readConversations(row, conversations, await proxies.connectionFor(senderKey));
    } catch (error) {
      const failure = proxyFailureOf(error);
      if (!failure) throw error;
      outcome = { proxy: failure };
    }
    if (outcome === 'ended') await sessionEnded(senderKey);
    if (outcome === 'unreadable') await forgetUnreadable(senderKey);
    if (typeof outcome === 'object') {
      // Not read: the caller tries again (at its next scan), never directly.
      await proxies.failed(senderKey, outcome.proxy);
      throw outcome.proxy;
    }
  }

  /** One look at every conversation of one sender, then the next look placed. */
  async function look(senderKey: string): Promise<void> {
    const row = await findLinkedinListener(db, senderKey);
    // Taken by another process between the scan and the lease, or ended meanwhile.
    if (!row || Number(row.next_check_at) > now() || Number(row.listen_until) <= now()) return;
    // A proxy that does not carry a connection now: the look waits for it, without counting under the cap.
    const connection = await proxies.readyFor(senderKey);
    if (!connection) return proxyWait(row);
    if (!(await placeForLook(row))) return;
    const outcome = await readConversations(row, await listenedConversations(db, senderKey), connection);
    if (typeof outcome === 'object') {
      await proxies.failed(senderKey, outcome.proxy);
      return proxyWait(row);
    }
    if (outcome === 'rest') {
      log.warn({ sender: senderKey }, 'LinkedIn refused a look as automated (999): the li_at rests, the look waits for the rest to end');
      return;
    }
    if (outcome === 'ended') return sessionEnded(senderKey);
    if (outcome === 'unreadable') return forgetUnreadable(senderKey);
    const seen = { lastNoteAt: Number(row.last_note_at), checks: Number(row.checks) };
    await checkedLinkedin(db, senderKey, seen, checkAt(seen.lastNoteAt, seen.checks + 1, intervals, dailyMs), now());
  }

  /** The look waits `proxyRetryMs` for the sender's proxy (its place in the intervals is kept). */
  async function proxyWait(row: LinkedinListenerRow): Promise<void> {
    await postponeLinkedinLook(db, row.sender_key, { lastNoteAt: Number(row.last_note_at) }, now() + proxyRetryMs, now());
  }

  /**
   * A look counts as one under the sender's daily cap, as a note does (the account's LinkedIn rhythm):
   * when the day's places are taken, the look waits for the next UTC day without counting.
   */
  async function placeForLook(row: LinkedinListenerRow): Promise<boolean> {
    if (row.account_id == null || row.env !== 'live') return true;
    const owner = { accountId: row.account_id, env: row.env };
    const rhythm = await findRhythm(db, owner.accountId, 'linkedin', options.rhythmDefaults);
    if (rhythm.dailyCap === null) return true;
    const place = await takeSenderPlace(db, { senderKey: capKey(owner, 'linkedin', row.sender_key), rhythm });
    if (place.ok) return true;
    await postponeLinkedinLook(db, row.sender_key, { lastNoteAt: Number(row.last_note_at) }, nextDayStart(place.now), now());
    log.info({ sender: row.sender_key }, "the LinkedIn sender's daily cap is reached: its next look waits for the next day");
    return false;
  }

  async function readConversations(row: LinkedinListenerRow, conversations: readonly ListenedConversationRow[], connection: ListenConnection): Promise<Outcome> {
    if (conversations.length === 0) return 'done';
    const session = openSession(row);
    if (!session) return 'unreadable';
    const cookies = await DeliveryCookies.of(apiRoot, session);
    const identity = async (referer: string) =>
      browserIdentity({ userAgent: session.user_agent, langCookie: await cookies.value('lang'), timezoneCookie: await cookies.value('timezone'), referer });
    const call = async (req: VoyagerRequest, referer: string): Promise<Answer> => {
      const url = `${apiRoot}${req.path}`;
      const headers = voyagerHeaders({ browser: await identity(referer), cookie: await cookies.header(url), csrfToken: (await cookies.value('JSESSIONID')) ?? '', accept: req.accept });
      let res;
      try {
        res = await request(url, { method: req.method, headers, dispatcher: connection.dispatcher, signal: stopping.signal, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
      } catch (err) {
        const failure = proxyFailureOf(err);
        if (failure) return { kind: 'proxy', failure };
        return { kind: 'failed', why: (err as { code?: string }).code ?? 'network error' };
      }
      if (connection.proxied && !carried) {
        carried = true;
        await proxies.carried(row.sender_key);
      }
      await cookies.absorb(url, res.headers['set-cookie']);
      const text = await res.body.text().catch(() => '');
      if (res.statusCode === 999) {
        await options.rest.begin(row.sender_key, REST_AFTER_999_MS);
        return { kind: 'rest' };
      }
      const location = String(res.headers.location ?? '');
      if (res.statusCode === 401 || (res.statusCode >= 300 && res.statusCode < 400 && LOGIN_LOCATION.test(location)) || (await cookies.signedOut())) return { kind: 'ended' };
      if (res.statusCode < 200 || res.statusCode >= 300) return { kind: 'failed', why: `status ${res.statusCode}` };
      try {
        return { kind: 'ok', json: JSON.parse(text) as unknown };
      } catch {
        return { kind: 'failed', why: 'not JSON' };
      }
    };

    let carried = false;
    // As the web app opens the messaging page: who am I, then each conversation.
    const me = await call(meRequest(), `${origin}/messaging/`);
    if (me.kind === 'proxy') return { proxy: me.failure };
    if (me.kind === 'rest' || me.kind === 'ended') return me.kind;
    const mailbox = me.kind === 'ok' ? readOwnProfileUrn(me.json) : undefined;
    if (mailbox === undefined) return 'done';
    for (const conversation of conversations) {
      if (mailboxOf(conversation.conversation_urn) !== mailbox) continue;
      const thread = /,([^,)]+)\)$/.exec(conversation.conversation_urn)?.[1] ?? '';
      const answer = await call(conversationMessagesRequest(conversation.conversation_urn, Date.now()), `${origin}/messaging/thread/${encodeURIComponent(thread)}/`);
      if (answer.kind === 'proxy') return { proxy: answer.failure };
      if (answer.kind === 'rest' || answer.kind === 'ended') return answer.kind;
      if (answer.kind === 'failed') {
        log.warn({ sender: row.sender_key, why: answer.why }, 'LinkedIn did not give the messages of a listened conversation');
        continue;
      }
      for (const message of readConversationMessages(answer.json) ?? []) {
        // Our own messages, and what was said before the latest note, answer nothing. The note's time is
        // ours and the message's LinkedIn's: the same slack as the recorder's on both sides.
        if (message.senderProfileUrn === undefined || message.senderProfileUrn === mailbox || message.deliveredAt < Number(conversation.note_at) - REPLY_CLOCK_SLACK_MS) continue;
        await options.onHeard(replyHeard(row.sender_key, conversation.recipient, message));
      }
    }
    return 'done';
  }

  let scanning: Promise<void> | undefined;
  const timer = setInterval(() => {
    scanning ??= scan()
      .catch((err: unknown) => log.warn({ err }, 'could not look for LinkedIn senders to listen to'))
      .finally(() => (scanning = undefined));
  }, scanMs);
  timer.unref();

  return {
    async stop() {
      clearInterval(timer);
      stopping.abort();
      await scanning;
      await Promise.allSettled([...looks.values(), streams.stopped()]);
    },
  };
}
