import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, connectedSandboxSession, defaultSendBody, startTestApp, STORAGE_LABEL, type TestApp } from './fixtures/app-harness.js';
import { BROWSER_SKIP_REASON, launchBrowser, type Browser } from './fixtures/browser.js';
import { ROOT } from './fixtures/cli-process.js';
import { createDashboardAccount, type DashboardAccount } from './fixtures/dashboard-harness.js';
import { updatePlan } from '../src/store/accounts.js';

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
  const ids: { delivered: string; failedBeforeAudio: string; hook: string } = { delivered: '', failedBeforeAudio: '', hook: '' };

  before(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    t = await startTestApp({ env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    base = await t.listen();
    account = await createDashboardAccount(t);
    await updatePlan(t.app.services.db.kysely, account.accountId, { plan: 'starter', quota: 10_000 });
    t.audio.route('/gone.ogg', { kind: 'status', status: 404 });
    const gone = await t.send(account.testKey, { ...defaultSendBody('telegram', t.audio.url('/gone.ogg')) });
    assert.equal(gone.statusCode, 202, gone.body);
    ids.failedBeforeAudio = gone.json().id;
    await t.waitForStatus(account.testKey, ids.failedBeforeAudio, ['failed']);
    // Something on every page: a delivered and a failed voice note, a linked WhatsApp session, a webhook endpoint.
    const delivered = await t.send(account.testKey, { ...defaultSendBody('telegram', t.voiceUrl), caption: 'Hello from the look test' });
    const failed = await t.send(account.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '10000000002' });
    for (const res of [delivered, failed]) assert.equal(res.statusCode, 202, res.body);
    await t.waitForStatus(account.testKey, delivered.json().id, ['delivered', 'failed']);
    await t.waitForStatus(account.testKey, failed.json().id, ['delivered', 'failed']);
    await connectedSandboxSession(t, account.testKey);
    const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: account.testKey, body: { url: 'https://hooks.example.com/voicenote' } });
    assert.equal(hook.statusCode, 201, hook.body);
    ids.delivered = delivered.json().id;
    ids.hook = hook.json().id;
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
      { name: 'rhythm', path: '/dashboard/rhythm' },
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

  it('the details people notice', async () => {
    const { page } = browser;
    await page.setViewportSize({ width: 1280, height: 900 });
    const text = (selector: string) => page.locator(selector).allInnerTexts();

    // Usage: the platforms' own spelling, thousands separators.
    await page.goto(`${base}/dashboard/usage`);
    const terms = await text('.card[data-env="test"] dt');
    assert.ok(terms.includes('LinkedIn') && terms.includes('WhatsApp') && terms.includes('Telegram'), terms.join(', '));
    assert.equal(await page.locator('.card[data-env="test"] [data-usage="quota"]').innerText(), '10,000');

    // Keys: Roll and Revoke side by side, dates on one line, revoking asks first.
    await page.goto(`${base}/dashboard/keys`);
    const row = page.locator('tr[data-key-id]').first();
    const roll = await row.getByRole('button', { name: /^Roll key/ }).boundingBox();
    const revoke = await row.getByRole('button', { name: /^Revoke key/ }).boundingBox();
    assert.ok(roll && revoke && Math.abs(roll.y - revoke.y) < 2, `Roll at ${roll?.y}, Revoke at ${revoke?.y}`);
    const created = await row.locator('time').first().boundingBox();
    assert.ok(created && created.height < 30, `a date on one line (${created?.height} px high)`);
    assert.match((await row.locator('time').first().innerText()), /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/, 'to the second');
    assert.match(String(await row.locator('form[action$="/revoke"]').getAttribute('data-confirm')), /^Revoke the key /);

    // Messages: the filters on one line.
    await page.goto(`${base}/dashboard/messages`);
    const boxes = await page.locator('form.filters > *').evaluateAll((els) => els.map((e) => (e as unknown as { getBoundingClientRect(): { top: number; bottom: number } }).getBoundingClientRect().bottom));
    assert.ok(Math.max(...boxes) - Math.min(...boxes) < 20, `one line: bottoms ${boxes.join(', ')}`);

    // A message page: caption, waveform under the converted file, attempts to the millisecond.
    await page.goto(`${base}/dashboard/messages/${ids.delivered}`);
    assert.equal(await page.locator('[data-field="caption"]').innerText(), 'Hello from the look test');
    const converted = page.locator('section[aria-labelledby="audio-converted"]');
    assert.equal(await converted.locator('svg.waveform').count(), 1, 'the waveform is the converted file\'s');
    assert.match(await converted.innerText(), /Waveform of the converted file/);
    assert.match(await page.locator('table time').first().innerText(), /:\d{2}\.\d{3} UTC$/);

    // A message whose only attempt failed before any audio: no "No audio yet".
    await page.goto(`${base}/dashboard/messages/${ids.failedBeforeAudio}`);
    const audioText = await page.locator('[data-audio="none"]').innerText();
    assert.doesNotMatch(audioText, /No audio yet/);
    assert.match(audioText, /failed before the audio was converted/);

    // Webhooks: a delivery still being tried offers no Resend.
    await page.goto(`${base}/dashboard/webhooks/${ids.hook}`);
    await page.getByRole('button', { name: 'Send test event to https://hooks.example.com/voicenote' }).click();
    await page.locator('tr[data-delivery-id][data-status="pending"]').first().waitFor();
    assert.equal(await page.locator('tr[data-status="pending"]').getByRole('button', { name: /^Resend/ }).count(), 0);

    // WhatsApp: the sessions table follows a linking to "connected" without a reload.
    await page.goto(`${base}/dashboard/whatsapp`);
    await page.getByRole('button', { name: 'Create a session' }).click();
    const sessionId = String(await page.locator('[data-session]').getAttribute('data-session'));
    const cell = page.locator(`tr[data-session-id="${sessionId}"] [data-field="status_text"]`);
    assert.equal(await cell.innerText(), 'waiting to be linked on the phone');
    const scanned = await t.request({ method: 'POST', url: `/api/v1/whatsapp/sessions/${sessionId}/simulate`, key: account.testKey, body: { event: 'scan' } });
    assert.equal(scanned.statusCode, 200, scanned.body);
    await page.locator(`tr[data-session-id="${sessionId}"][data-status="connected"]`).waitFor();
    assert.equal(await cell.innerText(), 'connected');
    // A pairing code has nothing to scan.
    await page.getByLabel(/link by pairing code/).fill('14155550123');
    await page.getByRole('button', { name: 'Get a pairing code' }).click();
    const status = await page.locator('.linking [data-field="status_text"]').innerText();
    assert.doesNotMatch(status, /scan/);
    const pairingId = String(await page.locator('[data-session]').getAttribute('data-session'));
    assert.doesNotMatch(await page.locator(`tr[data-session-id="${pairingId}"] [data-field="status_text"]`).innerText(), /scan/);
  });

  it('a browser asking for /favicon.ico gets the icon, not a 404', async () => {
    const res = await browser.page.request.get(`${base}/favicon.ico`);
    assert.equal(res.status(), 200);
    assert.equal(res.headers()['content-type'], 'image/x-icon');
  });
});
