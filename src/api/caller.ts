import type { KeyEnv } from '../core/ids.js';
import { billingPeriod, isPlanName, limitsFor, type PlanLimits, type PlanName } from '../core/plans.js';
import type { AccountRow } from '../store/accounts.js';
import type { KeyRow } from '../store/keys.js';
import { readSent, type UsageScope } from '../store/usage.js';
import type { Db } from '../store/db.js';

/** Who is calling, resolved from the API key: the owner of every resource the request touches. */
export interface Caller {
  keyId: string;
  accountId: string;
  env: KeyEnv;
  plan: PlanName;
  limits: PlanLimits;
  accountCreatedAt: number;
}

export function callerOf(key: KeyRow, account: AccountRow): Caller {
  const plan = isPlanName(account.plan) ? account.plan : 'starter';
  return {
    keyId: key.id,
    accountId: account.id,
    env: key.env === 'live' ? 'live' : 'test',
    plan,
    limits: limitsFor(plan, { rateLimit: account.rate_limit, quota: account.quota }),
    accountCreatedAt: Number(account.created_at),
  };
}

export function usageScope(caller: Caller, now = Date.now()): UsageScope & { periodEnd: number } {
  const period = billingPeriod(new Date(caller.accountCreatedAt), new Date(now));
  return { accountId: caller.accountId, env: caller.env, periodStart: period.start.getTime(), periodEnd: period.end.getTime() };
}

export interface UsageSnapshot {
  limit: number;
  remaining: number;
}

export async function usageSnapshot(db: Db, caller: Caller, now = Date.now()): Promise<UsageSnapshot> {
  const sent = await readSent(db.kysely, usageScope(caller, now));
  return { limit: caller.limits.monthlyQuota, remaining: Math.max(0, caller.limits.monthlyQuota - sent) };
}
