import type { FastifyInstance } from 'fastify';
import { LimitReachedError } from '../../store/limits.js';
import { WhatsappUnavailableError, type CreatedSession } from '../../platforms/whatsapp/sessions.js';
import type { WhatsappSessionRow } from '../../store/whatsapp-sessions.js';
import type { DashboardContext } from '../context.js';
import { ctxOf, field, redirectTo, type DashboardDeps } from '../deps.js';
import { html, isoTime, timeCell, type Html } from '../html.js';
import { page, sendPage, type Notice } from '../layout.js';

const NOTICES: Record<string, Notice> = {
  deleted: { kind: 'ok', text: 'The session was deleted: the device is logged out and its credentials are erased.' },
  unknown: { kind: 'error', text: 'No such WhatsApp session in this environment.' },
};

const STATUS_TEXT: Record<string, string> = {
  qr_pending: 'waiting for the scan',
  connected: 'connected',
  qr_expired: 'QR expired (create a new session)',
  disconnected: 'disconnected (link again with a new session)',
};

/** What the API accepts as `phone_number` for a pairing code. */
const PHONE_NUMBER = /^[0-9]{7,15}$/;

/** A session linked by pairing code has nothing to scan: it waits for the code to be typed on the phone. */
const PAIRING_PENDING_TEXT = 'waiting for the code to be entered on the phone';
/** The sessions table does not know how a pending session is being linked (QR or code): words true of both. */
const LINKING_TEXT = 'waiting to be linked on the phone';

const statusText = (status: string, byPairingCode = false): string =>
  status === 'qr_pending' && byPairingCode ? PAIRING_PENDING_TEXT : (STATUS_TEXT[status] ?? status);
const rowStatusText = (row: WhatsappSessionRow): string => (row.status === 'qr_pending' ? LINKING_TEXT : statusText(row.status));

/** What the page's script polls for: the session as the API's lookup shows it. */
const sessionJson = (row: WhatsappSessionRow) => ({
  session_id: row.id,
  status: row.status,
  status_text: rowStatusText(row),
  phone_number: row.phone_number,
  created_at: isoTime(row.created_at),
  last_connected_at: row.last_connected_at === null ? null : isoTime(row.last_connected_at),
});

function sessionRows(ctx: DashboardContext, rows: WhatsappSessionRow[]): Html {
  if (rows.length === 0) return html`<p>No WhatsApp sessions in this environment yet.</p>`;
  return html`<div class="table-wrap" tabindex="0" role="region" aria-label="WhatsApp sessions"><table>
<thead><tr><th scope="col">Session</th><th scope="col">Status</th><th scope="col">Phone number</th><th scope="col">Created</th><th scope="col">Last connected</th><th scope="col">Actions</th></tr></thead>
<tbody>${rows.map(
    (row) => html`<tr data-session-id="${row.id}" data-status="${row.status}" data-row-poll="/dashboard/whatsapp/${row.id}/status">
<td><code>${row.id}</code></td>
<td data-field="status_text">${rowStatusText(row)}</td>
<td data-field="phone_number">${row.phone_number ? `+${row.phone_number}` : '—'}</td>
<td>${timeCell(row.created_at)}</td>
<td data-field="last_connected_at">${timeCell(row.last_connected_at, 'never')}</td>
<td><form method="post" action="/dashboard/whatsapp/${row.id}/delete" class="inline">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<button type="submit" class="danger" aria-label="Delete session ${row.id}">Delete</button>
</form></td>
</tr>`,
  )}</tbody></table></div>`;
}

function linkingPanel(created: CreatedSession): Html {
  const { row } = created;
  const how =
    created.pairingCode !== undefined
      ? html`<p>On the phone with that number, in WhatsApp: Settings → Linked devices → Link a device → <em>Link with phone number instead</em>, then type this code. It is valid for about 45 seconds.</p>
<p class="pairing-code-row">Pairing code: <strong class="pairing-code" data-pairing-code>${created.pairingCode}</strong></p>`
      : html`<img class="qr" src="${created.qrCode ?? ''}" alt="QR code: in WhatsApp on your phone, open Settings, Linked devices, Link a device, and scan it" width="300" height="300">
<p>In WhatsApp on your phone: Settings → Linked devices → Link a device, then scan this code. It is valid for about 45 seconds.</p>`;
  return html`<section class="linking" aria-labelledby="linking-title" data-poll="/dashboard/whatsapp/${row.id}/status" data-session="${row.id}">
<h2 id="linking-title">Link session <code>${row.id}</code></h2>
<div class="qr-box" data-when="qr_pending">
${how}
</div>
<p class="session-status" aria-live="polite">Status: <strong data-field="status_text">${statusText(row.status, created.pairingCode !== undefined)}</strong><span data-field="phone"></span></p>
</section>`;
}

