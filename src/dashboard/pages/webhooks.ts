import type { FastifyInstance } from 'fastify';
import { isWebhookEventType, WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../../webhooks/events.js';
import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  getWebhookEndpoint,
  listWebhookDeliveries,
  listWebhookEndpoints,
  resendWebhookDelivery,
  rollWebhookSecret,
  sendTestEvent,
  WebhookInputError,
  type WebhookDeliveryView,
  type WebhookDeps,
  type WebhookEndpointView,
} from '../../webhooks/endpoints.js';
import { eventSubjects, type EventSubject } from '../../store/webhook-subjects.js';
import type { DashboardContext } from '../context.js';
import { ctxOf, field, fields, redirectTo, type DashboardDeps } from '../deps.js';
import { html, type Html } from '../html.js';
import { page, sendPage, type Notice } from '../layout.js';

const NOTICES: Record<string, Notice> = {
  deleted: { kind: 'ok', text: 'The endpoint was deleted: nothing more is sent to it.' },
  test_sent: { kind: 'ok', text: 'A test event is on its way; its delivery shows below within seconds.' },
  resent: { kind: 'ok', text: 'The event is sent again, as a new delivery with the same event id.' },
  unknown: { kind: 'error', text: 'No such endpoint or delivery in this environment.' },
};

/** How long the old secret keeps signing after a roll, as offered in the form. */
const SECRET_GRACE: Record<string, { ms: number; label: string }> = {
  '24h': { ms: 24 * 3600_000, label: '24 hours' },
  '1h': { ms: 3600_000, label: '1 hour' },
  now: { ms: 0, label: 'stop at once' },
};

const isoCell = (iso: string | null, empty = '—'): Html =>
  iso === null ? html`${empty}` : html`<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`;

function secretPanel(secret: string, what: string, previousUntil: string | null): Html {
  return html`<section class="secret-panel" aria-labelledby="new-secret-title">
<h2 id="new-secret-title">${what}</h2>
<p>Copy it now: it is stored encrypted and will not be shown again. Verify each delivery with it (any Standard Webhooks library does).</p>
<p class="secret-row"><code id="new-secret">${secret}</code>
<button type="button" data-copy="new-secret">Copy</button> <span class="copied" aria-live="polite"></span></p>
${previousUntil ? html`<p>The previous secret also signs every delivery until ${isoCell(previousUntil)}.</p>` : ''}
</section>`;
}

function endpointActions(ctx: DashboardContext, endpoint: WebhookEndpointView): Html {
  return html`<form method="post" action="/dashboard/webhooks/${endpoint.id}/test" class="inline">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label>Test event <select name="type">${WEBHOOK_EVENT_TYPES.map((t) => html`<option value="${t}">${t}</option>`)}</select></label>
<button type="submit" aria-label="Send test event to ${endpoint.url}">Send test event</button>
</form>
<form method="post" action="/dashboard/webhooks/${endpoint.id}/roll" class="inline">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label>Old secret <select name="grace">${Object.entries(SECRET_GRACE).map(([v, g]) => html`<option value="${v}">${g.label}</option>`)}</select></label>
<button type="submit" aria-label="Roll secret of ${endpoint.url}">Roll secret</button>
</form>
<form method="post" action="/dashboard/webhooks/${endpoint.id}/delete" class="inline">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<button type="submit" class="danger" aria-label="Delete endpoint ${endpoint.url}">Delete</button>
</form>`;
}

/** Which voice note or session a delivery was about, linked to its page (a test event's sample is not). */
function subjectCell(subject: EventSubject | undefined): Html | string {
  if (!subject) return '—';
  if (subject.test) return html`<code>${subject.id}</code> (test event)`;
  const href = subject.kind === 'message' ? `/dashboard/messages/${subject.id}` : '/dashboard/whatsapp';
  return html`<a href="${href}"><code>${subject.id}</code></a>`;
}

