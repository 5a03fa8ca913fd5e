import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { recordEventually } from '../../inbound/record-eventually.js';
import type { OnHeard } from '../../inbound/recorder.js';
import { claimAffinity, releaseAffinity } from '../../store/affinity.js';
import { listenedConversations, streamableLinkedinListeners, type LinkedinListenerRow } from '../../store/linkedin-listeners.js';
import { recordReceipt } from '../../store/receipts.js';
import { REPLY_CLOCK_SLACK_MS } from '../../store/replies.js';
import type { Database } from '../../store/schema.js';
import { mailboxOf, replyHeard, type ConversationMessage } from './listening.js';
import type { ListenProxies } from './listen-proxy.js';
import { runRealtimeStream, type StreamClock, type StreamOptions } from './realtime-stream.js';
import { REST_AFTER_999_MS, type AccountRest } from './rest.js';

/**
 * The realtime streams of the listened li_ats (docs/replies-and-receipts.md, "LinkedIn: listen: true"):
 * each li_at that wrote into a listened conversation keeps one open, in one process at a time (lease
 * `linkedin-stream:<sender key>`, renewed at every scan; another process takes over when it lapses). A
 * message of a listened conversation's recipient after the note is a reply at once; the recipient's
 * seen event of a note is its read receipt. Whenever a stream opens again after a gap, or first opens
 * after a look was already made since the latest note, every listened conversation is looked at once
 * (uncounted), so what was said while no stream was open is read then. The listener (listener.ts)
 * owns the looks and what a signed-out session means; this module asks it for them.
 */

export interface StreamKeeperDeps {
  db: Kysely<Database>;
  log: Logger;
  apiRoot: string;
  /** This process's lease holder name. */
  holder: string;
  leaseMs: number;
  timeoutMs: number;
  rest: AccountRest;
  onHeard: OnHeard;
  clock: StreamClock;
  idleMs: number;
  /** Each stream's connections: through its sender's proxy, when it has one (docs/proxies.md). */
  proxies: ListenProxies;
  /** The listener stops: every stream ends. */
  stopping: AbortSignal;
  openSession(row: LinkedinListenerRow): StreamOptions['session'] | undefined;
  /** One uncounted look at these conversations of the sender. */
  lookAt(senderKey: string, conversationUrns: ReadonlySet<string>): Promise<void>;
  /** The session is signed out (its stream got a 401). */
  sessionEnded(senderKey: string): Promise<void>;
  /** The kept session cannot be opened (sealed with another key). */
  forgetUnreadable(senderKey: string): Promise<void>;
}

export interface StreamKeeper {
  /** At each scan: opens the streams wanted and not open here, ends those no longer wanted or taken over. */
  keep(): Promise<void>;
  /** Ends one sender's stream in this process (its listening ended). */
  end(senderKey: string): void;
  /** Resolves once every stream and catch-up look of this process has ended (after `stopping`). */
  stopped(): Promise<void>;
}

const streamLeaseKey = (senderKey: string): string => `linkedin-stream:${senderKey}`;

