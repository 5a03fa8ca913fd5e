/** Plans, their limits, and the monthly billing period (docs/api.md, "Limits"). */
export const PLAN_NAMES = ['starter', 'growth', 'scale', 'enterprise'] as const;
export type PlanName = (typeof PLAN_NAMES)[number];

export interface PlanLimits {
  /** POST /send and POST /whatsapp/sessions, per key per minute. */
  sendPerMinute: number;
  monthlyQuota: number;
}

// Enterprise limits are set per account (`accounts set-plan --rate-limit --quota`); these apply until then.
const PLAN_LIMITS: Record<PlanName, PlanLimits> = {
  starter: { sendPerMinute: 100, monthlyQuota: 500 },
  growth: { sendPerMinute: 500, monthlyQuota: 2_000 },
  scale: { sendPerMinute: 2_000, monthlyQuota: 10_000 },
  enterprise: { sendPerMinute: 5_000, monthlyQuota: 50_000 },
};

/** Every other authenticated endpoint shares this bucket, per key per minute. */
export const READ_REQUESTS_PER_MINUTE = 1_000;
/** Requests without a valid key, per client IP per minute: a brute-force guard. */
export const UNAUTHENTICATED_REQUESTS_PER_MINUTE = 300;
export const RATE_WINDOW_SECONDS = 60;

export const isPlanName = (value: string): value is PlanName => (PLAN_NAMES as readonly string[]).includes(value);

export function limitsFor(plan: PlanName, overrides: { rateLimit: number | null; quota: number | null }): PlanLimits {
  const base = PLAN_LIMITS[plan];
  return {
    sendPerMinute: overrides.rateLimit ?? base.sendPerMinute,
    monthlyQuota: overrides.quota ?? base.monthlyQuota,
  };
}

function anchoredMonthStart(year: number, month: number, day: number): Date {
  // A period anchored on the 31st starts on the last day of shorter months.
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  return new Date(Date.UTC(year, month, Math.min(day, lastDay)));
}

/**
 * The billing period containing `now`: monthly from the account's creation day (UTC midnight).
 * `end` is exclusive: it is the next period's start.
 */
export function billingPeriod(accountCreatedAt: Date, now: Date): { start: Date; end: Date } {
  const day = accountCreatedAt.getUTCDate();
  let year = now.getUTCFullYear();
  let month = now.getUTCMonth();
  let start = anchoredMonthStart(year, month, day);
  if (start.getTime() > now.getTime()) {
    month -= 1;
    if (month < 0) {
      month = 11;
      year -= 1;
    }
    start = anchoredMonthStart(year, month, day);
  }
  const end = month === 11 ? anchoredMonthStart(year + 1, 0, day) : anchoredMonthStart(year, month + 1, day);
  return { start, end };
}

/**
 * Active API keys per account and environment, at most: keys neither revoked nor expired, a key rolled
 * and still working until its expiry included. Rate limits are per key, so without a cap an account
 * multiplied its own limit by creating keys (a starter account with 50 keys sent 5,000 a minute). Ten
 * is room for a key per service or developer and a roll of each.
 */
export const MAX_ACTIVE_KEYS = 10;

/**
 * Live WhatsApp sessions per account that are linking or linked (`qr_pending`, `connected`), at most,
 * by plan: each holds a socket to WhatsApp in the process that serves it.
 */
export const WHATSAPP_SESSIONS_BY_PLAN: Record<PlanName, number> = {
  starter: 5,
  growth: 20,
  scale: 50,
  enterprise: 100,
};
/** Sandbox sessions hold no socket: one cap for every plan, the largest plan's, so rows cannot pile up without end. */
export const SANDBOX_WHATSAPP_SESSIONS = 100;