function deliveriesTable(ctx: DashboardContext, endpointId: string, deliveries: WebhookDeliveryView[], subjects: Map<string, EventSubject>): Html {
  if (deliveries.length === 0) return html`<p>No deliveries yet.</p>`;
  return html`<div class="table-wrap" tabindex="0" role="region" aria-label="Deliveries"><table>
<thead><tr><th scope="col">Created</th><th scope="col">Event</th><th scope="col">About</th><th scope="col">Status</th><th scope="col">Answers</th><th scope="col">Actions</th></tr></thead>
<tbody>${deliveries.map((d) => {
    const last = d.answers[d.answers.length - 1];
    return html`<tr data-delivery-id="${d.id}" data-event-id="${d.event_id}" data-status="${d.status}">
<td>${isoCell(d.created_at)}</td>
<td>${d.event_type ?? '—'}<br><code>${d.event_id}</code></td>
<td data-field="about">${subjectCell(subjects.get(d.event_id))}</td>
<td>${d.status}${d.next_attempt_at ? html`<br>next try ${isoCell(d.next_attempt_at)}` : ''}</td>
<td>${
      d.answers.length === 0
        ? 'none yet'
        : html`<details><summary data-last-answer>${last!.status_code === null ? `no answer (${last!.error ?? 'error'})` : `HTTP ${last!.status_code}`}, ${d.answers.length} attempt${d.answers.length === 1 ? '' : 's'}</summary>
<ol>${d.answers.map(
            (a) => html`<li>${isoCell(a.at)}, ${a.duration_ms} ms: ${a.status_code === null ? `no answer (${a.error ?? 'error'})` : `HTTP ${a.status_code}`}${a.response_excerpt ? html`<pre>${a.response_excerpt}</pre>` : ''}</li>`,
          )}</ol></details>`
    }</td>
<td class="actions">${
      // A pending delivery is still being tried: there is nothing to resend yet.
      d.status === 'pending'
        ? html`<span class="hint">being tried</span>`
        : html`<form method="post" action="/dashboard/webhooks/${endpointId}/deliveries/${d.id}/resend" class="inline">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<button type="submit" aria-label="Resend delivery ${d.id}">Resend</button>
</form>`
    }</td>
</tr>`;
  })}</tbody></table></div>`;
}

