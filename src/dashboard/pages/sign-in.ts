import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { accountsByEmail, deleteDashboardSession, insertDashboardSession, setPasswordHash } from '../../store/dashboard-sessions.js';
import { readCookies, overTls, serializeCookie } from '../cookies.js';
import { loadContext, sameToken, SESSION_COOKIE, SESSION_TTL_MS, SIGN_IN_COOKIE, crossOrigin } from '../context.js';
import { field, redirectTo, type DashboardDeps } from '../deps.js';
import { html } from '../html.js';
import { barePage, sendPage, type Notice } from '../layout.js';
import { hashPasswordAsync, MAX_PASSWORD_LENGTH, needsRehash, scryptParameters, verifyPasswordAsync } from '../passwords.js';
import { SignInLimiter } from '../sign-in-limiter.js';

const SIGN_IN_FORM_TTL_SECONDS = 60 * 60;

function signInForm(formToken: string, email: string, notice?: Notice) {
  return barePage(
    'Sign in',
    html`<form method="post" action="/dashboard/sign-in" class="stack sign-in">
<input type="hidden" name="_csrf" value="${formToken}">
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required value="${email}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
<p class="hint">The owner login is printed once at the first start. Other accounts get theirs from <code>voicenote accounts create --email … --password …</code>.</p>`,
    notice,
  );
}

function waitText(seconds: number): string {
  if (seconds < 60) return `${seconds} second${seconds === 1 ? '' : 's'}`;
  const minutes = Math.ceil(seconds / 60);
  return `${minutes} minute${minutes === 1 ? '' : 's'}`;
}

/** Shows the form with a fresh form token (the pre-sign-in CSRF token) in a cookie of its own. */
function showForm(request: FastifyRequest, reply: FastifyReply, status: number, email = '', notice?: Notice): FastifyReply {
  const formToken = randomBytes(24).toString('base64url');
  reply.header('Set-Cookie', serializeCookie(SIGN_IN_COOKIE, formToken, { maxAgeSeconds: SIGN_IN_FORM_TTL_SECONDS, secure: overTls(request), sameSite: 'Strict' }));
  return sendPage(reply, signInForm(formToken, email, notice), status);
}

export function registerSignInPages(app: FastifyInstance, deps: DashboardDeps): void {
  const { services } = deps;
  const db = services.db.kysely;
  const hashParameters = scryptParameters(services.config.passwordHashCost);
  const limiter = new SignInLimiter({ redis: services.redis, keyPrefix: services.redisKeyPrefix });

  app.get('/sign-in', async (request, reply) => {
    if (await loadContext(services, request)) return redirectTo(reply, '/dashboard');
    return showForm(request, reply, 200);
  });

  app.post('/sign-in', async (request, reply) => {
    const email = field(request.body, 'email').trim().slice(0, 320);
    const password = field(request.body, 'password');
    // Login CSRF: the form must come from our own page (its token matches the cookie set with it).
    if (crossOrigin(request) || !sameToken(field(request.body, '_csrf'), readCookies(request).get(SIGN_IN_COOKIE) ?? '')) {
      return showForm(request, reply, 403, email, { kind: 'error', text: 'This form expired or did not come from this site. Please sign in again.' });
    }
    const decision = await limiter.attempt(request.ip, email);
    if (!decision.allowed) {
      reply.header('Retry-After', String(decision.retryAfter));
      return showForm(request, reply, 429, email, { kind: 'error', text: `Too many sign-in attempts. Try again in ${waitText(decision.retryAfter)}.` });
    }
    let account;
    try {
      if (email !== '' && password !== '' && password.length <= MAX_PASSWORD_LENGTH) {
        const candidates = await accountsByEmail(db, email);
        if (candidates.length === 0) await verifyPasswordAsync(password, null, hashParameters);
        for (const candidate of candidates) {
          if (await verifyPasswordAsync(password, candidate.password_hash)) {
            account = candidate;
            break;
          }
        }
      }
    } catch (error) {
      // This address's turn for this email is given back, whatever went wrong (failed() and succeeded() give it back too).
      await limiter.release(request.ip, email);
      throw error;
    }
    if (!account) {
      await limiter.failed(request.ip, email);
      request.log.info({ event: 'dashboard_sign_in_failed' }, 'dashboard sign-in refused');
      return showForm(request, reply, 401, email, { kind: 'error', text: 'Wrong email or password.' });
    }
    await limiter.succeeded(request.ip, email);
    // A hash made with older scrypt parameters is replaced now that the password is known (sessions stay).
    if (needsRehash(account.password_hash, hashParameters)) {
      await setPasswordHash(db, account.id, await hashPasswordAsync(password, hashParameters));
      request.log.info({ event: 'dashboard_password_rehashed', account_id: account.id }, 'password hash upgraded to the current scrypt parameters');
    }
    const token = randomBytes(32).toString('base64url');
    await insertDashboardSession(db, { token, accountId: account.id, env: 'test', now: Date.now(), ttlMs: SESSION_TTL_MS });
    const secure = overTls(request);
    reply.header('Set-Cookie', [
      serializeCookie(SESSION_COOKIE, token, { maxAgeSeconds: SESSION_TTL_MS / 1000, secure, sameSite: 'Lax' }),
      serializeCookie(SIGN_IN_COOKIE, '', { maxAgeSeconds: 0, secure, sameSite: 'Strict' }),
    ]);
    request.log.info({ event: 'dashboard_sign_in', account_id: account.id }, 'dashboard sign-in');
    return redirectTo(reply, '/dashboard');
  });
}

/** Sign-out (behind the CSRF check like every other change): the stored session goes, the cookie too. */
export function registerSignOut(app: FastifyInstance, deps: DashboardDeps): void {
  app.post('/sign-out', async (request, reply) => {
    const ctx = request.dashboard!;
    await deleteDashboardSession(deps.services.db.kysely, ctx.token);
    reply.header('Set-Cookie', serializeCookie(SESSION_COOKIE, '', { maxAgeSeconds: 0, secure: overTls(request), sameSite: 'Lax' }));
    return redirectTo(reply, '/dashboard/sign-in');
  });
}
