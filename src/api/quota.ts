import { ApiError } from './errors.js';
import { iso } from './views.js';

/** 402 quota_exceeded: what a send over the monthly quota answers, and what its dry run reports. */
export const quotaExceeded = (monthlyQuota: number, periodEnd: number): ApiError =>
  new ApiError('quota_exceeded', `the monthly quota of ${monthlyQuota} voice notes is used up; it renews at ${iso(periodEnd)}`, {
    monthly_quota: monthlyQuota,
    period_end: iso(periodEnd),
  });
