import type { FastifyInstance } from 'fastify';
import { BUILT_IN_OPT_OUT_KEYWORDS } from '../../core/opt-out-keywords.js';
import { CsvError } from '../../core/csv.js';
import { readSuppressionCsv } from '../../core/suppression-csv.js';
import { checkOwnKeywords } from '../../api/opt-out-settings.js';
import { checkSuppressionEntry, isEntryProblem, MAX_SUPPRESSIONS_PER_CALL, suppressRecipients } from '../../api/suppressions.js';
import { PLATFORM_NAMES } from '../../platforms/registry.js';
import { readOptOutSettings, writeOptOutSettings } from '../../store/opt-out-settings.js';
import { deleteSuppression, listSuppressions, type NewSuppression } from '../../store/suppressions.js';
import type { DashboardContext } from '../context.js';
import { ctxOf, field, parseForm, redirectTo, type DashboardDeps } from '../deps.js';
import { count, html, timeCell } from '../html.js';
import { page, sendPage, type Notice } from '../layout.js';

/** A pasted CSV file may be this large (the other forms take 16 KiB): 10,000 phone numbers are about 150 KiB. */
const IMPORT_BODY_LIMIT = 2 * 1024 * 1024;
const SHOWN = 100;

const NOTICES: Record<string, Notice> = {
  added: { kind: 'ok', text: 'Listed. Notes waiting for them were canceled, and sends to them are refused.' },
  removed: { kind: 'ok', text: 'Taken off the list: sends to them are accepted again.' },
  saved: { kind: 'ok', text: 'Saved.' },
};

const owner = (ctx: DashboardContext) => ({ accountId: ctx.account.id, env: ctx.env });
const platformOptions = (chosen = '*') =>
  html`<option value="*"${chosen === '*' ? ' selected' : ''}>Every platform</option>${PLATFORM_NAMES.map((p) => html`<option value="${p}"${chosen === p ? ' selected' : ''}>${p}</option>`)}`;

async function suppressionsPage(deps: DashboardDeps, ctx: DashboardContext, search: string, notice?: Notice) {
  const db = deps.services.db.kysely;
  const filter = search.trim() === '' ? {} : { recipient: search, prefix: true };
  const [{ data, hasMore }, settings] = await Promise.all([listSuppressions(db, owner(ctx), filter, { limit: SHOWN }), readOptOutSettings(db, owner(ctx))]);
  return page(
    ctx,
    { sections: deps.sections, section: 'account', title: 'Suppression list', path: '/dashboard/suppressions', notice },
    html`<p>Nobody on this list is ever written to in this environment (${ctx.env}): a send to them is refused with <code>recipient_suppressed</code>, and their notes waiting are canceled. People who reply with an opt-out keyword (STOP, baja, abmelden…) are listed by themselves.</p>
<form method="get" action="/dashboard/suppressions" class="inline" role="search">
<label for="q">Search</label> <input id="q" name="q" value="${search}" placeholder="a number, @username or profile id">
<button type="submit">Search</button>
</form>
<table data-list="suppressions">
<thead><tr><th>Recipient</th><th>Platform</th><th>Source</th><th>Note</th><th>Listed</th><th></th></tr></thead>
<tbody>${data.map(
      (s) => html`<tr data-id="${s.id}"><td><code>${s.recipient_key}</code></td><td>${s.platform === '*' ? 'every platform' : s.platform}</td><td>${s.source}</td><td>${s.note ?? ''}</td><td>${timeCell(s.created_at)}</td>
<td><form method="post" action="/dashboard/suppressions/remove"><input type="hidden" name="_csrf" value="${ctx.csrf}"><input type="hidden" name="id" value="${s.id}"><button type="submit">Remove</button></form></td></tr>`,
    )}</tbody>
</table>
${data.length === 0 ? html`<p class="hint">${search.trim() === '' ? 'Nobody is listed yet.' : 'Nobody listed matches.'}</p>` : ''}
${hasMore ? html`<p class="hint">The newest ${count(SHOWN)} are shown; search to find others.</p>` : ''}
<section class="card" aria-labelledby="add-title">
<h2 id="add-title">Add a recipient</h2>
<form method="post" action="/dashboard/suppressions" class="stack">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label for="add-platform">Platform</label><select id="add-platform" name="platform">${platformOptions()}</select>
<label for="add-recipient">Recipient (a phone number, @username, chat id, profile id or URL)</label><input id="add-recipient" name="recipient" required>
<label for="add-note">Note (optional)</label><input id="add-note" name="note" maxlength="500">
<button type="submit">Add</button>
</form>
</section>
<section class="card" aria-labelledby="import-title">
<h2 id="import-title">Import a CSV file</h2>
<form method="post" action="/dashboard/suppressions/import" class="stack">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label for="import-csv">The file's text: a header naming <code>recipient</code>, and optionally <code>platform</code> and <code>note</code></label>
<textarea id="import-csv" name="csv" rows="8" required placeholder="platform,recipient,note&#10;whatsapp,+49 151 2345678,asked by email"></textarea>
<label for="import-platform">Platform of rows without one</label><select id="import-platform" name="platform">${platformOptions()}</select>
<button type="submit">Import</button>
</form>
</section>
<section class="card" aria-labelledby="optout-title">
<h2 id="optout-title">Opt-outs by reply</h2>
<form method="post" action="/dashboard/suppressions/opt-outs" class="stack">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label><input type="checkbox" name="enabled" value="1"${settings.enabled ? ' checked' : ''}> A reply that is only an opt-out keyword lists its sender</label>
<label for="own-keywords">Your own keywords, comma-separated</label><input id="own-keywords" name="keywords" value="${settings.keywords.join(', ')}">
<button type="submit">Save</button>
</form>
<p class="hint">Built in: ${Object.values(BUILT_IN_OPT_OUT_KEYWORDS).flat().join(', ')}.</p>
</section>`,
  );
}

