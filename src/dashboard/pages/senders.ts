import type { FastifyInstance } from 'fastify';
import type { SenderView } from '../../store/sender-view.js';
import { findSender, listSenders } from '../../store/senders.js';
import type { DashboardContext } from '../context.js';
import { ApiError } from '../../api/errors.js';
import { applySenderProxy, proxyToKeep } from '../../api/proxy-setting.js';
import { findSenderRecord } from '../../store/sender-proxy.js';
import { ctxOf, field, type DashboardDeps } from '../deps.js';
import { html, type Html } from '../html.js';
import { platformLabel } from '../labels.js';
import { page, sendPage, type Notice } from '../layout.js';

/** The senders shown on one page (newest first); the API pages through the rest. */
const SHOWN = 100;

const STATUS_TEXT: Record<string, string> = {
  ok: 'ok',
  resting: 'resting (paced by the platform)',
  restricted: 'restricted (no new chats)',
  expired: 'expired (send with a new credential)',
  disconnected: 'disconnected',
};

/** What the page's script polls for: the sender as the API shows it, with the words the table uses. */
const senderJson = (s: SenderView) => ({ ...s, status_text: STATUS_TEXT[s.status] ?? s.status, today_text: todayText(s) });
const todayText = (s: SenderView): string => (s.daily_cap === null ? `${s.sent_today}` : `${s.sent_today} of ${s.daily_cap}`);
const timeOrDash = (iso: string | null): Html => (iso === null ? html`—` : html`<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`);

/** The sender's proxy (scheme://host:port only) and a form to set or clear it (docs/proxies.md), for every kind of sender. */
function proxyCell(ctx: DashboardContext, s: SenderView): Html {
  return html`<form method="post" action="/dashboard/senders/${s.id}/proxy" class="inline">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<input type="text" name="proxy" value="" placeholder="${s.proxy ?? (s.kind === 'telegram_account' ? 'socks5://user:password@host:1080 (SOCKS5 only)' : 'socks5://user:password@host:1080')}" aria-label="Proxy of ${s.label ?? s.id} (empty clears it)" autocomplete="off">
<button type="submit" aria-label="Set the proxy of ${s.label ?? s.id}">Set</button>
</form>${s.proxy ? html` <span>now ${s.proxy}</span>` : ''}`;
}

function senderRows(ctx: DashboardContext, rows: SenderView[]): Html {
  if (rows.length === 0) return html`<p>No senders in this environment yet: one appears once a note of it is delivered or fails.</p>`;
  return html`<div class="table-wrap" tabindex="0" role="region" aria-label="Senders"><table>
<thead><tr><th scope="col">Sender</th><th scope="col">Platform</th><th scope="col">Status</th><th scope="col">Why</th><th scope="col">Until</th><th scope="col">Today (of the cap)</th><th scope="col">Last sent</th><th scope="col">Proxy</th></tr></thead>
<tbody>${rows.map(
    (s) => html`<tr data-sender-id="${s.id}" data-status="${s.status}" data-sender-poll="/dashboard/senders/${s.id}/status">
<td>${s.label ?? html`<code>${s.id}</code>`}</td>
<td>${platformLabel(s.platform)}</td>
<td data-field="status_text">${STATUS_TEXT[s.status] ?? s.status}</td>
<td data-field="reason">${s.reason ?? '—'}</td>
<td data-field="until">${timeOrDash(s.until)}</td>
<td data-field="today">${todayText(s)}</td>
<td data-field="last_sent_at">${timeOrDash(s.last_sent_at)}</td>
<td>${proxyCell(ctx, s)}</td>
</tr>`,
  )}</tbody></table></div>`;
}

/** Senders: each WhatsApp session, bot and LinkedIn cookie of the environment, with its health, kept up to date by the page's script. */
export function registerSenderPages(app: FastifyInstance, deps: DashboardDeps): void {
  const { db, rhythmDefaults } = deps.services;

  const render = async (ctx: DashboardContext, notice?: Notice): Promise<Html> => {
    const { data } = await listSenders(db.kysely, { accountId: ctx.account.id, env: ctx.env }, { limit: SHOWN }, rhythmDefaults);
    return page(
      ctx,
      { sections: deps.sections, section: 'senders', title: 'Senders', path: '/dashboard/senders', notice },
      html`<p>Each sender this environment (${ctx.env}) has used, as the platforms last told of it. A resting or restricted sender's notes wait in the queue until "Until"; an expired one's fail.</p>
${senderRows(ctx, data)}
<p>Every sender can leave through a proxy of its own (a Telegram account through a SOCKS5 one only): give its URL (the password is kept sealed and never shown again), or leave the field empty to clear it.</p>`,
    );
  };

  app.get('/senders', async (request, reply) => sendPage(reply, await render(ctxOf(request))));

  // Sets or clears a sender's proxy as PATCH /senders/{id} does: checked first, never shown with its credentials.
  app.post<{ Params: { id: string } }>('/senders/:id/proxy', async (request, reply) => {
    const ctx = ctxOf(request);
    const record = await findSenderRecord(db.kysely, { accountId: ctx.account.id, env: ctx.env }, request.params.id);
    if (!record) return sendPage(reply, await render(ctx, { kind: 'error', text: 'No such sender in this environment.' }), 404);
    const given = field(request.body, 'proxy').trim();
    try {
      const kept = given === '' ? null : await proxyToKeep(deps.services, given, { platform: record.platform, kind: record.kind, env: record.env, field: 'proxy' });
      await applySenderProxy(deps.services, record, kept);
      return sendPage(reply, await render(ctx, { kind: 'ok', text: kept ? `The sender now goes through ${kept.shown}.` : 'The sender has no proxy of its own now.' }));
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      return sendPage(reply, await render(ctx, { kind: 'error', text: error.message }), 422);
    }
  });

  app.get<{ Params: { id: string } }>('/senders/:id/status', async (request, reply) => {
    const ctx = ctxOf(request);
    const sender = await findSender(db.kysely, { accountId: ctx.account.id, env: ctx.env }, request.params.id, rhythmDefaults);
    reply.header('Cache-Control', 'no-store');
    if (!sender) return reply.code(404).send({ error: { code: 'not_found', message: 'no such sender in this environment', details: null } });
    return senderJson(sender);
  });
}
