import type { Logger } from 'pino';
import type { AttemptRecord, AttemptRecorder, PreparedVoice, RecordWrite } from '../delivery/worker.js';
import type { MessageRow } from '../store/messages.js';
import type { Db } from '../store/db.js';
import { outcomeBatchOf } from '../store/outcome-batch.js';
import { insertAttempt, saveAudio } from '../store/message-log.js';
import { newRowId } from '../core/webhook-ids.js';
import { whatsappMessageId } from '../platforms/whatsapp/adapter.js';
import { savePlatformMessageId } from '../store/receipts.js';

/** What an attempt came to, as the message log names it. */
export type AttemptOutcome = 'delivered' | 'retry' | 'failed' | 'handed_back';

export function outcomeOf(attempt: AttemptRecord): AttemptOutcome {
  if (attempt.error === null) return 'delivered';
  if (attempt.error.notAttempted) return 'handed_back';
  return attempt.retryAt === null ? 'failed' : 'retry';
}

/**
 * Keeps each delivery attempt and the audio it used, for the message log. A write that fails is
 * logged and dropped: the log is a record, and delivery never waits on it or fails because of it.
 * The attempt's record is written by the worker in the transaction of the attempt's outcome; the
 * audio's goes through the store's outcome batch, so on SQLite it shares a transaction and a disk
 * flush with the outcomes written at the same moment instead of paying its own, and the attempt does
 * not wait for it.
 */
export function createAttemptRecorder(store: Db, logger: Logger): AttemptRecorder {
  return {
    attemptEnded(message: MessageRow, attempt: AttemptRecord): RecordWrite {
      const row = {
        id: newRowId('att', attempt.startedAt),
        message_id: message.id,
        attempt: attempt.error?.notAttempted ? Math.max(0, message.attempts - 1) : message.attempts,
        started_at: attempt.startedAt,
        ended_at: attempt.endedAt,
        outcome: outcomeOf(attempt),
        error_code: attempt.error?.code ?? null,
        error_message: attempt.error?.message ?? null,
        next_attempt_at: attempt.retryAt,
      };
      return (trx) => insertAttempt(trx, row);
    },
    async audioPrepared(message: MessageRow, audio: PreparedVoice): Promise<void> {
      try {
        // Before the send: the device's first receipt may come back before the send call returns.
        if (message.env === 'live' && message.platform === 'whatsapp' && !message.platform_message_id) {
          await savePlatformMessageId(store.kysely, message.id, whatsappMessageId(message.id));
        }
        const source = audio.facts?.source ?? null;
        const row = {
          message_id: message.id,
          source_format: source?.container ?? null,
          source_codec: source?.codec ?? null,
          source_duration: source?.durationSeconds ?? null,
          source_size: source?.sizeBytes ?? null,
          source_sha256: audio.facts?.sourceSha256 ?? null,
          converted_format: audio.facts?.format ?? audio.mimeType,
          converted_mime: audio.mimeType,
          converted_duration: audio.durationSeconds,
          converted_size: audio.sizeBytes,
          waveform: JSON.stringify([...audio.waveform]),
          updated_at: Date.now(),
        };
        // Not waited for: the platform call does not wait for a record (this cost a whole commit and disk
        // flush per message before the send). It goes into the outcome batch ahead of the message's
        // outcome, so on SQLite (one connection, batches in order) it commits before or with it.
        void outcomeBatchOf(store)
          .run((trx) => saveAudio(trx, row))
          .catch((err: unknown) => logger.warn({ err, message_id: message.id }, 'could not record the audio of a message'));
      } catch (err) {
        logger.warn({ err, message_id: message.id }, 'could not record the audio of a message');
      }
    },
  };
}
