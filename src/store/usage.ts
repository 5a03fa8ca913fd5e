import { sql, type Kysely } from 'kysely';
import type { Platform } from '../core/send-rules.js';
import type { Database, UsagePeriodsTable } from './schema.js';

export type UsageRow = UsagePeriodsTable;

export interface UsageScope {
  accountId: string;
  env: string;
  periodStart: number;
}

const emptyRow = (scope: UsageScope): UsageRow => ({
  account_id: scope.accountId,
  env: scope.env,
  period_start: scope.periodStart,
  sent: 0,
  delivered: 0,
  failed: 0,
  linkedin: 0,
  telegram: 0,
  whatsapp: 0,
});

export async function readUsage(db: Kysely<Database>, scope: UsageScope): Promise<UsageRow> {
  const row = await db
    .selectFrom('usage_periods')
    .selectAll()
    .where('account_id', '=', scope.accountId)
    .where('env', '=', scope.env)
    .where('period_start', '=', scope.periodStart)
    .executeTakeFirst();
  return row ?? emptyRow(scope);
}

/**
 * Counts one accepted send against the quota in one atomic statement: an upsert whose update only
 * applies while `sent < quota`, so two concurrent sends can never both take the last unit, and the
 * row lock is held for as short a time as possible. Returns the new `sent` count, or null when the
 * quota is used up.
 */
export async function reserveSend(db: Kysely<Database>, scope: UsageScope, platform: Platform, quota: number): Promise<number | null> {
  if (quota < 1) return null;
  const row = await db
    .insertInto('usage_periods')
    .values({ ...emptyRow(scope), sent: 1, [platform]: 1 })
    .onConflict((oc) =>
      oc
        .columns(['account_id', 'env', 'period_start'])
        .doUpdateSet((eb) => ({ sent: eb('usage_periods.sent', '+', 1), [platform]: eb(sql.ref(`usage_periods.${platform}`), '+', 1) }))
        .where('usage_periods.sent', '<', quota),
    )
    .returning('sent')
    .executeTakeFirst();
  return row ? Number(row.sent) : null;
}

export async function recordOutcome(db: Kysely<Database>, scope: UsageScope, outcome: 'delivered' | 'failed'): Promise<void> {
  await db
    .updateTable('usage_periods')
    .set((eb) => ({ [outcome]: eb(sql.ref(outcome), '+', 1) }))
    .where('account_id', '=', scope.accountId)
    .where('env', '=', scope.env)
    .where('period_start', '=', scope.periodStart)
    .execute();
}
