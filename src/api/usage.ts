import type { FastifyInstance } from 'fastify';
import { readUsage } from '../store/usage.js';
import type { Services } from '../services.js';
import { usageScope } from './caller.js';
import { Usage, commonErrors } from './schemas.js';
import { iso } from './views.js';

export function registerUsageRoute(app: FastifyInstance, services: Services): void {
  app.get(
    '/usage',
    { schema: { summary: 'Usage in the current billing period', tags: ['usage'], response: { 200: Usage, ...commonErrors } } },
    async (request) => {
      const caller = request.caller!;
      const scope = usageScope(caller);
      const usage = await readUsage(services.db.kysely, scope);
      services.callers.noteSent(scope, Number(usage.sent));
      const quota = caller.limits.monthlyQuota;
      return {
        plan: caller.plan,
        period_start: iso(scope.periodStart),
        period_end: iso(scope.periodEnd),
        usage: {
          total_sent: Number(usage.sent),
          total_delivered: Number(usage.delivered),
          total_failed: Number(usage.failed),
          by_platform: Object.fromEntries(services.platforms.names.map((name) => [name, usage.byPlatform[name] ?? 0])),
        },
        limits: {
          monthly_quota: quota,
          remaining: Math.max(0, quota - Number(usage.sent)),
          rate_limit_per_minute: caller.limits.sendPerMinute,
        },
      };
    },
  );
}