/** The dashboard's "Suppression list" page: search, add, remove, import a CSV file, and opt-outs by reply. */
export async function registerSuppressionPages(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  const db = deps.services.db.kysely;
  const show = async (request: Parameters<typeof ctxOf>[0], reply: Parameters<typeof sendPage>[0], notice?: Notice, status = 200, search = '') =>
    sendPage(reply, await suppressionsPage(deps, ctxOf(request), search, notice), status);

  app.get('/suppressions', async (request, reply) => {
    const query = request.query as Record<string, string>;
    return show(request, reply, NOTICES[query.notice ?? ''], 200, query.q ?? '');
  });

  app.post('/suppressions', async (request, reply) => {
    const entry = checkSuppressionEntry(deps.services.platforms, { platform: field(request.body, 'platform'), recipient: field(request.body, 'recipient'), note: field(request.body, 'note') }, 'form');
    if (isEntryProblem(entry)) return show(request, reply, { kind: 'error', text: entry.message.replace(/^form\./, '') }, 422);
    await suppressRecipients(deps.services, owner(ctxOf(request)), [entry], 'dashboard');
    return redirectTo(reply, '/dashboard/suppressions?notice=added');
  });

  app.post('/suppressions/remove', async (request, reply) => {
    await deleteSuppression(db, owner(ctxOf(request)), field(request.body, 'id'));
    return redirectTo(reply, '/dashboard/suppressions?notice=removed');
  });

  app.post('/suppressions/opt-outs', async (request, reply) => {
    let keywords: string[];
    try {
      keywords = checkOwnKeywords(field(request.body, 'keywords').split(',').map((k) => k.trim()).filter((k) => k !== ''));
    } catch (error) {
      return show(request, reply, { kind: 'error', text: (error as Error).message }, 422);
    }
    await writeOptOutSettings(db, owner(ctxOf(request)), { enabled: field(request.body, 'enabled') === '1', keywords }, Date.now());
    return redirectTo(reply, '/dashboard/suppressions?notice=saved');
  });

  // A pasted file is larger than the other forms: this route alone reads bodies up to IMPORT_BODY_LIMIT.
  await app.register(async (scope) => {
    scope.removeContentTypeParser('application/x-www-form-urlencoded');
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: IMPORT_BODY_LIMIT }, (_request, body, done) => {
      done(null, parseForm(typeof body === 'string' ? body : body.toString('utf8')));
    });
    scope.post('/suppressions/import', async (request, reply) => {
      const fallback = field(request.body, 'platform') || '*';
      let rows;
      try {
        rows = readSuppressionCsv(field(request.body, 'csv'), fallback);
      } catch (error) {
        if (error instanceof CsvError) return show(request, reply, { kind: 'error', text: `CSV: ${error.message}` }, 422);
        throw error;
      }
      const entries: NewSuppression[] = [];
      const rejected: string[] = [];
      for (const row of rows) {
        const entry = checkSuppressionEntry(deps.services.platforms, row, 'row');
        if (isEntryProblem(entry)) rejected.push(`row ${row.row}: ${entry.message.replace(/^row\./, '')}`);
        else entries.push(entry);
      }
      for (let start = 0; start < entries.length; start += MAX_SUPPRESSIONS_PER_CALL) {
        await suppressRecipients(deps.services, owner(ctxOf(request)), entries.slice(start, start + MAX_SUPPRESSIONS_PER_CALL), 'import');
      }
      const text = `${count(entries.length)} listed, ${count(rejected.length)} rejected, of ${count(rows.length)} ${rows.length === 1 ? 'row' : 'rows'}.${rejected.length > 0 ? ` ${rejected.slice(0, 10).join('; ')}${rejected.length > 10 ? '; …' : ''}` : ''}`;
      return show(request, reply, { kind: rejected.length > 0 ? 'error' : 'ok', text }, rejected.length > 0 ? 422 : 200);
    });
  });
}
