import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import swaggerUi from '@fastify/swagger-ui';
import { asOpenApi30 } from './docs-openapi30.js';
import { addExampleBodies } from './openapi-examples.js';

/** Where the interactive API docs live. */
export const DOCS_PREFIX = '/docs';

/**
 * The guide's pages in the project's repository, by subject. The OpenAPI document (and so /docs) lists
 * them: the reference says what each field is, the pages say how things behave and why.
 */
export const GUIDE_PAGES: ReadonlyArray<readonly [path: string, subject: string]> = [
  ['docs/api.md', 'the API in prose: every endpoint with curl, errors, limits, idempotency, the message log'],
  ['docs/sending.md', 'scheduled sends (send_at), cancel_on_reply, live delivery per platform, sending like a person'],
  ['docs/replies-and-receipts.md', 'replies to a note (listen), read and played receipts'],
  ['docs/senders.md', 'senders and their health, recipients checked, WhatsApp sessions, Telegram accounts'],
  ['docs/proxies.md', "a proxy per sender: schemes, session.proxy, PATCH /senders/{id}, OUTBOUND_PROXY, fail closed, private addresses"],
  ['docs/sandbox.md', "sk_test_ keys: the recipients that choose an outcome, the service's own sample"],
  ['docs/webhooks.md', 'endpoints, events, signatures, delivery and retries'],
  ['docs/mcp.md', 'the MCP server for AI agents: voicenote mcp (stdio), POST /mcp, the tools'],
  ['docs/dashboard.md', 'the /dashboard pages'],
  ['docs/cli.md', 'the voicenote command: accounts, keys, send (one note or a CSV file), backup, rhythm'],
  ['docs/operations.md', 'running it: modes, configuration, retention, metrics, delivery under faults'],
  ['docs/deploy.md', 'deployment: systemd, reverse proxy and TLS, sizing, backups, upgrades'],
  ['docs/security.md', 'sign-in, files at rest, refused addresses'],
  ['docs/how-it-works.md', 'architecture, audio, fairness between accounts, speed'],
  ['docs/platforms.md', 'what each platform is sent, and why (with sources)'],
  ['docs/development.md', 'tests, CI, benchmarks'],
];

/** The OpenAPI document's info.description: what the service does, and where its guide is. */
export const API_DESCRIPTION = [
  'Deliver pre-recorded audio as native voice notes on LinkedIn, Telegram and WhatsApp.',
  '',
  "The guide is in the project's repository: README.md to start, then these pages of docs/:",
  '',
  ...GUIDE_PAGES.map(([path, subject]) => `- \`${path}\`: ${subject}`),
].join('\n');

/** The shipped icon (assets/brand/), two folders above this file in src/api/ and in dist/api/. */
export const FAVICON_ICO = readFileSync(new URL('../../assets/brand/favicon.ico', import.meta.url));

/** Our name as the top bar's logo, in place of the UI's default (Fastify's). */
const LOGO_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="190" height="40" viewBox="0 0 190 40" role="img" aria-label="voicenote">
<circle cx="20" cy="20" r="15" fill="#1f6feb"/>
<path d="M12 20h2M16 15v10M20 11v18M24 15v10M28 20h0" stroke="#fff" stroke-width="2.5" stroke-linecap="round"/>
<text x="44" y="28" font-family="system-ui,-apple-system,Segoe UI,Roboto,sans-serif" font-size="24" font-weight="700" fill="#fff">voicenote</text>
</svg>`;

/**
 * Shown from the first paint: the top bar holds our name at once (the UI puts its logo in only after
 * its script has run), and no link to another spec URL is offered.
 */
const THEME_CSS = `
.swagger-ui .topbar { background-color: #0d1117; padding: 6px 0; }
.swagger-ui .topbar .download-url-wrapper { display: none; }
`;

/**
 * GET /docs: Swagger UI over the served OpenAPI document, named voicenote. Everything it loads is
 * served by this process (no CDN), so it works without internet.
 */
export async function registerDocs(app: FastifyInstance): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: DOCS_PREFIX,
    logo: { type: 'image/svg+xml', content: Buffer.from(LOGO_SVG), href: DOCS_PREFIX, target: '_self' },
    theme: {
      title: 'voicenote API',
      css: [{ filename: 'voicenote.css', content: THEME_CSS }],
      favicon: [{ filename: 'favicon.ico', rel: 'icon', sizes: '32x32', type: 'image/x-icon', content: FAVICON_ICO }],
    },
    // The UI reads 3.0 far faster than 3.1 (see docs-openapi30.ts); /api/v1/openapi.json stays 3.1.
    // Example bodies name the service's sample on the address the docs were loaded from (openapi-examples.ts).
    transformSpecification: (document: Record<string, unknown>, request: FastifyRequest) =>
      addExampleBodies(asOpenApi30(document), `${request.protocol}://${request.host}`),
    uiConfig: {
      // The document is ours and small: show it whole, without asking a validator on the internet.
      docExpansion: 'list',
      defaultModelsExpandDepth: 0,
      tryItOutEnabled: false,
    },
  });
}

/** GET /favicon.ico: what browsers ask for on every page (the dashboard's, /docs): our icon, not a 404. */
export function registerFavicon(app: FastifyInstance): void {
  app.get('/favicon.ico', { schema: { hide: true } }, async (_request, reply) =>
    reply.header('Content-Type', 'image/x-icon').header('Cache-Control', 'public, max-age=86400').send(FAVICON_ICO),
  );
}
