import { escapeHtml, raw, type Html } from './html.js';

export interface DaySeries {
  sent: number;
  delivered: number;
  failed: number;
}

const SERIES: (keyof DaySeries)[] = ['sent', 'delivered', 'failed'];
const DAY_MS = 86_400_000;
const PLOT_HEIGHT = 120;
const LEFT = 44;
const BOTTOM = 22;
const TOP = 8;
const DAY_WIDTH = 24;
const BAR_WIDTH = 7;

const dayLabel = (ms: number): string => new Date(ms).toISOString().slice(5, 10);

/** A scale top that reads well: 1, 2, 5, 10, 20, 50… at least the largest value. */
function niceMax(value: number): number {
  if (value <= 1) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

/**
 * Sent, delivered and failed per day as grouped bars, in inline SVG (no script, no library). Colours
 * come from the stylesheet's classes; every bar has a <title> so pointer users can read exact counts,
 * and the page puts the same numbers in a table for everyone else.
 */
export function dailyBarChart(input: { title: string; periodStart: number; days: DaySeries[] }): Html {
  const count = input.days.length;
  const width = LEFT + count * DAY_WIDTH + 8;
  const height = TOP + PLOT_HEIGHT + BOTTOM;
  const top = niceMax(Math.max(0, ...input.days.map((d) => d.sent)));
  const y = (value: number): number => TOP + PLOT_HEIGHT - (value / top) * PLOT_HEIGHT;
  const parts: string[] = [];
  for (const tick of [0, top / 2, top]) {
    if (tick !== Math.round(tick) && tick !== 0) continue;
    parts.push(`<line class="grid" x1="${LEFT}" x2="${width - 4}" y1="${y(tick)}" y2="${y(tick)}"/>`);
    parts.push(`<text class="axis" x="${LEFT - 4}" y="${y(tick) + 4}" text-anchor="end">${tick.toLocaleString('en-US')}</text>`);
  }
  input.days.forEach((day, i) => {
    const x0 = LEFT + i * DAY_WIDTH + 2;
    const date = dayLabel(input.periodStart + i * DAY_MS);
    SERIES.forEach((series, j) => {
      const value = day[series];
      if (value === 0) return;
      const h = Math.max(1, (value / top) * PLOT_HEIGHT);
      parts.push(
        `<rect class="bar-${series}" x="${x0 + j * BAR_WIDTH}" y="${TOP + PLOT_HEIGHT - h}" width="${BAR_WIDTH - 0.5}" height="${h}"><title>${date}: ${value} ${series}</title></rect>`,
      );
    });
    if (i % 7 === 0) parts.push(`<text class="axis" x="${x0}" y="${height - 6}">${date}</text>`);
  });
  const title = escapeHtml(input.title);
  return raw(
    `<svg class="chart" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${title}" xmlns="http://www.w3.org/2000/svg"><title>${title}</title>${parts.join('')}</svg>`,
  );
}
