import type { FastifyInstance } from 'fastify';
import { deleteOtherDashboardSessions, setDashboardSessionEnv, setPasswordHash } from '../../store/dashboard-sessions.js';
import { ctxOf, field, redirectTo, type DashboardDeps } from '../deps.js';
import { html } from '../html.js';
import { page, sendPage, type Notice } from '../layout.js';
import { hashPasswordAsync, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, scryptParameters, verifyPasswordAsync } from '../passwords.js';
import type { DashboardContext } from '../context.js';

const NOTICES: Record<string, Notice> = {
  password_changed: { kind: 'ok', text: 'Password changed. Other sign-ins of this account were signed out.' },
};

function accountPage(deps: DashboardDeps, ctx: DashboardContext, notice?: Notice) {
  const a = ctx.account;
  return page(
    ctx,
    { sections: deps.sections, section: 'account', title: 'Account', path: '/dashboard/account', notice },
    html`<dl class="facts">
<dt>Name</dt><dd>${a.name}</dd>
<dt>Email</dt><dd>${a.email ?? '—'}</dd>
<dt>Account id</dt><dd><code>${a.id}</code></dd>
<dt>Plan</dt><dd>${a.plan}</dd>
</dl>
<p><a href="/dashboard/rhythm">Sending rhythm</a>: each sender's daily cap and warm-up.</p>
<p><a href="/dashboard/suppressions">Suppression list</a>: recipients never written to again, and opt-outs by reply.</p>
<section aria-labelledby="pw-title">
<h2 id="pw-title">Change password</h2>
<form method="post" action="/dashboard/account/password" class="stack">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<label for="current-password">Current password</label>
<input id="current-password" name="current_password" type="password" autocomplete="current-password" required>
<label for="new-password">New password (at least ${MIN_PASSWORD_LENGTH} characters)</label>
<input id="new-password" name="new_password" type="password" autocomplete="new-password" minlength="${MIN_PASSWORD_LENGTH}" required>
<label for="confirm-password">New password again</label>
<input id="confirm-password" name="confirm_password" type="password" autocomplete="new-password" minlength="${MIN_PASSWORD_LENGTH}" required>
<button type="submit">Change password</button>
</form>
</section>`,
  );
}

export function registerAccountPages(app: FastifyInstance, deps: DashboardDeps): void {
  const db = deps.services.db.kysely;

  app.get('/account', async (request, reply) => {
    const code = (request.query as Record<string, string>).notice ?? '';
    return sendPage(reply, accountPage(deps, ctxOf(request), NOTICES[code]));
  });

  app.post('/account/password', async (request, reply) => {
    const ctx = ctxOf(request);
    const current = field(request.body, 'current_password');
    const next = field(request.body, 'new_password');
    const refuse = (text: string, status: number) => sendPage(reply, accountPage(deps, ctx, { kind: 'error', text }), status);
    if (!(await verifyPasswordAsync(current, ctx.account.password_hash))) return refuse('The current password is wrong.', 401);
    if (next.length < MIN_PASSWORD_LENGTH || next.length > MAX_PASSWORD_LENGTH) {
      return refuse(`The new password must have ${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters.`, 422);
    }
    if (next !== field(request.body, 'confirm_password')) return refuse('The two new passwords differ.', 422);
    await setPasswordHash(db, ctx.account.id, await hashPasswordAsync(next, scryptParameters(deps.services.config.passwordHashCost)));
    await deleteOtherDashboardSessions(db, ctx.account.id, ctx.token);
    return redirectTo(reply, '/dashboard/account?notice=password_changed');
  });

  // The environment the dashboard acts in is part of the sign-in, so every page follows the switch.
  app.post('/env', async (request, reply) => {
    const ctx = ctxOf(request);
    const env = field(request.body, 'env') === 'live' ? 'live' : 'test';
    await setDashboardSessionEnv(db, ctx.token, env);
    const back = field(request.body, 'back');
    // Only our own pages: a crafted `back` must not turn this into an open redirect.
    return redirectTo(reply, /^\/dashboard(\/[a-z_-]+)*$/.test(back) ? back : '/dashboard');
  });
}
