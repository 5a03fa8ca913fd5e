import type { Kysely } from 'kysely';
import { normalWindow, WEEKDAYS, type SendWindow, type Weekday } from '../core/send-window.js';
import { dbNow } from './dialect.js';
import type { Database, SendWindowsTable } from './schema.js';

/** An account's send windows (migration 030, docs/sending.md "Send windows"): none is the default. */

const windowOf = (row: SendWindowsTable): SendWindow => ({
  days: row.days.split(',').filter((d): d is Weekday => (WEEKDAYS as readonly string[]).includes(d)),
  start: row.start_time,
  end: row.end_time,
  time_zone: row.time_zone,
});

/** The account's window on the platform; null: none (notes go at any hour). */
export async function findSendWindow(db: Kysely<Database>, accountId: string, platform: string): Promise<SendWindow | null> {
  const row = await db.selectFrom('send_windows').selectAll().where('account_id', '=', accountId).where('platform', '=', platform).executeTakeFirst();
  return row ? windowOf(row) : null;
}

/**
 * How long POST /send trusts a window it read (its one read on the accept path otherwise). A change made
 * in this process is seen at once; one made by another process (the CLI) within this long, and the
 * worker weighs every note against the window in force when it delivers, so none goes outside it.
 */
const ACCEPT_CACHE_MS = 1_000;
const acceptCache = new WeakMap<Kysely<Database>, Map<string, { window: SendWindow | null; until: number }>>();

/** findSendWindow for the accept path: the same answer, read at most once a second per account and platform. */
export async function findSendWindowCached(db: Kysely<Database>, accountId: string, platform: string, now = Date.now()): Promise<SendWindow | null> {
  let byKey = acceptCache.get(db);
  if (!byKey) acceptCache.set(db, (byKey = new Map()));
  const key = sendWindowKey(accountId, platform);
  const kept = byKey.get(key);
  if (kept && kept.until > now) return kept.window;
  const window = await findSendWindow(db, accountId, platform);
  // Bounded: a busy process forgets what it read rather than keeping every account it ever saw.
  if (byKey.size >= 10_000) byKey.clear();
  byKey.set(key, { window, until: now + ACCEPT_CACHE_MS });
  return window;
}

/** The key of an account's window on a platform in findSendWindows' answer. */
export const sendWindowKey = (accountId: string, platform: string): string => `${accountId}\n${platform}`;

/** The windows of several accounts at once (one statement: what one claim of the worker needs), by sendWindowKey; an absent key has none. */
export async function findSendWindows(db: Kysely<Database>, accountIds: readonly string[]): Promise<Map<string, SendWindow>> {
  const found = new Map<string, SendWindow>();
  const accounts = [...new Set(accountIds)];
  if (accounts.length === 0) return found;
  const rows = await db.selectFrom('send_windows').selectAll().where('account_id', 'in', accounts).execute();
  for (const row of rows) found.set(sendWindowKey(row.account_id, row.platform), windowOf(row));
  return found;
}

/**
 * Stores the account's window on the platform (null: none), and makes the notes that waited for the old
 * one due now, so that each is weighed against the new window at once (a worker puts those still outside
 * it back to wait for its opening).
 */
export async function saveSendWindow(db: Kysely<Database>, accountId: string, platform: string, window: SendWindow | null, now = Date.now()): Promise<void> {
  await db.transaction().execute(async (trx) => {
    if (window === null) {
      await trx.deleteFrom('send_windows').where('account_id', '=', accountId).where('platform', '=', platform).execute();
    } else {
      const w = normalWindow(window);
      const values = { days: w.days.join(','), start_time: w.start, end_time: w.end, time_zone: w.time_zone, updated_at: now };
      await trx
        .insertInto('send_windows')
        .values({ account_id: accountId, platform, ...values })
        .onConflict((oc) => oc.columns(['account_id', 'platform']).doUpdateSet(values))
        .execute();
    }
    const dbTime = dbNow(trx);
    await trx
      .updateTable('messages')
      .set({ next_attempt_at: dbTime })
      .where('account_id', '=', accountId)
      .where('platform', '=', platform)
      .where('status', '=', 'queued')
      .where('wait_reason', '=', 'send_window')
      .where('next_attempt_at', '>', dbTime)
      .execute();
  });
  // Once committed: a send accepted in this process from now on reads the new window.
  acceptCache.get(db)?.delete(sendWindowKey(accountId, platform));
}
