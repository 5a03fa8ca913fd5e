import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { closeSharedAudio, connectedSandboxSession, defaultSendBody, startTestApp, STORAGE_LABEL, type TestApp } from './fixtures/app-harness.js';
import { BROWSER_SKIP_REASON, launchBrowser, type Browser } from './fixtures/browser.js';
import { ROOT } from './fixtures/cli-process.js';
import { createDashboardAccount, type DashboardAccount } from './fixtures/dashboard-harness.js';

/*
 * The dashboard's look, as a person sees it: every page in Chromium at a desktop (1280 px) and a
 * phone (390 px) width, a full-page screenshot of each kept under test-artifacts/dashboard/ (ignored
 * by git; CI keeps the folder), and an accessibility check on each (axe-core, injected into the
 * page: WCAG 2 A and AA rules) that fails on any violation. One browser for the whole file.
 */

const ARTIFACTS = path.join(ROOT, 'test-artifacts', 'dashboard');
const AXE_SOURCE = readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const WIDTHS = [1280, 390] as const;

interface Violation {
  id: string;
  help: string;
  nodes: { target: string[]; failureSummary?: string }[];
}

describe(`the dashboard's look: screenshots and accessibility (${STORAGE_LABEL})`, { skip: BROWSER_SKIP_REASON ?? false }, () => {
  let t: TestApp;
  let base: string;
  let browser: Browser;
  let account: DashboardAccount;
  const pages: { name: string; path: string }[] = [];

  before(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    t = await startTestApp({ env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    base = await t.listen();
    account = await createDashboardAccount(t);
    // Something on every page: a delivered and a failed voice note, a linked WhatsApp session, a webhook endpoint.
    const delivered = await t.send(account.testKey, { ...defaultSendBody('telegram', t.voiceUrl), caption: 'Hello from the look test' });
    const failed = await t.send(account.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '10000000002' });
    for (const res of [delivered, failed]) assert.equal(res.statusCode, 202, res.body);
    await t.waitForStatus(account.testKey, delivered.json().id, ['delivered', 'failed']);
    await t.waitForStatus(account.testKey, failed.json().id, ['delivered', 'failed']);
    await connectedSandboxSession(t, account.testKey);
    const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: account.testKey, body: { url: 'https://hooks.example.com/voicenote' } });
    assert.equal(hook.statusCode, 201, hook.body);
    pages.push(
      { name: 'usage', path: '/dashboard/usage' },
      { name: 'keys', path: '/dashboard/keys' },
      { name: 'messages', path: '/dashboard/messages' },
      { name: 'message-delivered', path: `/dashboard/messages/${delivered.json().id}` },
      { name: 'message-failed', path: `/dashboard/messages/${failed.json().id}` },
      { name: 'whatsapp', path: '/dashboard/whatsapp' },
      { name: 'webhooks', path: '/dashboard/webhooks' },
      { name: 'webhook', path: `/dashboard/webhooks/${hook.json().id}` },
      { name: 'account', path: '/dashboard/account' },
    );
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await t?.close();
    await closeSharedAudio();
  });

  /** Screenshot, then axe's WCAG 2 A/AA rules on the page as shown; the violations, described. */
  async function look(name: string, width: number): Promise<string[]> {
    const { page } = browser;
    await page.screenshot({ path: path.join(ARTIFACTS, `${name}-${width}.png`), fullPage: true });
    // Evaluated through the DevTools protocol: the dashboard's Content-Security-Policy rightly refuses an inline script.
    // (Expressions as text: this file is compiled without the DOM's types.)
    if (!(await page.evaluate<boolean>("'axe' in window"))) await page.evaluate(await AXE_SOURCE);
    const violations = await page.evaluate<Violation[]>(
      "axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } }).then((r) => r.violations)",
    );
    const problems = violations.map((v) => `${name} @${width}px: ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`);
    // Nothing wider than the window: a phone scrolls down, not sideways (wide tables scroll inside their own box).
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
    if (overflow > 0) problems.push(`${name} @${width}px: the page is ${overflow} px wider than the window`);
    return problems;
  }

  it('the sign-in page, at both widths', async () => {
    const problems: string[] = [];
    for (const width of WIDTHS) {
      await browser.page.setViewportSize({ width, height: 900 });
      await browser.page.goto(`${base}/dashboard/sign-in`);
      problems.push(...(await look('sign-in', width)));
    }
    assert.deepEqual(problems, []);
  });

  it('every signed-in page, at both widths', async () => {
    const { page } = browser;
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${base}/dashboard/sign-in`);
    await page.getByLabel('Email').fill(account.email);
    await page.getByLabel('Password').fill(account.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${base}/dashboard/usage`);
    const problems: string[] = [];
    for (const width of WIDTHS) {
      await page.setViewportSize({ width, height: 900 });
      for (const p of pages) {
        await page.goto(`${base}${p.path}`);
        problems.push(...(await look(p.name, width)));
      }
    }
    assert.deepEqual(problems, []);
  });

  it('a browser asking for /favicon.ico gets the icon, not a 404', async () => {
    const res = await browser.page.request.get(`${base}/favicon.ico`);
    assert.equal(res.status(), 200);
    assert.equal(res.headers()['content-type'], 'image/x-icon');
  });
});
