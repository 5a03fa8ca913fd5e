import type { FastifyInstance } from 'fastify';
import type { KeyEnv } from '../../core/ids.js';
import { isKeyScope, KEY_SENDER_PATTERN, scopeOf, sendersOf, type KeyScope } from '../../core/key-scopes.js';
import { createKey, findKey, listKeys, revokeKey, rollKey, type KeyRow } from '../../store/keys.js';
import { LimitReachedError } from '../../store/limits.js';
import { ctxOf, field, redirectTo, type DashboardDeps } from '../deps.js';
import { html, timeCell, type Html } from '../html.js';
import { page, sendPage, type Notice } from '../layout.js';
import type { DashboardContext } from '../context.js';

/** How long a rolled key keeps working, as offered in the form (the CLI's default is 24 h). */
const ROLL_GRACE: Record<string, { ms: number; label: string }> = {
  '1h': { ms: 60 * 60 * 1000, label: '1 hour' },
  '24h': { ms: 24 * 60 * 60 * 1000, label: '24 hours' },
  '7d': { ms: 7 * 24 * 60 * 60 * 1000, label: '7 days' },
};

const NOTICES: Record<string, Notice> = {
  revoked: { kind: 'ok', text: 'The key was revoked: requests with it now get 401.' },
  unknown: { kind: 'error', text: 'No such key in this account.' },
};

function keyState(key: KeyRow, now: number): string {
  if (key.revoked_at !== null) return 'revoked';
  if (key.expires_at !== null && Number(key.expires_at) <= now) return 'expired';
  if (key.expires_at !== null) return 'expiring';
  return 'active';
}

interface Shown {
  secret: string;
  env: string;
  replaces?: { prefix: string; expiresAt: number };
}

function newSecretPanel(shown: Shown): Html {
  return html`<section class="secret-panel" aria-labelledby="new-key-title">
<h2 id="new-key-title">Your new ${shown.env} key</h2>
<p>Copy it now: it is stored only as a hash and will not be shown again.</p>
<p class="secret-row"><code id="new-secret">${shown.secret}</code>
<button type="button" data-copy="new-secret">Copy</button> <span class="copied" aria-live="polite"></span></p>
${shown.replaces ? html`<p>The key ${shown.replaces.prefix}… keeps working until ${timeCell(shown.replaces.expiresAt)}, so callers can switch without downtime.</p>` : ''}
</section>`;
}

/**
 * The key's scope, and its senders when it is limited to some, on a line under its environment: a column
 * of their own pushed the row's Roll and Revoke buttons past a 1280-pixel window.
 */
function accessLine(key: KeyRow): Html {
  const senders = sendersOf(key.senders);
  const scope = scopeOf(key.scope);
  return html`<br><span class="key-access">scope ${scope}${senders === null ? '' : html`, as ${senders.map((id, i) => html`${i > 0 ? ', ' : ''}<code>${id}</code>`)}`}</span>`;
}

/** The create form's scope and senders; a sender that is no id is named back to the person. */
function grantOf(body: unknown): { scope: KeyScope; senders: string[] } | { problem: string } {
  const scopeField = field(body, 'scope');
  const scope = scopeField === '' ? 'full' : scopeField;
  if (!isKeyScope(scope)) return { problem: 'the scope must be full, send or read' };
  const senders = field(body, 'senders').split(/[\s,]+/).filter((s) => s !== '');
  const wrong = senders.find((s) => !KEY_SENDER_PATTERN.test(s));
  if (wrong !== undefined) return { problem: `${wrong} is not a sender id (snd_…, ws_… or ts_…)` };
  return { scope, senders };
}

