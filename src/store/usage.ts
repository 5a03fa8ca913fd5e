import type { Kysely } from 'kysely';
import { FixedStatement } from './fixed-statement.js';
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

// One of these runs for every settled message: written out once (fixed-statement.ts).
// On PostgreSQL, the counts of an outcome batch are one statement (statement-batch.ts), run last before
// its commit: every batch of the account counts on the same row, and holds its lock until it commits.
const countOutcome = (column: 'delivered' | 'failed') =>
  new FixedStatement(`update usage_periods set ${column} = ${column} + 1 where account_id = ? and env = ? and period_start = ?`, {
    text: `update usage_periods as u set ${column} = u.${column} + v.n
      from (select a, e, p, count(*) as n from unnest($1::text[], $2::text[], $3::bigint[]) as x(a, e, p) group by a, e, p) as v
      where u.account_id = v.a and u.env = v.e and u.period_start = v.p`,
    arrays: [[0, 'text[]'], [1, 'text[]'], [2, 'bigint[]']],
    perCall: 'none',
    atEnd: true,
  });
const COUNT_OUTCOME = { delivered: countOutcome('delivered'), failed: countOutcome('failed') };

export async function recordOutcome(db: Kysely<Database>, scope: UsageScope, outcome: 'delivered' | 'failed'): Promise<void> {
  await COUNT_OUTCOME[outcome].execute(db, [scope.accountId, scope.env, scope.periodStart]);
}
