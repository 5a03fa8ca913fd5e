import type { FastifyReply } from 'fastify';
import type { DashboardContext } from './context.js';
import { html, type Html } from './html.js';

export type Section = 'usage' | 'keys' | 'messages' | 'whatsapp' | 'telegram' | 'senders' | 'webhooks' | 'account';

const NAV: { section: Section; label: string; href: string }[] = [
  { section: 'usage', label: 'Usage', href: '/dashboard/usage' },
  { section: 'keys', label: 'API keys', href: '/dashboard/keys' },
  { section: 'messages', label: 'Messages', href: '/dashboard/messages' },
  { section: 'whatsapp', label: 'WhatsApp', href: '/dashboard/whatsapp' },
  { section: 'telegram', label: 'Telegram', href: '/dashboard/telegram' },
  { section: 'senders', label: 'Senders', href: '/dashboard/senders' },
  { section: 'webhooks', label: 'Webhooks', href: '/dashboard/webhooks' },
  { section: 'account', label: 'Account', href: '/dashboard/account' },
];

/** Sections hidden until their backing pieces exist (see registerDashboard). */
export interface LayoutOptions {
  sections: ReadonlySet<Section>;
}

export interface Notice {
  kind: 'ok' | 'error';
  text: string;
}

function noticeBlock(notice: Notice | undefined): Html {
  if (!notice) return html``;
  // role=status is read out by screen readers when the page loads with a message; errors are alerts.
  return notice.kind === 'error'
    ? html`<p class="notice notice-error" role="alert">${notice.text}</p>`
    : html`<p class="notice notice-ok" role="status">${notice.text}</p>`;
}

function shell(title: string, header: Html, body: Html): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · voicenote</title>
<link rel="stylesheet" href="/dashboard/assets/dashboard.css">
<script src="/dashboard/assets/dashboard.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
${header}
<main id="main" tabindex="-1">
${body}
</main>
</body>
</html>
`;
}

/** A page of the signed-in dashboard: navigation, environment switch, sign-out. */
export function page(
  ctx: DashboardContext,
  options: LayoutOptions & { section: Section; title: string; path: string; notice?: Notice | undefined },
  body: Html,
): Html {
  const nav = NAV.filter((item) => options.sections.has(item.section));
  const other = ctx.env === 'test' ? 'live' : 'test';
  const header = html`<header class="top">
<p class="brand"><a href="/dashboard">voicenote</a></p>
<nav aria-label="Dashboard">
<ul>${nav.map((item) => html`<li><a href="${item.href}"${item.section === options.section ? html` aria-current="page"` : ''}>${item.label}</a></li>`)}</ul>
</nav>
<form method="post" action="/dashboard/env" class="env-switch">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<input type="hidden" name="back" value="${options.path}">
<input type="hidden" name="env" value="${other}">
<span class="env env-${ctx.env}" id="env-now">${ctx.env === 'test' ? 'Test (sandbox)' : 'Live'}</span>
<button type="submit" aria-describedby="env-now">Switch to ${other === 'test' ? 'test' : 'live'}</button>
</form>
<form method="post" action="/dashboard/sign-out" class="sign-out">
<input type="hidden" name="_csrf" value="${ctx.csrf}">
<span class="who">${ctx.account.email ?? ctx.account.name}</span>
<button type="submit">Sign out</button>
</form>
</header>`;
  return shell(options.title, header, html`<h1>${options.title}</h1>
${noticeBlock(options.notice)}
${body}`);
}

/** A page without the signed-in chrome (sign-in, errors before sign-in). */
export function barePage(title: string, body: Html, notice?: Notice): Html {
  return shell(title, html`<header class="top"><p class="brand">voicenote</p></header>`, html`<h1>${title}</h1>
${noticeBlock(notice)}
${body}`);
}

/** Sends a page: no caching (pages show secrets and account data), HTML content type. */
export function sendPage(reply: FastifyReply, markup: Html, status = 200): FastifyReply {
  return reply.code(status).header('Content-Type', 'text/html; charset=utf-8').header('Cache-Control', 'no-store').send(markup.text);
}
