import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../store/schema.js';

const DAY_MS = 86_400_000;
/** Small batches: each is one short transaction, so sends and claims are never held up for long. */
export const RETENTION_BATCH = 500;
const PAUSE_BETWEEN_BATCHES_MS = 50;
const FIRST_RUN_DELAY_MS = 5_000;
const RUN_EVERY_MS = 60 * 60_000;

/** Final statuses: a message in any other one is still the queue's and is never deleted. */
const SETTLED = ['delivered', 'failed', 'canceled'] as const;

/** Rows that describe one message and go with it (the message log's attempts, audio facts and receipts). */
const MESSAGE_DETAIL_TABLES = ['message_attempts', 'message_audio', 'message_receipts'] as const;

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

export interface Retention {
  stop(): Promise<void>;
}

/**
 * The worker process's retention housekeeping: a first purge a few seconds after start, then one
 * an hour. Several workers may run it at once: each batch deletes only rows still there.
 */
export function startRetention(db: Kysely<Database>, days: number, logger: Logger, timing: { firstRunMs?: number; everyMs?: number } = {}): Retention {
  if (days <= 0) return { stop: async () => undefined };
  let stopped = false;
  let running: Promise<void> | undefined;
  const run = (): void => {
    if (stopped || running) return;
    running = purgeOldMessages(db, { days, shouldStop: () => stopped })
      .then(
        (purged) => {
          if (purged > 0) logger.info({ purged, retention_days: days }, 'deleted settled messages past retention');
        },
        (err: unknown) => logger.warn({ err }, 'message retention purge failed; retried at the next run'),
      )
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