export function registerWhatsappPages(app: FastifyInstance, deps: DashboardDeps): void {
  const sessions = deps.services.whatsappSessions;

  const render = async (ctx: DashboardContext, notice?: Notice, created?: CreatedSession): Promise<Html> => {
    const rows = await sessions.list({ accountId: ctx.account.id, env: ctx.env });
    return page(
      ctx,
      { sections: deps.sections, section: 'whatsapp', title: 'WhatsApp', path: '/dashboard/whatsapp', notice },
      html`<p>Sessions link a WhatsApp account as a device; voice notes to WhatsApp leave through a connected session of the same environment (${ctx.env}).${
        ctx.env === 'test' ? ' Sandbox sessions connect by themselves after a few seconds, as phone 15550000000.' : ''
      }</p>
${created ? linkingPanel(created) : ''}
<form method="post" action="/dashboard/whatsapp" class="row">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<button type="submit">Create a session</button>
</form>
<form method="post" action="/dashboard/whatsapp" class="row">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label for="pairing-phone">Or link by pairing code: phone number with country code, digits only</label>
<input id="pairing-phone" name="phone_number" inputmode="numeric" pattern="[0-9]{7,15}" required autocomplete="tel">
<button type="submit">Get a pairing code</button>
</form>
<h2>Sessions (${ctx.env})</h2>
${sessionRows(ctx, rows)}`,
    );
  };

  app.get('/whatsapp', async (request, reply) => {
    const code = (request.query as Record<string, string>).notice ?? '';
    return sendPage(reply, await render(ctxOf(request), NOTICES[code]));
  });

  // The QR or pairing code exists only in this answer (neither is stored), so the page is rendered here, not redirected to.
  app.post('/whatsapp', async (request, reply) => {
    const ctx = ctxOf(request);
    const phoneNumber = field(request.body, 'phone_number').trim();
    if (phoneNumber !== '' && !PHONE_NUMBER.test(phoneNumber)) {
      return sendPage(reply, await render(ctx, { kind: 'error', text: 'The phone number must have 7 to 15 digits, country code first, no "+" or spaces.' }), 422);
    }
    try {
      // With a phone number the session is linked by typing a pairing code on that phone; without, by scanning a QR.
      const created = await sessions.create({ accountId: ctx.account.id, env: ctx.env }, phoneNumber === '' ? {} : { phoneNumber });
      return sendPage(reply, await render(ctx, undefined, created), 201);
    } catch (error) {
      if (error instanceof LimitReachedError) return sendPage(reply, await render(ctx, { kind: 'error', text: `No new session: ${error.message}.` }), 409);
      if (!(error instanceof WhatsappUnavailableError)) throw error;
      return sendPage(reply, await render(ctx, { kind: 'error', text: `WhatsApp could not be reached: ${error.message}` }), 502);
    }
  });

  app.get<{ Params: { id: string } }>('/whatsapp/:id/status', async (request, reply) => {
    const ctx = ctxOf(request);
    const row = await sessions.get({ accountId: ctx.account.id, env: ctx.env }, request.params.id);
    reply.header('Cache-Control', 'no-store');
    if (!row) return reply.code(404).send({ error: { code: 'not_found', message: 'no such session in this environment', details: null } });
    return sessionJson(row);
  });

  app.post<{ Params: { id: string } }>('/whatsapp/:id/delete', async (request, reply) => {
    const ctx = ctxOf(request);
    const removed = await sessions.remove({ accountId: ctx.account.id, env: ctx.env }, request.params.id);
    return redirectTo(reply, `/dashboard/whatsapp?notice=${removed ? 'deleted' : 'unknown'}`);
  });
}
