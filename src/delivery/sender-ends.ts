import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../store/schema.js';
import { findEndedHolds, setSenderStatus } from '../store/senders.js';

/** How often a worker's process looks for rests and locks that have ended. */
export const SENDER_END_WATCH_MS = 5_000;

/**
 * Writes the end of a sender's rest or lock once its `until` has passed, with its `sender.updated`
 * event, even when none of its notes is waiting (a waiting note's claim writes it too: sender-gate.ts).
 * Compare-and-set: of several processes, one writes each end.
 */
export function startSenderEndWatch(db: Kysely<Database>, logger: Logger, everyMs = SENDER_END_WATCH_MS): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const look = async (): Promise<void> => {
    const now = Date.now();
    for (const row of await findEndedHolds(db, now)) {
      const ref = { accountId: row.account_id, env: row.env, platform: row.platform, senderKey: row.sender_key };
      await setSenderStatus(db, ref, { status: 'ok', reason: null, until: null }, { endedBy: now });
    }
  };
  const timer = setInterval(() => {
    running ??= look()
      .catch((err: unknown) => logger.warn({ err }, "could not write the end of senders' rests"))
      .finally(() => (running = undefined));
  }, everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
