import type { FastifyInstance } from 'fastify';
import { TelegramNotConfiguredError, TelegramUnavailableError } from '../../platforms/telegram/account/sessions.js';
import { telegramAccountLabel } from '../../core/telegram-session-views.js';
import { LimitReachedError } from '../../store/limits.js';
import type { TelegramSessionRow } from '../../store/telegram-sessions.js';
import type { DashboardContext } from '../context.js';
import { ctxOf, redirectTo, type DashboardDeps } from '../deps.js';
import { html, isoTime, timeCell, type Html } from '../html.js';
import { page, sendPage, type Notice } from '../layout.js';

const NOTICES: Record<string, Notice> = {
  deleted: { kind: 'ok', text: 'The session was deleted: the account is logged out at Telegram and its keys are erased.' },
  unknown: { kind: 'error', text: 'No such Telegram session in this environment.' },
};

const STATUS_TEXT: Record<string, string> = {
  qr_pending: 'waiting for the scan',
  password_needed: 'waiting for the cloud password (POST /telegram/sessions/{id}/password)',
  connected: 'connected',
  qr_expired: 'QR expired (create a new session)',
  disconnected: 'disconnected (link again with a new session)',
};
const statusText = (status: string): string => STATUS_TEXT[status] ?? status;
const who = (row: TelegramSessionRow): string => telegramAccountLabel(row) ?? '—';

/** What the page's script polls for (the same fields as the WhatsApp page's, so the same script follows it). */
const sessionJson = (row: TelegramSessionRow, qrCode: string | undefined) => ({
  session_id: row.id,
  status: row.status,
  status_text: statusText(row.status),
  phone_number: row.phone_number,
  // What the panel and the table say ("connected as @jane"): the @username people know the account by.
  who: telegramAccountLabel(row),
  created_at: isoTime(row.created_at),
  last_connected_at: row.last_connected_at === null ? null : isoTime(row.last_connected_at),
  ...(qrCode !== undefined ? { qr_code: qrCode } : {}),
});

function sessionRows(ctx: DashboardContext, rows: TelegramSessionRow[]): Html {
  if (rows.length === 0) return html`<p>No Telegram accounts in this environment yet.</p>`;
  return html`<div class="table-wrap" tabindex="0" role="region" aria-label="Telegram accounts"><table>
<thead><tr><th scope="col">Session</th><th scope="col">Status</th><th scope="col">Account</th><th scope="col">Created</th><th scope="col">Last connected</th><th scope="col">Actions</th></tr></thead>
<tbody>${rows.map(
    (row) => html`<tr data-session-id="${row.id}" data-status="${row.status}" data-row-poll="/dashboard/telegram/${row.id}/status">
<td><code>${row.id}</code></td>
<td data-field="status_text">${statusText(row.status)}</td>
<td data-field="phone_number">${who(row)}</td>
<td>${timeCell(row.created_at)}</td>
<td data-field="last_connected_at">${timeCell(row.last_connected_at, 'never')}</td>
<td><form method="post" action="/dashboard/telegram/${row.id}/delete" class="inline">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<button type="submit" class="danger" aria-label="Delete session ${row.id}">Delete</button>
</form></td>
</tr>`,
  )}</tbody></table></div>`;
}

function linkingPanel(row: TelegramSessionRow, qrCode: string): Html {
  return html`<section class="linking" aria-labelledby="linking-title" data-poll="/dashboard/telegram/${row.id}/status" data-session="${row.id}">
<h2 id="linking-title">Link Telegram account <code>${row.id}</code></h2>
<div class="qr-box" data-when="qr_pending">
<img class="qr" data-qr src="${qrCode}" alt="QR code: in Telegram on your phone, open Settings, Devices, Link Desktop Device, and scan it" width="300" height="300">
<p>In Telegram on your phone: Settings → Devices → Link Desktop Device, then scan this code. Telegram renews it every 30 seconds or so: the picture follows.</p>
</div>
<p class="session-status" aria-live="polite">Status: <strong data-field="status_text">${statusText(row.status)}</strong><span data-field="phone"></span></p>
</section>`;
}

/** Telegram accounts linked by QR code: a live table, the QR code to scan, delete; as the WhatsApp page. */
export function registerTelegramPages(app: FastifyInstance, deps: DashboardDeps): void {
  const sessions = deps.services.telegramSessions;
  const owner = (ctx: DashboardContext) => ({ accountId: ctx.account.id, env: ctx.env });

  const render = async (ctx: DashboardContext, notice?: Notice, linking?: { row: TelegramSessionRow; qrCode: string }): Promise<Html> => {
    const rows = await sessions.list(owner(ctx));
    return page(
      ctx,
      { sections: deps.sections, section: 'telegram', title: 'Telegram accounts', path: '/dashboard/telegram', notice },
      html`<p>A linked Telegram account sends voice notes as that person, to anyone (a bot reaches only people who started it), in this environment (${ctx.env}).${
        ctx.env === 'test' ? ' Sandbox sessions link by themselves after a few seconds, as @voicenote_sandbox.' : ''
      }</p>
${linking ? linkingPanel(linking.row, linking.qrCode) : ''}
<form method="post" action="/dashboard/telegram" class="row">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<button type="submit">Link a Telegram account</button>
</form>
<h2>Sessions (${ctx.env})</h2>
${sessionRows(ctx, rows)}`,
    );
  };

  app.get('/telegram', async (request, reply) => {
    const code = (request.query as Record<string, string>).notice ?? '';
    return sendPage(reply, await render(ctxOf(request), NOTICES[code]));
  });

  app.post('/telegram', async (request, reply) => {
    const ctx = ctxOf(request);
    try {
      const created = await sessions.create(owner(ctx));
      return sendPage(reply, await render(ctx, undefined, created), 201);
    } catch (error) {
      if (error instanceof TelegramNotConfiguredError) return sendPage(reply, await render(ctx, { kind: 'error', text: `Not configured on this server: ${error.message}` }), 503);
      if (error instanceof TelegramNotConfiguredError) return sendPage(reply, await render(ctx, { kind: 'error', text: `Not configured on this server: ${error.message}` }), 503);
      if (error instanceof LimitReachedError) return sendPage(reply, await render(ctx, { kind: 'error', text: `No new session: ${error.message}.` }), 409);
      if (!(error instanceof TelegramUnavailableError)) throw error;
      return sendPage(reply, await render(ctx, { kind: 'error', text: `Telegram could not be reached: ${error.message}` }), 502);
    }
  });

  app.get<{ Params: { id: string } }>('/telegram/:id/status', async (request, reply) => {
    const ctx = ctxOf(request);
    const row = await sessions.get(owner(ctx), request.params.id);
    reply.header('Cache-Control', 'no-store');
    if (!row) return reply.code(404).send({ error: { code: 'not_found', message: 'no such session in this environment', details: null } });
    return sessionJson(row, await sessions.currentQr(row));
  });

  app.post<{ Params: { id: string } }>('/telegram/:id/delete', async (request, reply) => {
    const ctx = ctxOf(request);
    const removed = await sessions.remove(owner(ctx), request.params.id);
    return redirectTo(reply, `/dashboard/telegram?notice=${removed ? 'deleted' : 'unknown'}`);
  });
}
