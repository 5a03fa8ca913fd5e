import type { FastifyInstance } from 'fastify';
import { billingPeriod, isPlanName, limitsFor } from '../../core/plans.js';
import { PLATFORM_NAMES as PLATFORMS } from '../../platforms/registry.js';
import { dailyCounts } from '../../store/daily-usage.js';
import { readUsage, type UsageRow } from '../../store/usage.js';
import { dailyBarChart, type DaySeries } from '../chart.js';
import { ctxOf, type DashboardDeps } from '../deps.js';
import { count, html, timeCell, type Html } from '../html.js';
import { platformLabel } from '../labels.js';
import { page, sendPage } from '../layout.js';

const DAY_MS = 86_400_000;

function envCard(label: string, env: string, usage: UsageRow, quota: number, current: boolean): Html {
  const sent = Number(usage.sent);
  const remaining = Math.max(0, quota - sent);
  return html`<section class="card${current ? ' card-current' : ''}" aria-labelledby="usage-${env}" data-env="${env}">
<h2 id="usage-${env}">${label}</h2>
<p class="big"><span data-usage="sent">${count(sent)}</span> of <span data-usage="quota">${count(quota)}</span> voice notes</p>
<meter min="0" max="${quota}" value="${Math.min(sent, quota)}" low="${Math.floor(quota * 0.8)}" high="${Math.floor(quota * 0.95)}" optimum="0" aria-label="${label}: ${count(sent)} of ${count(quota)} used">${count(sent)} of ${count(quota)}</meter>
<dl class="facts">
<dt>Remaining</dt><dd data-usage="remaining">${count(remaining)}</dd>
<dt>Delivered</dt><dd data-usage="delivered">${count(Number(usage.delivered))}</dd>
<dt>Failed</dt><dd data-usage="failed">${count(Number(usage.failed))}</dd>
${PLATFORMS.map((p) => html`<dt>${platformLabel(p)}</dt><dd data-usage="${p}">${count(usage.byPlatform[p] ?? 0)}</dd>`)}
</dl>
</section>`;
}

export function registerUsagePage(app: FastifyInstance, deps: DashboardDeps): void {
  const db = deps.services.db.kysely;

  app.get('/usage', async (request, reply) => {
    const ctx = ctxOf(request);
    const account = ctx.account;
    const now = Date.now();
    const plan = isPlanName(account.plan) ? account.plan : 'starter';
    const limits = limitsFor(plan, { rateLimit: account.rate_limit, quota: account.quota });
    const period = billingPeriod(new Date(Number(account.created_at)), new Date(now));
    const start = period.start.getTime();
    const end = period.end.getTime();
    const [test, live, counts] = await Promise.all([
      readUsage(db, { accountId: account.id, env: 'test', periodStart: start }),
      readUsage(db, { accountId: account.id, env: 'live', periodStart: start }),
      dailyCounts(db, { accountId: account.id, env: ctx.env }, start, end),
    ]);

    const dayCount = Math.round((end - start) / DAY_MS);
    const byPlatform = new Map<string, DaySeries[]>(
      PLATFORMS.map((p) => [p, Array.from({ length: dayCount }, () => ({ sent: 0, delivered: 0, failed: 0 }))]),
    );
    for (const c of counts) {
      const day = byPlatform.get(c.platform)?.[c.day];
      if (!day) continue;
      day.sent += c.sent;
      day.delivered += c.delivered;
      day.failed += c.failed;
    }
    const envLabel = ctx.env === 'test' ? 'test' : 'live';
    const charts = PLATFORMS.map((platform) => {
      const days = byPlatform.get(platform)!;
      const activeDays = days.map((d, i) => ({ ...d, i })).filter((d) => d.sent > 0);
      return html`<figure class="chart-figure" data-platform="${platform}">
<figcaption>${platformLabel(platform)}</figcaption>
${dailyBarChart({ title: `${platformLabel(platform)}, ${envLabel}: sent, delivered and failed per day`, periodStart: start, days })}
<details><summary>${platformLabel(platform)} per day as a table</summary>
${
  activeDays.length === 0
    ? html`<p>No voice notes on ${platformLabel(platform)} this period.</p>`
    : html`<table><thead><tr><th scope="col">Day (UTC)</th><th scope="col">Sent</th><th scope="col">Delivered</th><th scope="col">Failed</th></tr></thead>
<tbody>${activeDays.map((d) => html`<tr><th scope="row">${new Date(start + d.i * DAY_MS).toISOString().slice(0, 10)}</th><td>${count(d.sent)}</td><td>${count(d.delivered)}</td><td>${count(d.failed)}</td></tr>`)}</tbody></table>`
}
</details>
</figure>`;
    });

    return sendPage(
      reply,
      page(
        ctx,
        { sections: deps.sections, section: 'usage', title: 'Usage', path: '/dashboard/usage' },
        html`<p>Plan <strong>${plan}</strong>, billing period ${timeCell(start)} to ${timeCell(end)}. Sandbox and live voice notes count apart, each against the monthly quota of ${count(limits.monthlyQuota)}; sends are limited to ${count(limits.sendPerMinute)} per minute per key.</p>
<div class="cards">
${envCard('Test (sandbox)', 'test', test, limits.monthlyQuota, ctx.env === 'test')}
${envCard('Live', 'live', live, limits.monthlyQuota, ctx.env === 'live')}
</div>
<section aria-labelledby="per-day">
<h2 id="per-day">Per day and platform (${envLabel})</h2>
<p class="legend"><span class="swatch swatch-sent"></span> sent <span class="swatch swatch-delivered"></span> delivered <span class="swatch swatch-failed"></span> failed — counted by the day each voice note was accepted; delivered and failed as they stand now.</p>
<div class="charts">${charts}</div>
</section>`,
      ),
    );
  });
}
