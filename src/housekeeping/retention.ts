import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../store/schema.js';
import { purgeSentMessagesBefore } from '../store/whatsapp-sent-messages.js';
import { purgeSenderDaysBefore } from '../store/rhythm.js';
import { SENDER_DAYS_KEEP_DAYS, utcDay } from '../core/rhythm.js';
import { RESEND_KEEP_DAYS, RESEND_KEEP_MS } from '../platforms/whatsapp/resend.js';

const DAY_MS = 86_400_000;
/** Small batches: each is one short transaction, so sends and claims are never held up for long. */
export const RETENTION_BATCH = 500;
const PAUSE_BETWEEN_BATCHES_MS = 50;
const FIRST_RUN_DELAY_MS = 5_000;
const RUN_EVERY_MS = 60 * 60_000;

/** Final statuses: a message in any other one is still the queue's and is never deleted. */
const SETTLED = ['delivered', 'failed', 'canceled'] as const;

/** Rows that describe one message and go with it (the message log's attempts, audio facts and receipts). */
const MESSAGE_DETAIL_TABLES = ['message_attempts', 'message_audio', 'message_receipts', 'message_replies'] as const;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Deletes settled messages created more than `days` days before `now`, with their attempts, audio
 * facts and receipts, in batches; returns how many messages went. Usage counters are rows of their
 * own (per billing period) and stay: the quota and the usage figures do not change.
 */
export async function purgeOldMessages(
  db: Kysely<Database>,
  options: { days: number; now?: number; batchSize?: number; pauseMs?: number; shouldStop?: () => boolean },
): Promise<number> {
  if (options.days <= 0) return 0;
  const cutoff = (options.now ?? Date.now()) - options.days * DAY_MS;
  const batchSize = options.batchSize ?? RETENTION_BATCH;
  let purged = 0;
  for (;;) {
    if (options.shouldStop?.()) return purged;
    const deleted = await db.transaction().execute(async (trx) => {
      const ids = (
        await trx
          .selectFrom('messages')
          .select('id')
          .where('created_at', '<', cutoff)
          .where('status', 'in', [...SETTLED])
          .orderBy('created_at')
          .limit(batchSize)
          .execute()
      ).map((row) => row.id);
      if (ids.length === 0) return 0;
      for (const table of MESSAGE_DETAIL_TABLES) await trx.deleteFrom(table).where('message_id', 'in', ids).execute();
      // The status is checked again: nothing that is not settled is ever deleted, whatever happened since the select.
      const result = await trx.deleteFrom('messages').where('id', 'in', ids).where('status', 'in', [...SETTLED]).executeTakeFirst();
      return Number(result.numDeletedRows);
    });
    purged += deleted;
    if (deleted < batchSize) return purged;
    await sleep(options.pauseMs ?? PAUSE_BETWEEN_BATCHES_MS);
  }
}

/**
 * Deletes what live WhatsApp sessions keep of their sent voice notes for resend requests once it is
 * older than 14 days (whatever MESSAGE_RETENTION_DAYS says: that content holds the media key of the
 * uploaded audio, and nobody asks for a message again that late). Returns how many rows went.
 */
export async function purgeOldWhatsappSentMessages(
  db: Kysely<Database>,
  options: { now?: number; batchSize?: number; pauseMs?: number; shouldStop?: () => boolean } = {},
): Promise<number> {
  const cutoff = (options.now ?? Date.now()) - RESEND_KEEP_MS;
  return purgeSentMessagesBefore(db, cutoff, {
    batchSize: options.batchSize ?? RETENTION_BATCH,
    ...(options.shouldStop ? { shouldStop: options.shouldStop } : {}),
    pause: () => sleep(options.pauseMs ?? PAUSE_BETWEEN_BATCHES_MS),
  });
}

/**
 * Deletes senders' daily counts (`sender_days`, the daily caps' counting) of UTC days more than
 * SENDER_DAYS_KEEP_DAYS ago, whatever MESSAGE_RETENTION_DAYS says: nothing reads them any more. Returns
 * how many rows went.
 */
export async function purgeOldSenderDays(
  db: Kysely<Database>,
  options: { now?: number; pauseMs?: number; shouldStop?: () => boolean } = {},
): Promise<number> {
  const cutoffDay = utcDay(options.now ?? Date.now()) - SENDER_DAYS_KEEP_DAYS * DAY_MS;
  return purgeSenderDaysBefore(db, cutoffDay, {
    ...(options.shouldStop ? { shouldStop: options.shouldStop } : {}),
    pause: () => sleep(options.pauseMs ?? PAUSE_BETWEEN_BATCHES_MS),
  });
}

export interface Retention {
  stop(): Promise<void>;
}

/**
 * The worker process's retention housekeeping: a first purge a few seconds after start, then one
 * an hour. Several workers may run it at once: each batch deletes only rows still there. Settled
 * messages go after `days` (0 keeps them); what WhatsApp sessions keep for resend requests after 14 days,
 * and senders' daily counts after SENDER_DAYS_KEEP_DAYS, always.
 */
export function startRetention(db: Kysely<Database>, days: number, logger: Logger, timing: { firstRunMs?: number; everyMs?: number } = {}): Retention {
  let stopped = false;
  let running: Promise<void> | undefined;
  const purgeMessages = async (): Promise<void> => {
    if (days <= 0) return;
    await purgeOldMessages(db, { days, shouldStop: () => stopped }).then(
      (purged) => {
        if (purged > 0) logger.info({ purged, retention_days: days }, 'deleted settled messages past retention');
      },
      (err: unknown) => logger.warn({ err }, 'message retention purge failed; retried at the next run'),
    );
  };
  const purgeSent = (): Promise<void> =>
    purgeOldWhatsappSentMessages(db, { shouldStop: () => stopped }).then(
      (purged) => {
        if (purged > 0) logger.info({ purged, retention_days: RESEND_KEEP_DAYS }, 'deleted WhatsApp sent-message copies kept for resend requests');
      },
      (err: unknown) => logger.warn({ err }, 'WhatsApp sent-message retention failed; retried at the next run'),
    );
  const purgeSenderDays = (): Promise<void> =>
    purgeOldSenderDays(db, { shouldStop: () => stopped }).then(
      (purged) => {
        if (purged > 0) logger.info({ purged, retention_days: SENDER_DAYS_KEEP_DAYS }, "deleted senders' daily counts of past days");
      },
      (err: unknown) => logger.warn({ err }, "senders' daily counts retention failed; retried at the next run"),
    );
  const run = (): void => {
    if (stopped || running) return;
    running = purgeMessages()
      .then(purgeSent)
      .then(purgeSenderDays)
      .finally(() => {
        running = undefined;
      });
  };
  const first = setTimeout(run, timing.firstRunMs ?? FIRST_RUN_DELAY_MS);
  const every = setInterval(run, timing.everyMs ?? RUN_EVERY_MS);
  first.unref();
  every.unref();
  return {
    async stop() {
      stopped = true;
      clearTimeout(first);
      clearInterval(every);
      await running;
    },
  };
}
