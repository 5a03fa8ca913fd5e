import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Kysely } from 'kysely';
import type { Database } from '../../store/schema.js';
import { findWhatsappSession } from '../../store/whatsapp-sessions.js';
import { PacingBusy } from '../pacing.js';
import { DeliveryError, type DeliveryJob, type PlatformAdapter } from '../platform.js';
import { SessionNotOpenError, type LiveWhatsapp } from './live.js';
import type { WhatsappSessionRef } from './rules.js';
import { recipientJidFor } from './recipient-check.js';
import type { VoiceNoteContent, WhatsappSocket } from './socket.js';

const OGG_OPUS = 'audio/ogg; codecs=opus';

// How soon a message comes back when its session's socket lives in another process. Claims route a
// message to its session's holder, so this happens only when the session changed hands between the
// claim and now; from then on only the holder's worker claims the message. Soon, then, but not at once:
// a little slack for the holder to be seen in the store, and no tight loop if something is amiss (the
// bounce costs no attempt and no backoff step; the message's one-hour retry window still bounds it).
const handoverRetryMs = (): number => 250 + Math.round(Math.random() * 500);

/**
 * The WhatsApp message id of one of our messages: derived from our id, so every attempt, in every
 * process, sends the same id, and a retry after a lost acknowledgement is the same message to the
 * recipient's devices rather than a second one. The shape of the ids WhatsApp Web clients make
 * ("3EB0" and 18 upper-case hex digits).
 */
export function whatsappMessageId(messageId: string): string {
  return `3EB0${createHash('sha256').update(`voicenote:${messageId}`).digest('hex').toUpperCase().slice(0, 18)}`;
}

/** The session's socket is gone, or its pacing says "not now" (back to the queue at its turn, no worker slot held meanwhile). */
function asDeliveryFailure(error: unknown): unknown {
  if (error instanceof SessionNotOpenError) return new DeliveryError('session_not_connected', error.message, true);
  if (error instanceof PacingBusy) {
    return new DeliveryError('platform_rate_limited', 'another voice note of this WhatsApp session is being sent or was sent moments ago; it waits its turn in the queue', true, error.retryAfterMs, {
      notAttempted: true,
    });
  }
  return error;
}

const transient = (message: string): DeliveryError => new DeliveryError('platform_error', message, true);

/**
 * Live WhatsApp delivery: through the socket of a session this process holds (taking it over when it is
 * free), one send at a time per session, paced. A session that is connected but not open here right now
 * is a transient failure; one that is gone or no longer connected is a permanent one.
 */
export function createWhatsappAdapter(deps: { db: Kysely<Database>; live: LiveWhatsapp }): PlatformAdapter {
  const { db, live } = deps;
  // A process that delivers WhatsApp messages keeps the connected sessions open.
  live.serveDeliveries();

  /** The session's socket here, or the reason it is not (as a DeliveryError). */
  async function heldSession(job: DeliveryJob) {
    if (job.session.platform !== 'whatsapp') throw new DeliveryError('invalid_session', 'not a WhatsApp session', false);
    const sessionId = (job.session as unknown as WhatsappSessionRef).session_id;
    const row = await findWhatsappSession(db, { accountId: job.accountId, env: job.env }, sessionId);
    if (!row) throw new DeliveryError('invalid_session', `the WhatsApp session ${sessionId} no longer exists`, false);
    const scannedNotOpen = row.status === 'qr_pending' && row.qr_expires_at === null;
    if (row.status !== 'connected' && !scannedNotOpen) {
      throw new DeliveryError('session_not_connected', `the WhatsApp session is ${row.status}, not connected`, false);
    }

    const acquired = await live.acquire(sessionId);
    if (!acquired.held) {
      if (acquired.reason === 'no_credentials') {
        throw new DeliveryError('session_not_connected', 'the WhatsApp session has no stored credentials; link it again', false);
      }
      // Another process holds the socket: give the message back soon, so a worker there can take it.
      if (acquired.reason === 'held_elsewhere') {
        throw new DeliveryError('session_not_connected', 'the WhatsApp session is held by another process; will retry', true, handoverRetryMs(), {
          notAttempted: true,
        });
      }
      // Its proxy does not carry its connection: the note waits, and fails proxy_unreachable if it never does (docs/proxies.md).
      if (acquired.reason === 'proxy_unreachable') throw new DeliveryError('proxy_unreachable', acquired.message, true);
      // Reconnecting: back off as for any transient failure.
      throw new DeliveryError('session_not_connected', 'the WhatsApp session is not connected right now; will retry', true);
    }
    return acquired.held;
  }

  /** The recipient's jid: WhatsApp's answer, asked before the first note to a number and kept 30 days (recipient-check.ts). */
  const recipientJid = (socket: WhatsappSocket, sessionId: string, recipient: string): Promise<string> => recipientJidFor(db, socket, sessionId, recipient);

  return {
    async showRecording(job: DeliveryJob): Promise<void> {
      const held = await heldSession(job);
      // Paced with the session's sends. WhatsApp keeps "recording audio…" up until `paused` (sent after the note).
      const show = () =>
        held.paced(async (socket) => {
          const jid = await recipientJid(socket, held.sessionId, job.recipient);
          await socket.sendPresenceUpdate('recording', jid);
        });
      try {
        job.signal.throwIfAborted();
        await show();
      } catch (error) {
        if (!(error instanceof PacingBusy)) throw asDeliveryFailure(error);
        // The session's turn is later: shown then by a timer, not a wait (the worker's slot is free meanwhile);
        // refused again, it is skipped (the indicator is a courtesy).
        setTimeout(() => void show().catch(() => undefined), error.retryAfterMs).unref();
      }
    },

    async deliver(job: DeliveryJob): Promise<void> {
      const held = await heldSession(job);
      const audio = await readFile(job.audio.path);
      try {
        await held.paced(async (socket) => {
          const jid = await recipientJid(socket, held.sessionId, job.recipient);
          const note: VoiceNoteContent = {
            audio,
            mimetype: OGG_OPUS,
            ptt: true,
            seconds: Math.max(1, Math.round(job.audio.durationSeconds)),
            waveform: job.audio.waveform,
          };
          // The send cannot be taken back once started: an attempt aborted before it never starts it.
          job.signal.throwIfAborted();
          // Resolved once relayed, before WhatsApp's acknowledgement: a refusal (463 and others) comes
          // later, as an error status of the message (refusals.ts).
          let sent: Awaited<ReturnType<typeof socket.sendMessage>>;
          try {
            sent = await socket.sendMessage(jid, note, { messageId: whatsappMessageId(job.messageId) });
          } catch (error) {
            throw transient(`WhatsApp did not accept the voice note: ${(error as Error).message}`);
          }
          // For a recipient's device that cannot decrypt it and asks for it again, days later or in another process.
          await held.keepForResend(sent);
          // The note is sent: "recording audio…" ends (a failure here costs nothing but the indicator).
          if (job.recordingIndicator) await socket.sendPresenceUpdate('paused', jid).catch(() => undefined);
        });
      } catch (error) {
        throw asDeliveryFailure(error);
      }
    },
  };
}
