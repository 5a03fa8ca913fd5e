import { sql, type Kysely } from 'kysely';
import { DAY_MS, utcDay } from '../core/rhythm.js';
import type { Database } from './schema.js';
import { newSenderRecord } from './sender-record.js';

/**
 * Live recipient checks (POST /recipients/check) per sender and UTC day: each asks the platform as the
 * sender (a WhatsApp number lookup, a LinkedIn profile view, a Telegram getChat), and bulk lookups are a
 * known trigger of bans, so a sender has a daily budget of them, counted on its record.
 */

export const RECIPIENT_CHECK_DAILY_BUDGET = 50;

export interface CheckingSender {
  accountId: string;
  env: string;
  platform: string;
  senderKey: string;
  kind: string;
}

/**
 * Takes one of today's checks for the sender (its record made on first use), in one statement: of two
 * requests for the last one, one gets it. `resetsAt` when the budget is spent: the next UTC day.
 */
export async function takeRecipientCheck(db: Kysely<Database>, sender: CheckingSender, now = Date.now()): Promise<{ ok: true } | { ok: false; resetsAt: number }> {
  const day = utcDay(now);
  const taken = await db
    .insertInto('sender_records')
    .values({ ...newSenderRecord(sender, sender.kind, now), checks_day: day, checks_today: 1 })
    .onConflict((oc) =>
      oc
        .columns(['sender_key', 'platform', 'account_id', 'env'])
        .doUpdateSet({
          checks_today: sql<number>`case when sender_records.checks_day = excluded.checks_day then sender_records.checks_today + 1 else 1 end`,
          checks_day: sql<number>`excluded.checks_day`,
        })
        .where(sql<boolean>`(sender_records.checks_day is null or sender_records.checks_day <> excluded.checks_day or sender_records.checks_today < ${RECIPIENT_CHECK_DAILY_BUDGET})`),
    )
    .returning('id')
    .executeTakeFirst();
  return taken ? { ok: true } : { ok: false, resetsAt: day + DAY_MS };
}

/** The checks a sender record counts today (0 when its count is of an earlier day). */
export function checksToday(row: { checks_day?: number | null; checks_today?: number | null }, now = Date.now()): number {
  return row.checks_day != null && Number(row.checks_day) === utcDay(now) ? Number(row.checks_today ?? 0) : 0;
}