export function keepLinkedinStreams(deps: StreamKeeperDeps): StreamKeeper {
  const { db, log } = deps;
  /** The realtime streams this process holds, by sender key. */
  const streams = new Map<string, { stop: AbortController; done: Promise<void> }>();
  /** Catch-up looks of one sender run one after the other (a second one waits for the first). */
  const catchUps = new Map<string, Promise<void>>();
  /** Senders whose catch-up look failed: tried again at the next scan. */
  const catchUpDue = new Set<string>();
  /** What a stream pushes is pushed once: a failure to record it is tried again in the process. */
  const hearPushed = recordEventually(deps.onHeard, log);
  const recordSeen = recordEventually((receipt: { messageUrn: string; at: number }) =>
    recordReceipt(db, { platformMessageId: receipt.messageUrn, kind: 'read', at: receipt.at, source: 'linkedin' }).then(() => undefined),
  log);

  async function keep(): Promise<void> {
    const now = Date.now();
    const wanted = new Map<string, LinkedinListenerRow>();
    for (const row of await streamableLinkedinListeners(db, now)) wanted.set(row.sender_key, row);
    for (const [senderKey, stream] of streams) {
      const held = wanted.has(senderKey) && (await claimAffinity(db, streamLeaseKey(senderKey), deps.holder, now, deps.leaseMs));
      if (!held) stream.stop.abort();
    }
    for (const [senderKey, row] of wanted) {
      if (streams.has(senderKey) || deps.stopping.aborted) continue;
      if (!(await claimAffinity(db, streamLeaseKey(senderKey), deps.holder, now, deps.leaseMs))) continue;
      start(row);
    }
    for (const senderKey of catchUpDue) if (streams.has(senderKey)) catchUp(senderKey);
  }

  function start(row: LinkedinListenerRow): void {
    const senderKey = row.sender_key;
    const stop = new AbortController();
    const done = (async () => {
      const session = deps.openSession(row);
      if (!session) return deps.forgetUnreadable(senderKey);
      // The mailbox is in every conversation urn: the heartbeats' actor.
      const conversations = await listenedConversations(db, senderKey);
      const actorUrn = conversations.map((c) => mailboxOf(c.conversation_urn)).find((m) => m !== undefined);
      if (actorUrn === undefined) return;
      // A look was made since the latest note: what was said since that look is read when the stream opens.
      let behind = Number(row.checks) > 0;
      await runRealtimeStream({
        apiRoot: deps.apiRoot,
        session,
        actorUrn,
        clock: deps.clock,
        logger: log.child({ sender: senderKey }),
        signal: AbortSignal.any([stop.signal, deps.stopping]),
        idleMs: deps.idleMs,
        timeoutMs: deps.timeoutMs,
        connection: async () => (await deps.proxies.connectionFor(senderKey)).dispatcher,
        handlers: {
          connected: (again) => {
            if (again || behind) catchUp(senderKey);
            behind = false;
          },
          message: (conversationUrn, message) => heard(senderKey, conversationUrn, message),
          seen: async (receipt) => {
            // Our own reading of the conversation says nothing of the recipient.
            if (receipt.seenBy === undefined || receipt.seenBy === actorUrn) return;
            await recordSeen({ messageUrn: receipt.messageUrn, at: receipt.seenAt });
          },
          restRemainingMs: () => deps.rest.remainingMs(senderKey),
          refusedAsAutomated: async () => {
            log.warn({ sender: senderKey }, 'LinkedIn refused the realtime stream as automated (999): the li_at rests, the stream waits for the rest to end');
            await deps.rest.begin(senderKey, REST_AFTER_999_MS);
          },
          signedOut: () => deps.sessionEnded(senderKey),
          proxyFailed: (failure) => deps.proxies.failed(senderKey, failure),
          answered: () => deps.proxies.carried(senderKey),
        },
      });
    })()
      .catch((err: unknown) => log.warn({ err, sender: senderKey }, 'the LinkedIn realtime stream stopped'))
      .finally(async () => {
        streams.delete(senderKey);
        await releaseAffinity(db, streamLeaseKey(senderKey), deps.holder).catch(() => undefined);
      });
    streams.set(senderKey, { stop, done });
  }

  /** A message pushed on the stream: a reply when the recipient of a listened conversation wrote it after the note. */
  async function heard(senderKey: string, conversationUrn: string, message: ConversationMessage): Promise<void> {
    const conversation = (await listenedConversations(db, senderKey)).find((c) => c.conversation_urn === conversationUrn);
    if (!conversation) return;
    // Ours (the mailbox's), and what was said before the note (with the recorder's clock slack), answer nothing.
    const mailbox = mailboxOf(conversationUrn);
    if (message.senderProfileUrn === undefined || message.senderProfileUrn === mailbox || message.deliveredAt < Number(conversation.note_at) - REPLY_CLOCK_SLACK_MS) return;
    await hearPushed(replyHeard(senderKey, conversation.recipient, message));
  }

  /** One look at every listened conversation of a sender, uncounted: what was said while its stream was closed. */
  function catchUp(senderKey: string): void {
    catchUpDue.delete(senderKey);
    const previous = catchUps.get(senderKey) ?? Promise.resolve();
    const next = previous
      .then(async () => {
        const urns = new Set((await listenedConversations(db, senderKey)).map((c) => c.conversation_urn));
        await deps.lookAt(senderKey, urns);
      })
      .catch((err: unknown) => {
        catchUpDue.add(senderKey);
        log.warn({ err, sender: senderKey }, 'could not read the LinkedIn conversations after the stream opened; tried again at the next scan');
      })
      .finally(() => {
        if (catchUps.get(senderKey) === next) catchUps.delete(senderKey);
      });
    catchUps.set(senderKey, next);
  }

  return {
    keep,
    end: (senderKey) => streams.get(senderKey)?.stop.abort(),
    async stopped() {
      await Promise.allSettled([...[...streams.values()].map((s) => s.done), ...catchUps.values()]);
      hearPushed.stop();
      recordSeen.stop();
    },
  };
}
