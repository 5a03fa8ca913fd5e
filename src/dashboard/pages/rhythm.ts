import type { FastifyInstance } from 'fastify';
import { MAX_DAILY_CAP, MAX_WARMUP_DAYS } from '../../core/rhythm.js';
import { PLATFORM_NAMES } from '../../platforms/registry.js';
import { parseWindowText, windowText } from '../../core/send-window.js';
import { findRhythm, saveRhythm } from '../../store/rhythm.js';
import { saveSendWindow } from '../../store/send-windows.js';
import { applyRhythmChange, rhythmView, type RhythmChange, type RhythmView } from '../../store/rhythm-view.js';
import type { DashboardContext } from '../context.js';
import { ctxOf, field, redirectTo, type DashboardDeps } from '../deps.js';
import { html } from '../html.js';
import { platformLabel, senderKindLabel } from '../labels.js';
import { page, sendPage, type Notice } from '../layout.js';

const NOTICES: Record<string, Notice> = {
  saved: { kind: 'ok', text: 'Saved. It applies to the next live notes.' },
  window_saved: { kind: 'ok', text: 'Saved. Notes waiting for the old window are weighed against the new one now.' },
};

/** One rhythm in words: "At most 15 notes per sender and UTC day, a new sender starting at 5 a day, …". */
const rhythmText = (r: { daily_cap: number | null; warmup: { start: number; days: number } | null }): string =>
  `${r.daily_cap !== null ? `At most ${r.daily_cap} notes per sender and UTC day` : 'No daily cap'}${
    r.warmup ? `, a new sender starting at ${r.warmup.start} a day, rising to the cap over ${r.warmup.days} days` : ''
  }`;

function platformSection(ctx: DashboardContext, view: RhythmView) {
  const p = view.platform;
  const capped = view.daily_cap !== null;
  // Each kind of sender with the rhythm in force for it: the defaults differ by kind (Telegram bots, linked accounts).
  return html`<section class="card" aria-labelledby="rhythm-${p}" data-platform="${p}">
<h2 id="rhythm-${p}">${platformLabel(p)}</h2>
<p data-field="summary">${view.source === 'default' ? 'The default' : 'Set for this account'}:</p>
<ul data-field="applies_to">${view.applies_to.map((k) => html`<li data-kind="${k.kind}">${senderKindLabel(k.kind)}: ${rhythmText(k)}.</li>`)}</ul>
${
  view.senders.length === 0
    ? html`<p class="hint">No live sender on ${platformLabel(p)} yet.</p>`
    : html`<ul>${view.senders.map(
        (s) => html`<li><code>${s.sender}</code>: ${s.sent_today} today${s.allowed_today === null ? '' : ` of ${s.allowed_today}`} (first seen ${s.first_day})</li>`,
      )}</ul>`
}
<form method="post" action="/dashboard/rhythm" class="stack">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<input type="hidden" name="platform" value="${p}">
<label for="cap-${p}">Daily cap per sender (empty: no cap)</label>
<input id="cap-${p}" name="daily_cap" type="number" min="1" max="${MAX_DAILY_CAP}" value="${capped ? String(view.daily_cap) : ''}">
<label for="warmup-start-${p}">Warm-up: notes on a new sender's first day (empty: no warm-up)</label>
<input id="warmup-start-${p}" name="warmup_start" type="number" min="1" value="${view.warmup ? String(view.warmup.start) : ''}">
<label for="warmup-days-${p}">Warm-up: days to reach the cap</label>
<input id="warmup-days-${p}" name="warmup_days" type="number" min="1" max="${MAX_WARMUP_DAYS}" value="${view.warmup ? String(view.warmup.days) : ''}">
<button type="submit">Save</button>
<button type="submit" name="defaults" value="1">Back to the defaults</button>
</form>
<p data-field="send_window">${view.send_window ? `Send window: ${windowText(view.send_window)}. Notes outside it wait for its opening.` : 'No send window: notes go at any hour.'}</p>
<form method="post" action="/dashboard/rhythm/window" class="stack">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<input type="hidden" name="platform" value="${p}">
<label for="window-${p}">Send window: days, hours and time zone (empty: none), e.g. mon-fri 09:00-18:00 Europe/Berlin</label>
<input id="window-${p}" name="window" type="text" value="${view.send_window ? windowText(view.send_window) : ''}">
<button type="submit">Save the window</button>
</form>
</section>`;
}

