import type { Logger } from 'pino';
import type { Kysely } from 'kysely';
import { capKey, indicatorMs, nextDayStart, type Rhythm } from '../core/rhythm.js';
import { DeliveryError, type DeliveryJob, type PlatformAdapter, type PlatformSession } from '../platforms/platform.js';
import type { PlatformRegistry } from '../platforms/registry.js';
import { findRhythm, findRhythms, markIndicatorShown, releaseSenderPlace, reserveSenderPlace, rhythmKey } from '../store/rhythm.js';
import type { MessageRow } from '../store/messages.js';
import type { Database } from '../store/schema.js';

/** What a message waits for, besides a retry (docs/sending.md, "Sending like a person"). */
export type WaitReason = 'daily_cap' | 'recording_indicator' | 'sender_rest' | 'sender_restricted' | 'send_window';

/**
 * Not a failure: the message goes back to the queue to come back exactly `retryAfterMs` from now (no
 * attempt counted, no backoff, no retry window), waiting for `reason`. The worker's slot is free meanwhile.
 */
export class Deferral extends DeliveryError {
  constructor(
    readonly reason: WaitReason,
    message: string,
    delayMs: number,
  ) {
    super('platform_rate_limited', message, true, Math.max(0, Math.round(delayMs)), { notAttempted: true });
    this.name = 'Deferral';
  }
}

/**
 * Sending like a person, between a message's audio and its platform call: the sender's daily cap (live
 * sends only: a place under the cap is taken in the database before the call and given back when the
 * call does not go through), then the "recording…" indicator when asked for (shown once, then the
 * message waits in the queue for its length), then the delivery.
 */
export interface DeliveryGate {
  /**
   * The rhythms one claim's messages will need, read in one statement right after the claim (instead of
   * one read per message); given back to `deliver` as `rhythms`. A message not in it is read on its own.
   */
  readAhead(messages: readonly MessageRow[]): Promise<ClaimedRhythms>;
  deliver(input: { message: MessageRow; workerId: string; job: DeliveryJob; adapter: PlatformAdapter; rhythms?: ClaimedRhythms }): Promise<void>;
}

/** Rhythms by rhythmKey(account, platform). */
export type ClaimedRhythms = ReadonlyMap<string, Rhythm>;

export function createRhythmGate(deps: {
  db: Kysely<Database>;
  platforms: PlatformRegistry;
  logger: Logger;
  random?: () => number;
  /** Tests: the platforms' default rhythms instead of the built-in ones. */
  defaults?: Readonly<Record<string, Rhythm>>;
}): DeliveryGate {
  const { db, platforms, logger } = deps;
  const random = deps.random ?? Math.random;

  function senderKeyOf(message: MessageRow, session: PlatformSession): string | undefined {
    const own = platforms.get(message.platform)?.senderKey?.(session);
    // Scoped by account and environment: one account's sends never count against another's cap.
    return own ? capKey({ accountId: message.account_id, env: message.env }, message.platform, own) : undefined;
  }

  /** Only live sends count against a sender's cap, on platforms that name their senders. */
  const capped = (message: MessageRow) => message.env === 'live' && message.cap_day == null && platforms.get(message.platform)?.senderKey !== undefined;

  return {
    async readAhead(messages) {
      const wanted = messages.filter(capped).map((m) => ({ accountId: m.account_id, platform: m.platform }));
      return findRhythms(db, wanted, deps.defaults);
    },

    async deliver({ message, workerId, job, adapter, rhythms }) {
      // The sender's key (a hash of its credential) only when a cap needs it: most notes have none.
      let senderKey: string | undefined;
      let holdsPlace = message.cap_day != null;
      if (capped(message)) {
        const found = rhythms?.get(rhythmKey(message.account_id, message.platform)) ?? (await findRhythm(db, message.account_id, message.platform, deps.defaults));
        // A kind of sender with a default of its own (a Telegram account beside bots), unless the account set one.
        const ownKind = (found as { custom?: boolean }).custom === true || deps.defaults !== undefined ? undefined : platforms.get(message.platform)?.senderRhythm?.(job.session);
        const rhythm = ownKind ?? found;
        if (rhythm.dailyCap !== null) senderKey = senderKeyOf(message, job.session);
        if (senderKey) {
          const reserved = await reserveSenderPlace(db, { senderKey, rhythm, messageId: message.id, workerId });
          if (!reserved.ok) {
            const until = nextDayStart(reserved.now, random);
            throw new Deferral(
              'daily_cap',
              `the sender's daily cap (${reserved.allowance} voice notes today, UTC) is reached; the note waits for the next day`,
              until - reserved.now,
            );
          }
          holdsPlace = true;
        }
      }
      try {
        const indicatorAsked = Number(message.recording_indicator ?? 0) === 1;
        if (indicatorAsked && message.indicator_started_at == null && adapter.showRecording) {
          const ms = indicatorMs(job.audio.durationSeconds, random);
          // Written before it is shown: a restart never shows it twice (at worst, not at all).
          if (!(await markIndicatorShown(db, { messageId: message.id, workerId, ms }))) {
            throw new DeliveryError('platform_error', 'the message is no longer held by this worker', true, undefined, { notAttempted: true });
          }
          try {
            await adapter.showRecording(job, ms);
          } catch (err) {
            // The indicator is a courtesy: the note still goes, at the end of its time.
            logger.warn({ err, message_id: message.id }, 'the recording indicator could not be shown');
          }
          throw new Deferral('recording_indicator', `showing "recording…" for ${Math.round(ms / 100) / 10} s before the note`, ms);
        }
        await adapter.deliver({ ...job, recordingIndicator: indicatorAsked && message.indicator_started_at != null });
      } catch (error) {
        // Not delivered: the place under the cap goes back (a retry takes one again).
        const heldBy = holdsPlace && !(error instanceof Deferral) ? (senderKey ?? senderKeyOf(message, job.session)) : undefined;
        if (heldBy) {
          await releaseSenderPlace(db, { senderKey: heldBy, messageId: message.id }).catch((err: unknown) =>
            logger.warn({ err, message_id: message.id }, 'could not give back a place under the daily cap'),
          );
        }
        throw error;
      }
    },
  };
}