function keysPage(deps: DashboardDeps, ctx: DashboardContext, keys: KeyRow[], notice?: Notice, shown?: Shown): Html {
  const now = Date.now();
  const rows = keys.map((key) => {
    const state = keyState(key, now);
    const usable = state === 'active' || state === 'expiring';
    return html`<tr data-key-id="${key.id}">
<td><code>${key.prefix}…</code></td>
<td>${key.env}${accessLine(key)}</td>
<td>${timeCell(key.created_at)}</td>
<td>${timeCell(key.last_used_at, 'never')}</td>
<td>${timeCell(key.expires_at, 'never')}</td>
<td>${state}</td>
<td class="actions">${
      usable
        ? html`<form method="post" action="/dashboard/keys/${key.id}/roll" class="inline">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label>Old key stays valid for <select name="grace">${Object.entries(ROLL_GRACE).map(
            ([value, g]) => html`<option value="${value}"${value === '24h' ? html` selected` : ''}>${g.label}</option>`,
          )}</select></label>
<button type="submit" aria-label="Roll key ${key.prefix}">Roll</button>
</form>
<form method="post" action="/dashboard/keys/${key.id}/revoke" class="inline" data-confirm="Revoke the key ${key.prefix}…? Requests with it get 401 at once; this cannot be undone.">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<button type="submit" class="danger" aria-label="Revoke key ${key.prefix}">Revoke</button>
</form>`
        : ''
    }</td>
</tr>`;
  });
  return page(
    ctx,
    { sections: deps.sections, section: 'keys', title: 'API keys', path: '/dashboard/keys', notice },
    html`${shown ? newSecretPanel(shown) : ''}
<section aria-labelledby="create-title">
<h2 id="create-title">Create a key</h2>
<form method="post" action="/dashboard/keys" class="row">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label for="new-key-env">Environment</label>
<select id="new-key-env" name="env">
<option value="test"${ctx.env === 'test' ? html` selected` : ''}>test (sandbox, sk_test_)</option>
<option value="live"${ctx.env === 'live' ? html` selected` : ''}>live (sk_live_)</option>
</select>
<label for="new-key-scope">Scope</label>
<select id="new-key-scope" name="scope">
<option value="full" selected>full (everything)</option>
<option value="send">send (send, cancel and read)</option>
<option value="read">read (GET only)</option>
</select>
<label for="new-key-senders">Senders (optional)</label>
<input id="new-key-senders" name="senders" placeholder="snd_… ws_… ts_…, space-separated; empty: any">
<button type="submit">Create key</button>
</form>
</section>
<section aria-labelledby="list-title">
<h2 id="list-title">Keys of this account</h2>
<p>Rolling issues a new key and keeps the old one working until the time you choose. Revoking stops a key at once.</p>
<div class="table-wrap" tabindex="0" role="region" aria-label="API keys"><table class="keys-table">
<thead><tr><th scope="col">Prefix</th><th scope="col">Environment</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">State</th><th scope="col">Actions</th></tr></thead>
<tbody>${rows}</tbody>
</table></div>
</section>`,
  );
}

export function registerKeyPages(app: FastifyInstance, deps: DashboardDeps): void {
  const db = deps.services.db.kysely;

  app.get('/keys', async (request, reply) => {
    const ctx = ctxOf(request);
    const code = (request.query as Record<string, string>).notice ?? '';
    return sendPage(reply, keysPage(deps, ctx, await listKeys(db, ctx.account.id), NOTICES[code]));
  });

  // The new secret exists only in this response: it is rendered here, never stored, never redirected.
  app.post('/keys', async (request, reply) => {
    const ctx = ctxOf(request);
    const env: KeyEnv = field(request.body, 'env') === 'live' ? 'live' : 'test';
    const grant = grantOf(request.body);
    if ('problem' in grant) {
      return sendPage(reply, keysPage(deps, ctx, await listKeys(db, ctx.account.id), { kind: 'error', text: `No new key: ${grant.problem}.` }), 422);
    }
    let issued;
    try {
      issued = await createKey(db, ctx.account.id, env, Date.now(), grant);
    } catch (error) {
      if (!(error instanceof LimitReachedError)) throw error;
      return sendPage(reply, keysPage(deps, ctx, await listKeys(db, ctx.account.id), { kind: 'error', text: `No new key: ${error.message}.` }), 409);
    }
    const notice: Notice = { kind: 'ok', text: `Created a ${env} key (${issued.row.prefix}…).` };
    return sendPage(reply, keysPage(deps, ctx, await listKeys(db, ctx.account.id), notice, { secret: issued.secret, env }), 201);
  });

  app.post<{ Params: { id: string } }>('/keys/:id/roll', async (request, reply) => {
    const ctx = ctxOf(request);
    const old = await findKey(db, request.params.id);
    const now = Date.now();
    if (!old || old.account_id !== ctx.account.id || old.revoked_at !== null || (old.expires_at !== null && Number(old.expires_at) <= now)) {
      return redirectTo(reply, '/dashboard/keys?notice=unknown');
    }
    const grace = ROLL_GRACE[field(request.body, 'grace')] ?? ROLL_GRACE['24h']!;
    let rolled;
    try {
      rolled = await rollKey(db, old, grace.ms, now);
    } catch (error) {
      if (!(error instanceof LimitReachedError)) throw error;
      return sendPage(reply, keysPage(deps, ctx, await listKeys(db, ctx.account.id), { kind: 'error', text: `Not rolled: ${error.message}.` }), 409);
    }
    const notice: Notice = { kind: 'ok', text: `Rolled ${old.prefix}…: here is its successor.` };
    return sendPage(
      reply,
      keysPage(deps, ctx, await listKeys(db, ctx.account.id), notice, {
        secret: rolled.secret,
        env: old.env,
        replaces: { prefix: old.prefix, expiresAt: rolled.oldExpiresAt },
      }),
      201,
    );
  });

  app.post<{ Params: { id: string } }>('/keys/:id/revoke', async (request, reply) => {
    const ctx = ctxOf(request);
    const key = await findKey(db, request.params.id);
    if (!key || key.account_id !== ctx.account.id) return redirectTo(reply, '/dashboard/keys?notice=unknown');
    await revokeKey(db, key.id);
    return redirectTo(reply, '/dashboard/keys?notice=revoked');
  });
}