async function rhythmPage(deps: DashboardDeps, ctx: DashboardContext, notice?: Notice) {
  const defaults = deps.services.rhythmDefaults;
  const kindOf = (p: string) => deps.services.platforms.get(p)?.senderKind;
  const views = await Promise.all(
    PLATFORM_NAMES.map((p) => rhythmView(deps.services.db.kysely, ctx.account.id, p, { ...(defaults ? { defaults } : {}), ...(kindOf(p) ? { kindOf: kindOf(p)! } : {}) })),
  );
  return page(
    ctx,
    { sections: deps.sections, section: 'account', title: 'Sending rhythm', path: '/dashboard/rhythm', notice },
    html`<p>Each sender (a WhatsApp session, a LinkedIn cookie, a Telegram bot or linked account) sends at most its daily cap of live notes per UTC day; a note over it waits for the next day, it does not fail. A warm-up lets a new sender start low. Sandbox notes are not capped. A send window (live and sandbox notes alike) holds notes to the days and hours you choose, in your time zone and, when a send names it, the recipient's.</p>
<div class="cards">${views.map((view) => platformSection(ctx, view))}</div>`,
  );
}

const WHOLE = /^\d{1,9}$/;

/** The form as a change; a string when it cannot be one. */
function changeOf(body: unknown): RhythmChange | string {
  if (field(body, 'defaults') === '1') return { defaults: true };
  const cap = field(body, 'daily_cap').trim();
  const start = field(body, 'warmup_start').trim();
  const days = field(body, 'warmup_days').trim();
  if (cap !== '' && !WHOLE.test(cap)) return 'The daily cap must be a whole number.';
  if ((start === '') !== (days === '')) return 'A warm-up needs both its first day’s notes and its days.';
  if (start !== '' && (!WHOLE.test(start) || !WHOLE.test(days) || Number(start) < 1 || Number(days) < 1 || Number(days) > MAX_WARMUP_DAYS)) {
    return `The warm-up takes whole numbers: at least 1 note, 1 to ${MAX_WARMUP_DAYS} days.`;
  }
  return { dailyCap: cap === '' ? null : Number(cap), warmup: start === '' || cap === '' ? null : { start: Number(start), days: Number(days) } };
}

/** The dashboard's "Sending rhythm" page: each sender's daily cap and warm-up, per platform (live sends). */
export function registerRhythmPages(app: FastifyInstance, deps: DashboardDeps): void {
  const db = deps.services.db.kysely;

  app.get('/rhythm', async (request, reply) => {
    const code = (request.query as Record<string, string>).notice ?? '';
    return sendPage(reply, await rhythmPage(deps, ctxOf(request), NOTICES[code]));
  });

  app.post('/rhythm', async (request, reply) => {
    const ctx = ctxOf(request);
    const refuse = async (text: string) => sendPage(reply, await rhythmPage(deps, ctx, { kind: 'error', text }), 422);
    const platform = field(request.body, 'platform');
    if (!PLATFORM_NAMES.includes(platform)) return refuse('Choose a platform.');
    const change = changeOf(request.body);
    if (typeof change === 'string') return refuse(change);
    const applied = applyRhythmChange(await findRhythm(db, ctx.account.id, platform, deps.services.rhythmDefaults), change);
    if ('problem' in applied) return refuse(`${applied.problem.charAt(0).toUpperCase()}${applied.problem.slice(1)}.`);
    await saveRhythm(db, ctx.account.id, platform, applied.rhythm);
    return redirectTo(reply, '/dashboard/rhythm?notice=saved');
  });

  app.post('/rhythm/window', async (request, reply) => {
    const ctx = ctxOf(request);
    const refuse = async (text: string) => sendPage(reply, await rhythmPage(deps, ctx, { kind: 'error', text }), 422);
    const platform = field(request.body, 'platform');
    if (!PLATFORM_NAMES.includes(platform)) return refuse('Choose a platform.');
    const text = field(request.body, 'window').trim();
    const window = text === '' ? null : parseWindowText(text);
    if (typeof window === 'string') return refuse(`Send window: ${window}.`);
    await saveSendWindow(db, ctx.account.id, platform, window);
    return redirectTo(reply, '/dashboard/rhythm?notice=window_saved');
  });
}
