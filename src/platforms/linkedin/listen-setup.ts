/**
 * How LinkedIn listening is put together in a process: the rest shared with deliveries (a 999 on a look
 * pauses the li_at's notes, and one on a note pauses its looks), the record of each conversation a note
 * went into, and the checker. Tests tune the intervals through `platformTuning.linkedinListen`.
 */
import type { SecretBox } from '../../core/secret-box.js';
import type { Rhythm } from '../../core/rhythm.js';
import type { OnHeard } from '../../inbound/recorder.js';
import { noteLinkedinConversation } from '../../store/linkedin-listeners.js';
import type { PlatformServices } from '../platform.js';
import { startLinkedinListener, type LinkedinListener } from './listener.js';
import { savePlatformMessageId } from '../../store/receipts.js';
import { checkAt, LISTEN_DAILY_MS, LISTEN_INTERVALS_MS, readSentConversation, readSentMessage } from './listening.js';
import type { MessageTarget } from './voyager-requests.js';
import type { StreamClock } from './realtime-stream.js';
import { createMemoryRest, createRedisRest, type AccountRest } from './rest.js';

export interface LinkedinListenTuning {
  scanMs?: number;
  intervalsMs?: number[];
  dailyMs?: number;
  preSendLeadMs?: number;
  /** The realtime stream's waits (tests: a clock they move by hand). */
  streamClock?: StreamClock;
  streamIdleMs?: number;
  /** How long a look waits after its proxy did not carry it. */
  proxyRetryMs?: number;
  /** The looks' clock (tests: one they move ahead instead of sleeping). */
  now?: () => number;
}

export const listenTuningOf = (tuning: Readonly<Record<string, unknown>> | undefined): LinkedinListenTuning =>
  (typeof tuning?.linkedinListen === 'object' && tuning.linkedinListen !== null ? tuning.linkedinListen : {}) as LinkedinListenTuning;

const rests = new WeakMap<object, AccountRest>();

/** The one rest of a process's LinkedIn accounts: in Redis when configured (every process), else in memory. */
export function linkedinRestFor(services: PlatformServices): AccountRest {
  let rest = rests.get(services.db);
  if (!rest) {
    rest = services.redis
      ? createRedisRest({
          redis: services.redis,
          keyPrefix: services.redisKeyPrefix ?? 'voicenote',
          onFallback: (err) => services.logger.warn({ err }, 'Redis did not answer; LinkedIn accounts refused as automated rest per process until it does'),
        })
      : createMemoryRest();
    rests.set(services.db, rest);
  }
  return rest;
}

/** What the adapter calls when a note went into a conversation: read it from then on if its li_at is listened to. */
export function recordSentConversation(services: PlatformServices, tuning: LinkedinListenTuning) {
  return async (sent: { account: string; messageId: string; recipient: string; answer: unknown; target: MessageTarget; at: number }): Promise<void> => {
    // Kept on the note, so a reply quoting it (repliedMessageContent) is recorded on it.
    const messageUrn = readSentMessage(sent.answer);
    if (messageUrn !== undefined) await savePlatformMessageId(services.db.kysely, sent.messageId, messageUrn);
    // The conversation it went into: the answer names it; a conversation we wrote into by its urn is known.
    const conversationUrn = readSentConversation(sent.answer) ?? ('conversationUrn' in sent.target ? sent.target.conversationUrn : undefined);
    if (conversationUrn === undefined) return;
    const first = checkAt(sent.at, 0, tuning.intervalsMs ?? LISTEN_INTERVALS_MS, tuning.dailyMs ?? LISTEN_DAILY_MS);
    await noteLinkedinConversation(services.db.kysely, { senderKey: sent.account, conversationUrn: conversationUrn, recipient: sent.recipient, at: sent.at }, first);
  };
}

export function startLinkedinListening(
  services: PlatformServices & { secretBox: SecretBox; onHeard: OnHeard; rhythmDefaults?: Readonly<Record<string, Rhythm>> | undefined },
  tuning: LinkedinListenTuning,
): LinkedinListener {
  return startLinkedinListener({
    db: services.db.kysely,
    secretBox: services.secretBox,
    logger: services.logger,
    apiRoot: services.config.linkedinApiRoot,
    onHeard: services.onHeard,
    rest: linkedinRestFor(services),
    ...(services.rhythmDefaults ? { rhythmDefaults: services.rhythmDefaults } : {}),
    ...(tuning.scanMs !== undefined ? { scanMs: tuning.scanMs } : {}),
    ...(tuning.intervalsMs !== undefined ? { intervalsMs: tuning.intervalsMs } : {}),
    ...(tuning.dailyMs !== undefined ? { dailyMs: tuning.dailyMs } : {}),
    ...(tuning.preSendLeadMs !== undefined ? { preSendLeadMs: tuning.preSendLeadMs } : {}),
    ...(tuning.streamClock !== undefined ? { streamClock: tuning.streamClock } : {}),
    ...(tuning.streamIdleMs !== undefined ? { streamIdleMs: tuning.streamIdleMs } : {}),
    ...(tuning.proxyRetryMs !== undefined ? { proxyRetryMs: tuning.proxyRetryMs } : {}),
    ...(tuning.now !== undefined ? { now: tuning.now } : {}),
    ...(services.config.outboundProxy !== undefined ? { outboundProxy: services.config.outboundProxy } : {}),
    allowPrivateProxies: services.config.audioAllowPrivateUrls,
  });
}