export function registerWebhookPages(app: FastifyInstance, deps: DashboardDeps): void {
  const { services } = deps;
  const hooks: WebhookDeps = { db: services.db, secretBox: services.secretBox, allowPrivateUrls: services.config.audioAllowPrivateUrls };
  const ownerOf = (ctx: DashboardContext) => ({ accountId: ctx.account.id, env: ctx.env });

  const listPage = async (ctx: DashboardContext, notice?: Notice, shown?: { secret: string }, form?: { url: string; description: string; events: string[] }) => {
    const endpoints = await listWebhookEndpoints(hooks, ownerOf(ctx));
    const chosen = new Set(form?.events ?? WEBHOOK_EVENT_TYPES);
    return page(
      ctx,
      { sections: deps.sections, section: 'webhooks', title: 'Webhooks', path: '/dashboard/webhooks', notice },
      html`${shown ? secretPanel(shown.secret, 'The new endpoint’s signing secret', null) : ''}
<p>Endpoints of the ${ctx.env} environment receive its events as signed POSTs (Standard Webhooks), retried after 1 s, 5 s, 30 s, 2 min and 10 min until they answer 2xx.</p>
<section aria-labelledby="add-endpoint">
<h2 id="add-endpoint">Add an endpoint</h2>
<form method="post" action="/dashboard/webhooks" class="stack">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label for="wh-url">URL</label>
<input id="wh-url" name="url" type="url" required placeholder="https://example.com/voicenote-events" value="${form?.url ?? ''}">
<label for="wh-description">Description (optional)</label>
<input id="wh-description" name="description" maxlength="256" value="${form?.description ?? ''}">
<fieldset><legend>Events</legend>
${WEBHOOK_EVENT_TYPES.map(
  (t) => html`<label><input type="checkbox" name="events" value="${t}"${chosen.has(t) ? html` checked` : ''}> ${t}</label><br>`,
)}
</fieldset>
<button type="submit">Add endpoint</button>
</form>
</section>
<h2>Endpoints (${ctx.env})</h2>
${
  endpoints.length === 0
    ? html`<p>No endpoints in this environment yet.</p>`
    : html`<div class="table-wrap" tabindex="0" role="region" aria-label="Endpoints"><table>
<thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Secret</th><th scope="col">Actions</th></tr></thead>
<tbody>${endpoints.map(
        (e) => html`<tr data-endpoint-id="${e.id}">
<td><a href="/dashboard/webhooks/${e.id}">${e.url}</a>${e.description ? html`<br>${e.description}` : ''}</td>
<td>${e.events.join(', ')}</td>
<td>${e.previous_secret_expires_at ? html`rolled; the old one signs until ${isoCell(e.previous_secret_expires_at)}` : 'one secret'}</td>
<td>${endpointActions(ctx, e)}</td>
</tr>`,
      )}</tbody></table></div>`
}`,
    );
  };

  const endpointPage = async (ctx: DashboardContext, endpoint: WebhookEndpointView, notice?: Notice, shown?: { secret: string; previousUntil: string | null }) => {
    const deliveries = (await listWebhookDeliveries(hooks, ownerOf(ctx), endpoint.id, 50)) ?? [];
    const subjects = await eventSubjects(services.db.kysely, ownerOf(ctx), deliveries.map((d) => d.event_id));
    return page(
      ctx,
      { sections: deps.sections, section: 'webhooks', title: 'Webhook endpoint', path: '/dashboard/webhooks', notice },
      html`<p><a href="/dashboard/webhooks">← All endpoints</a></p>
${shown ? secretPanel(shown.secret, 'The new signing secret', shown.previousUntil) : ''}
<dl class="facts">
<dt>URL</dt><dd><code>${endpoint.url}</code></dd>
<dt>Description</dt><dd>${endpoint.description ?? '—'}</dd>
<dt>Events</dt><dd>${endpoint.events.join(', ')}</dd>
<dt>Created</dt><dd>${isoCell(endpoint.created_at)}</dd>
<dt>Id</dt><dd><code>${endpoint.id}</code></dd>
</dl>
<p>${endpointActions(ctx, endpoint)}</p>
<h2>Recent deliveries</h2>
<p><a href="/dashboard/webhooks/${endpoint.id}">Refresh</a></p>
${deliveriesTable(ctx, endpoint.id, deliveries, subjects)}`,
    );
  };

  app.get('/webhooks', async (request, reply) => {
    const code = (request.query as Record<string, string>).notice ?? '';
    return sendPage(reply, await listPage(ctxOf(request), NOTICES[code]));
  });

  app.post('/webhooks', async (request, reply) => {
    const ctx = ctxOf(request);
    const form = { url: field(request.body, 'url').trim(), description: field(request.body, 'description').trim(), events: fields(request.body, 'events').filter(isWebhookEventType) };
    try {
      const created = await createWebhookEndpoint(hooks, ownerOf(ctx), {
        url: form.url,
        events: form.events,
        ...(form.description ? { description: form.description } : {}),
      });
      return sendPage(reply, await listPage(ctx, { kind: 'ok', text: `Added ${created.endpoint.url}.` }, { secret: created.secret }), 201);
    } catch (error) {
      if (!(error instanceof WebhookInputError)) throw error;
      return sendPage(reply, await listPage(ctx, { kind: 'error', text: error.message }, undefined, form), 422);
    }
  });

  app.get<{ Params: { id: string } }>('/webhooks/:id', async (request, reply) => {
    const ctx = ctxOf(request);
    const endpoint = await getWebhookEndpoint(hooks, ownerOf(ctx), request.params.id);
    if (!endpoint) return redirectTo(reply, '/dashboard/webhooks?notice=unknown');
    const code = (request.query as Record<string, string>).notice ?? '';
    return sendPage(reply, await endpointPage(ctx, endpoint, NOTICES[code]));
  });

  app.post<{ Params: { id: string } }>('/webhooks/:id/roll', async (request, reply) => {
    const ctx = ctxOf(request);
    const grace = SECRET_GRACE[field(request.body, 'grace')] ?? SECRET_GRACE['24h']!;
    const rolled = await rollWebhookSecret(hooks, ownerOf(ctx), request.params.id, { previousValidForMs: grace.ms });
    if (!rolled) return redirectTo(reply, '/dashboard/webhooks?notice=unknown');
    return sendPage(
      reply,
      await endpointPage(ctx, rolled.endpoint, { kind: 'ok', text: 'Secret rolled.' }, { secret: rolled.secret, previousUntil: rolled.endpoint.previous_secret_expires_at }),
      201,
    );
  });

  app.post<{ Params: { id: string } }>('/webhooks/:id/test', async (request, reply) => {
    const ctx = ctxOf(request);
    const type = field(request.body, 'type');
    const sent = await sendTestEvent(hooks, ownerOf(ctx), request.params.id, (isWebhookEventType(type) ? type : 'voice_note.delivered') as WebhookEventType);
    if (!sent) return redirectTo(reply, '/dashboard/webhooks?notice=unknown');
    return redirectTo(reply, `/dashboard/webhooks/${request.params.id}?notice=test_sent`);
  });

  app.post<{ Params: { id: string; delivery: string } }>('/webhooks/:id/deliveries/:delivery/resend', async (request, reply) => {
    const ctx = ctxOf(request);
    const resent = await resendWebhookDelivery(hooks, ownerOf(ctx), request.params.delivery, request.params.id);
    if (!resent) return redirectTo(reply, '/dashboard/webhooks?notice=unknown');
    return redirectTo(reply, `/dashboard/webhooks/${request.params.id}?notice=resent`);
  });

  app.post<{ Params: { id: string } }>('/webhooks/:id/delete', async (request, reply) => {
    const ctx = ctxOf(request);
    const removed = await deleteWebhookEndpoint(hooks, ownerOf(ctx), request.params.id);
    return redirectTo(reply, `/dashboard/webhooks?notice=${removed ? 'deleted' : 'unknown'}`);
  });
}
