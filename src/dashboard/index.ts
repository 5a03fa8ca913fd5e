import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../services.js';
import { purgeExpiredDashboardSessions } from '../store/dashboard-sessions.js';
import { loadAssets } from './assets.js';
import { crossOrigin, loadContext, sameToken, toSignIn } from './context.js';
import { field, parseForm, redirectTo, type DashboardDeps } from './deps.js';
import { html } from './html.js';
import { barePage, sendPage, type Section } from './layout.js';
import { registerAccountPages } from './pages/account.js';
import { registerKeyPages } from './pages/keys.js';
import { registerMessagePages } from './pages/messages.js';
import { registerSignInPages, registerSignOut } from './pages/sign-in.js';
import { registerUsagePage } from './pages/usage.js';
import { registerWebhookPages } from './pages/webhooks.js';
import { registerSenderPages } from './pages/senders.js';
import { registerWhatsappPages } from './pages/whatsapp.js';
import { registerTelegramPages } from './pages/telegram.js';
import { registerRhythmPages } from './pages/rhythm.js';
import { registerSuppressionPages } from './pages/suppressions.js';

export const DASHBOARD_PREFIX = '/dashboard';
const FORM_BODY_LIMIT = 16 * 1024;
const PURGE_INTERVAL_MS = 60 * 60 * 1000;

// Nothing on these pages comes from elsewhere: no inline script or style, images only ours or data:
// URIs (the WhatsApp QR), no framing.
const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'same-origin',
};

const errorPage = (title: string, text: string) =>
  barePage(title, html`<p>${text}</p><p><a href="/dashboard">Back to the dashboard</a></p>`);

/**
 * The account dashboard at /dashboard: server-rendered pages acting for the signed-in account in the
 * environment it chose, through the same store and service functions as the API.
 */
export async function registerDashboard(app: FastifyInstance, services: Services): Promise<void> {
  const assets = loadAssets();
  const sections = new Set<Section>(['usage', 'keys', 'messages', 'whatsapp', 'telegram', 'senders', 'webhooks', 'account']);
  const deps: DashboardDeps = { services, sections };

  const purge = setInterval(() => {
    purgeExpiredDashboardSessions(services.db.kysely, Date.now()).catch((err: unknown) => services.logger.warn({ err }, 'dashboard session purge failed'));
  }, PURGE_INTERVAL_MS);
  purge.unref();
  app.addHook('onClose', async () => clearInterval(purge));

  await app.register(
    async (dash) => {
      dash.decorateRequest('dashboard', null);
      // Pages are not part of the API: keep them out of the OpenAPI document.
      dash.addHook('onRoute', (route) => {
        route.schema = { ...(route.schema ?? {}), hide: true };
      });
      dash.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT }, (_request, body, done) => {
        done(null, parseForm(typeof body === 'string' ? body : body.toString('utf8')));
      });
      dash.addHook('onSend', async (_request, reply, payload) => {
        reply.headers(SECURITY_HEADERS);
        return payload;
      });
      dash.setNotFoundHandler((_request, reply) => sendPage(reply, errorPage('Not found', 'There is no such page.'), 404));
      dash.setErrorHandler((error: { statusCode?: number }, request, reply) => {
        const status = typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
        if (status === 500) request.log.error({ err: error }, 'dashboard error');
        return sendPage(reply, errorPage(status === 500 ? 'Something went wrong' : 'Bad request', status === 500 ? 'The page could not be shown; try again.' : 'The request could not be read.'), status);
      });

      dash.get<{ Params: { file: string } }>('/assets/:file', async (request, reply) => {
        const asset = assets.get(request.params.file);
        if (!asset) return sendPage(reply, errorPage('Not found', 'There is no such file.'), 404);
        return reply.header('Content-Type', asset.contentType).header('Cache-Control', 'public, max-age=300').send(asset.body);
      });

      // Before sign-in: the form and its POST (which checks a token of its own).
      registerSignInPages(dash, deps);

      // Everything else needs a sign-in, and every change needs the sign-in's CSRF token.
      await dash.register(async (signedIn) => {
        signedIn.addHook('preHandler', async (request: FastifyRequest, reply: FastifyReply) => {
          const ctx = await loadContext(services, request);
          if (!ctx) return toSignIn(reply);
          request.dashboard = ctx;
          if (request.method !== 'GET' && request.method !== 'HEAD') {
            const token = field(request.body, '_csrf') || (request.headers['x-csrf-token'] as string | undefined);
            if (crossOrigin(request) || !sameToken(token, ctx.csrf)) {
              return sendPage(reply, errorPage('Refused', 'This form expired or did not come from this site: nothing was changed. Reload the page and try again.'), 403);
            }
          }
          return undefined;
        });
        signedIn.get('/', async (_request, reply) => redirectTo(reply, '/dashboard/usage'));
        registerSignOut(signedIn, deps);
        registerAccountPages(signedIn, deps);
        registerKeyPages(signedIn, deps);
        registerUsagePage(signedIn, deps);
        registerMessagePages(signedIn, deps);
        registerWhatsappPages(signedIn, deps);
        registerTelegramPages(signedIn, deps);
        registerSenderPages(signedIn, deps);
        registerWebhookPages(signedIn, deps);
        registerRhythmPages(signedIn, deps);
        await registerSuppressionPages(signedIn, deps);
      });
    },
    { prefix: DASHBOARD_PREFIX },
  );
}
