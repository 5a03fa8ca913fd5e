import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';

export interface DailyCount {
  /** Day number within the period: 0 is the period's first day (UTC). */
  day: number;
  platform: string;
  sent: number;
  delivered: number;
  failed: number;
}

const DAY_MS = 86_400_000;

/**
 * Voice notes of (account, environment) created in [from, to), counted per day and platform: how many
 * were accepted, and how many of those are now delivered or failed. Read from the messages themselves
 * (the usage counters only keep period totals).
 */
export async function dailyCounts(db: Kysely<Database>, owner: { accountId: string; env: string }, from: number, to: number): Promise<DailyCount[]> {
  // Integer division on both dialects: BIGINT / BIGINT in PostgreSQL, INTEGER / INTEGER in SQLite. The
  // numbers are inlined (they are ours, not input) so GROUP BY repeats the very same expression.
  const day = sql<number>`(created_at - ${sql.lit(Math.trunc(from))}) / ${sql.lit(DAY_MS)}`;
  const rows = await db
    .selectFrom('messages')
    .select([
      day.as('day'),
      'platform',
      (eb) => eb.fn.countAll<number>().as('sent'),
      sql<number>`sum(case when status = 'delivered' then 1 else 0 end)`.as('delivered'),
      sql<number>`sum(case when status = 'failed' then 1 else 0 end)`.as('failed'),
    ])
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    // A canceled note was given back to the quota: it is not counted as sent (as in usage.total_sent).
    .where('status', '<>', 'canceled')
    .where('created_at', '>=', from)
    .where('created_at', '<', to)
    .groupBy([day, 'platform'])
    .execute();
  return rows.map((r) => ({ day: Number(r.day), platform: r.platform, sent: Number(r.sent), delivered: Number(r.delivered), failed: Number(r.failed) }));
}
