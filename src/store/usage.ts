import { sql, type Kysely } from 'kysely';
import type { Database, UsagePeriodsTable } from './schema.js';

export interface UsageRow extends UsagePeriodsTable {
  /** Sends by platform name; a platform with no send this period is absent. */
  byPlatform: Record<string, number>;
}

export interface UsageScope {
  accountId: string;
  env: string;
  periodStart: number;
}

const scopeValues = (scope: UsageScope) => ({ account_id: scope.accountId, env: scope.env, period_start: scope.periodStart });

export async function readUsage(db: Kysely<Database>, scope: UsageScope): Promise<UsageRow> {
  const row = await db
    .selectFrom('usage_periods')
    .select(['sent', 'delivered', 'failed'])
    .where('account_id', '=', scope.accountId)
    .where('env', '=', scope.env)
    .where('period_start', '=', scope.periodStart)
    .executeTakeFirst();
  const platforms = await db
    .selectFrom('usage_by_platform')
    .select(['platform', 'sent'])
    .where('account_id', '=', scope.accountId)
    .where('env', '=', scope.env)
    .where('period_start', '=', scope.periodStart)
    .execute();
  return {
    ...scopeValues(scope),
    sent: Number(row?.sent ?? 0),
    delivered: Number(row?.delivered ?? 0),
    failed: Number(row?.failed ?? 0),
    byPlatform: Object.fromEntries(platforms.map((p) => [p.platform, Number(p.sent)])),
  };
}

/** Sends counted this period (one small read, for the quota headers of every request). */
export async function readSent(db: Kysely<Database>, scope: UsageScope): Promise<number> {
  const row = await db
    .selectFrom('usage_periods')
    .select('sent')
    .where('account_id', '=', scope.accountId)
    .where('env', '=', scope.env)
    .where('period_start', '=', scope.periodStart)
    .executeTakeFirst();
  return Number(row?.sent ?? 0);
}

/**
 * Counts one accepted send against the quota: an upsert whose update only applies while `sent < quota`,
 * so two concurrent sends can never both take the last unit; then the platform's own row. Run it inside
 * the send's transaction (the period row stays locked to its end, which serialises the platform upsert).
 * Returns the new `sent` count, or null when the quota is used up.
 */
export async function reserveSend(db: Kysely<Database>, scope: UsageScope, platform: string, quota: number): Promise<number | null> {
  if (quota < 1) return null;
  const row = await db
    .insertInto('usage_periods')
    .values({ ...scopeValues(scope), sent: 1, delivered: 0, failed: 0 })
    .onConflict((oc) =>
      oc
        .columns(['account_id', 'env', 'period_start'])
        .doUpdateSet((eb) => ({ sent: eb('usage_periods.sent', '+', 1) }))
        .where('usage_periods.sent', '<', quota),
    )
    .returning('sent')
    .executeTakeFirst();
  if (!row) return null;
  await db
    .insertInto('usage_by_platform')
    .values({ ...scopeValues(scope), platform, sent: 1 })
    .onConflict((oc) => oc.columns(['account_id', 'env', 'period_start', 'platform']).doUpdateSet((eb) => ({ sent: eb('usage_by_platform.sent', '+', 1) })))
    .execute();
  return Number(row.sent);
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
