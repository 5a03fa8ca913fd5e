import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, defaultSendBody, startTestApp, STORAGE_LABEL, type TestApp } from './fixtures/app-harness.js';
import { Webhook } from 'standardwebhooks';
import { sandboxPairingCode } from '../src/platforms/whatsapp/sessions.js';
import { WEBHOOK_EVENT_TYPES } from '../src/store/webhook-outbox.js';
import { BROWSER_SKIP_REASON, launchBrowser, until, type Browser } from './fixtures/browser.js';
import { startWebhookReceiver } from './fakes/webhook-receiver.js';
import { createDashboardAccount, type DashboardAccount } from './fixtures/dashboard-harness.js';

// The dashboard as a person uses it: real Chromium, real HTTP on loopback, the API beside it.
describe(`dashboard in a browser (${STORAGE_LABEL})`, { skip: BROWSER_SKIP_REASON ?? false }, () => {
  let t: TestApp;
  let base: string;
  let browser: Browser;
  let account: DashboardAccount;

  const api = async (key: string, path: string, init: { method?: string; body?: unknown } = {}) => {
    const res = await fetch(`${base}/api/v1${path}`, {
      method: init.method ?? 'GET',
      headers: { authorization: `Bearer ${key}`, ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const heading = () => browser.page.locator('h1').innerText();

  before(async () => {
    // Sandbox sessions wait for a simulated scan here, so the QR stays on screen however slow the machine is.
    t = await startTestApp({ env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    base = await t.listen();
    account = await createDashboardAccount(t);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await t?.close();
    await closeSharedAudio();
  });

  it('sends a visitor to the sign-in form, and a wrong password back to it', async () => {
    const { page } = browser;
    await page.goto(`${base}/dashboard/keys`);
    assert.equal(new URL(page.url()).pathname, '/dashboard/sign-in');
    await page.getByLabel('Email').fill(account.email);
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'Wrong email or password.' }).waitFor();
    assert.equal(await heading(), 'Sign in');
  });

  it('signs in with the email and password and lands on the usage page', async () => {
    const { page } = browser;
    await page.getByLabel('Email').fill(account.email);
    await page.getByLabel('Password').fill(account.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${base}/dashboard/usage`);
    assert.equal(await heading(), 'Usage');
    const cookies = await browser.context.cookies(`${base}/dashboard`);
    const session = cookies.find((c) => c.name === 'vn_session');
    assert.ok(session, 'a session cookie');
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, 'Lax');
    // Script cannot read it.
    assert.equal(await page.evaluate<boolean>("document.cookie.includes('vn_session')"), false);
  });

  it('labels every control, starts keyboard users at a skip link, and has one heading per page', async () => {
    const { page } = browser;
    for (const path of ['/dashboard/usage', '/dashboard/keys', '/dashboard/messages', '/dashboard/whatsapp', '/dashboard/webhooks', '/dashboard/account']) {
      await page.goto(`${base}${path}`);
      // Controls without an accessible name, as a screen reader would meet them.
      const unlabelled = await page.evaluate<string[]>(`[...document.querySelectorAll('input:not([type=hidden]), select, textarea, button')]
        .filter((el) => !((el.labels && el.labels.length > 0) || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby') || (el.tagName === 'BUTTON' && el.textContent.trim() !== '')))
        .map((el) => el.outerHTML.slice(0, 80))`);
      assert.deepEqual(unlabelled, [], path);
      assert.equal(await page.locator('h1').count(), 1, path);
      assert.equal(await page.locator('html').getAttribute('lang'), 'en');
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate<string>('document.activeElement.textContent'), 'Skip to content', path);
    }
  });

  it('creates a key, rolls it, and both work against the API', async () => {
    const { page } = browser;
    await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.waitForURL(`${base}/dashboard/keys`);
    await page.getByLabel('Environment').selectOption('test');
    await page.getByRole('button', { name: 'Create key' }).click();
    const first = (await page.locator('#new-secret').innerText()).trim();
    assert.match(first, /^sk_test_[0-9A-Za-z]{32}$/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.locator('.copied').filter({ hasText: 'Copied.' }).waitFor();
    assert.equal(await page.evaluate<string>('navigator.clipboard.readText()'), first);
    assert.equal((await api(first, '/usage')).status, 200);

    // The new key's row, by its display prefix; roll it with the default grace.
    const prefix = first.slice(0, 12);
    await page.getByRole('button', { name: `Roll key ${prefix}` }).click();
    // Only the roll's answer says this: the secret read next is the successor's, not the one on screen before.
    await page.getByText(`The key ${prefix}… keeps working until`).waitFor();
    const second = (await page.locator('#new-secret').innerText()).trim();
    assert.match(second, /^sk_test_[0-9A-Za-z]{32}$/);
    assert.notEqual(second, first);
    // No downtime: the old key still works, and the new one too.
    assert.equal((await api(first, '/usage')).status, 200);
    assert.equal((await api(second, '/usage')).status, 200);
    // Once the page is left, the secret is gone for good.
    await page.goto(`${base}/dashboard/keys`);
    assert.equal(await page.locator('#new-secret').count(), 0);
    assert.equal((await page.content()).includes(second), false);

    // Revoking asks first: dismissed, nothing happens; accepted, the key stops.
    page.once('dialog', (dialog) => void dialog.dismiss());
    await page.getByRole('button', { name: `Revoke key ${prefix}` }).click();
    assert.equal((await api(second, '/usage')).status, 200);
    await page.waitForTimeout(200);
    assert.equal(new URL(page.url()).search, '', 'not revoked when the question is dismissed');
    const asked = new Promise<string>((resolve) => page.once('dialog', (dialog) => (resolve(dialog.message()), void dialog.accept())));
    await page.getByRole('button', { name: `Revoke key ${prefix}` }).click();
    assert.match(await asked, /^Revoke the key sk_\w+…\?/);
    await page.getByRole('status').filter({ hasText: 'revoked' }).waitFor();
    assert.equal((await api(first, '/usage')).status, 401);
    assert.equal((await api(second, '/usage')).status, 200);
  });

  it('shows a new WhatsApp session QR at once and follows it to connected', async () => {
    const { page } = browser;
    await page.getByRole('link', { name: 'WhatsApp' }).click();
    await page.waitForURL(`${base}/dashboard/whatsapp`);
    await page.getByRole('button', { name: 'Create a session' }).click();
    const qr = page.getByRole('img', { name: /QR code/ });
    await qr.waitFor({ state: 'visible' });
    assert.match((await qr.getAttribute('src')) ?? '', /^data:image\/png;base64,/);
    const panel = page.locator('[data-poll]');
    const sessionId = (await panel.getAttribute('data-session'))!;
    await panel.locator('[data-field="status_text"]').filter({ hasText: 'waiting for the scan' }).waitFor();

    // The phone scans (the sandbox's simulated scan, through the API with a key of the same account).
    const scanned = await api(account.testKey, `/whatsapp/sessions/${sessionId}/simulate`, { method: 'POST', body: { event: 'scan' } });
    assert.equal(scanned.status, 200);
    await panel.locator('[data-field="status_text"]').filter({ hasText: 'connected' }).waitFor();
    await panel.locator('[data-field="phone"]').filter({ hasText: '+15550000000' }).waitFor();
    await qr.waitFor({ state: 'hidden' });

    await page.goto(`${base}/dashboard/whatsapp`);
    const row = page.locator(`tr[data-session-id="${sessionId}"]`);
    assert.match(await row.innerText(), /connected/);
    await page.getByRole('button', { name: `Delete session ${sessionId}` }).click();
    await page.getByRole('status').filter({ hasText: 'deleted' }).waitFor();
    assert.equal((await api(account.testKey, `/whatsapp/sessions/${sessionId}`)).status, 404);
  });

  it('links a Telegram account and names it by its @username, as the API and the table do', async () => {
    const { page } = browser;
    await page.goto(`${base}/dashboard/telegram`);
    await page.getByRole('button', { name: 'Link a Telegram account' }).click();
    const panel = page.locator('[data-poll]');
    const sessionId = (await panel.getAttribute('data-session'))!;
    const scanned = await api(account.testKey, `/telegram/sessions/${sessionId}/simulate`, { method: 'POST', body: { event: 'scan' } });
    assert.equal(scanned.status, 200);
    await panel.locator('[data-field="status_text"]').filter({ hasText: 'connected' }).waitFor();
    await panel.locator('[data-field="phone"]').filter({ hasText: 'as @voicenote_sandbox' }).waitFor();
    const row = page.locator(`tr[data-session-id="${sessionId}"] [data-field="phone_number"]`);
    await row.filter({ hasText: '@voicenote_sandbox' }).waitFor();
    assert.doesNotMatch(await panel.innerText(), /\+1555/);
  });

  it('links a sandbox WhatsApp session by pairing code instead of a QR', async () => {
    const { page } = browser;
    await page.goto(`${base}/dashboard/whatsapp`);
    await page.getByLabel(/pairing code: phone number/).fill('14155550123');
    await page.getByRole('button', { name: 'Get a pairing code' }).click();
    const code = page.locator('[data-pairing-code]');
    await code.waitFor();
    assert.equal(await code.innerText(), sandboxPairingCode('14155550123'));
    assert.equal(await page.getByRole('img', { name: /QR code/ }).count(), 0);
    const panel = page.locator('[data-poll]');
    const sessionId = (await panel.getAttribute('data-session'))!;
    const scanned = await api(account.testKey, `/whatsapp/sessions/${sessionId}/simulate`, { method: 'POST', body: { event: 'scan' } });
    assert.equal(scanned.status, 200);
    await panel.locator('[data-field="status_text"]').filter({ hasText: 'connected' }).waitFor();
    await code.waitFor({ state: 'hidden' });
  });

  it('switches between test and live resources', async () => {
    const { page } = browser;
    await page.getByRole('button', { name: 'Switch to live' }).click();
    // The switch answers with the same page: wait for its new content, not for a new address.
    await page.locator('#env-now').filter({ hasText: 'Live' }).waitFor();
    assert.equal(new URL(page.url()).pathname, '/dashboard/whatsapp');
    assert.match(await page.locator('main').innerText(), /Sessions \(live\)/);
    await page.getByRole('button', { name: 'Switch to test' }).click();
    await page.locator('#env-now').filter({ hasText: 'Test' }).waitFor();
  });

  it('finds a failed message in the log and reads its error', async () => {
    const { page } = browser;
    const sent = await api(account.testKey, '/send', { method: 'POST', body: { ...defaultSendBody('telegram', t.voiceUrl), recipient: '10000000002' } });
    assert.equal(sent.status, 202);
    const id = sent.body.id as string;
    await t.waitForStatus(account.testKey, id, ['failed'], 60_000);
    // A delivered one too, which the status filter must leave out.
    const ok = await api(account.testKey, '/send', { method: 'POST', body: defaultSendBody('telegram', t.voiceUrl) });
    await t.waitForStatus(account.testKey, ok.body.id, ['delivered'], 60_000);

    await page.getByRole('link', { name: 'Messages' }).click();
    await page.waitForURL(`${base}/dashboard/messages`);
    await page.getByLabel('Status').selectOption('failed');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/status=failed/);
    assert.equal(await page.locator(`tr[data-message-id="${ok.body.id}"]`).count(), 0);
    const row = page.locator(`tr[data-message-id="${id}"]`);
    assert.match(await row.innerText(), /recipient_not_found/);
    await row.getByRole('link', { name: id }).click();
    await page.waitForURL(`${base}/dashboard/messages/${id}`);
    const alert = page.getByRole('alert');
    assert.match(await alert.innerText(), /recipient_not_found/);
    assert.match(await page.locator('main table').first().innerText(), /failed/);
  });

  it('plays a delivered message’s converted audio in the page, with its waveform', async () => {
    const { page } = browser;
    // An MP3 source: what plays is the OGG Opus it was converted to.
    const sent = await api(account.testKey, '/send', { method: 'POST', body: defaultSendBody('telegram', t.mp3Url) });
    assert.equal(sent.status, 202);
    const id = sent.body.id as string;
    await t.waitForStatus(account.testKey, id, ['delivered'], 60_000);
    await page.goto(`${base}/dashboard/messages/${id}`);
    assert.match(await page.locator('[data-field="status"]').innerText(), /delivered/);
    assert.match(await page.locator('main').innerText(), /ogg_opus/);
    await page.getByRole('img', { name: /Waveform/ }).waitFor();
    assert.equal(await page.locator('svg.waveform rect').count(), 64);
    assert.match(await page.locator('[data-receipts]').innerText(), /Telegram does not tell bots/);

    const audio = page.locator('audio');
    await audio.evaluate((el: any) => el.play());
    const played = await until('the audio to play', async () => audio.evaluate((el: any) => (el.currentTime > 0 && el.error === null ? el.currentTime : 0)));
    assert.ok(played > 0);
    assert.equal(await audio.evaluate((el: any) => el.error), null);
  });

  it('configures a webhook; a test event and a real one arrive signed, and a delivery can be resent', async () => {
    const { page } = browser;
    const receiver = await startWebhookReceiver();
    try {
      await page.getByRole('link', { name: 'Webhooks' }).click();
      await page.waitForURL(`${base}/dashboard/webhooks`);
      await page.getByLabel('URL').fill(receiver.url('/voicenote'));
      await page.getByLabel('Description (optional)').fill('browser test');
      // Every event type is ticked by default.
      assert.equal(await page.getByRole('checkbox', { checked: true }).count(), WEBHOOK_EVENT_TYPES.length);
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      const secret = (await page.locator('#new-secret').innerText()).trim();
      assert.match(secret, /^whsec_/);

      await page.getByRole('button', { name: `Send test event to ${receiver.url('/voicenote')}` }).click();
      await page.waitForURL(/\/dashboard\/webhooks\/we_/);
      const [test] = await receiver.waitFor(1, 'voice_note.delivered', 60_000);
      const testEvent = new Webhook(secret).verify(test!.body, test!.headers as Record<string, string>) as any;
      assert.equal(testEvent.type, 'voice_note.delivered');
      assert.equal(test!.path, '/voicenote');

      // A real send of this account and environment is reported too.
      const sent = await api(account.testKey, '/send', { method: 'POST', body: defaultSendBody('telegram', t.voiceUrl) });
      assert.equal(sent.status, 202);
      const real = await until('the real voice_note.delivered', async () =>
        receiver.received.find((r) => (JSON.parse(r.body) as any).data?.id === sent.body.id),
      60_000);
      const realEvent = new Webhook(secret).verify(real.body, real.headers as Record<string, string>) as any;
      assert.equal(realEvent.data.status, 'delivered');

      // The page lists the test delivery with the receiver's answer; resend it.
      const testEventId = String(test!.headers['webhook-id']);
      const row = page.locator(`tr[data-event-id="${testEventId}"][data-status="succeeded"]`).first();
      await until('the test delivery listed as succeeded', async () => {
        await page.getByRole('link', { name: 'Refresh' }).click();
        return (await row.count()) > 0;
      }, 60_000);
      assert.match(await row.locator('[data-last-answer]').innerText(), /HTTP 200/);
      const deliveryId = (await row.getAttribute('data-delivery-id'))!;
      const before = receiver.received.length;
      await page.getByRole('button', { name: `Resend delivery ${deliveryId}` }).click();
      await page.getByRole('status').filter({ hasText: 'sent again' }).waitFor();
      const again = await until('the resent event', async () => receiver.received.slice(before).find((r) => r.headers['webhook-id'] === testEventId), 60_000);
      assert.equal((new Webhook(secret).verify(again.body, again.headers as Record<string, string>) as any).type, 'voice_note.delivered');
    } finally {
      await receiver.close();
    }
  });

  it('signs out: the session is over and pages ask for a sign-in again', async () => {
    const { page } = browser;
    const before = (await browser.context.cookies(`${base}/dashboard`)).find((c) => c.name === 'vn_session')!.value;
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${base}/dashboard/sign-in`);
    assert.equal((await browser.context.cookies(`${base}/dashboard`)).some((c) => c.name === 'vn_session'), false);
    await page.goto(`${base}/dashboard/keys`);
    assert.equal(new URL(page.url()).pathname, '/dashboard/sign-in');
    // The old cookie, replayed, is no longer a sign-in.
    const replay = await fetch(`${base}/dashboard/keys`, { headers: { cookie: `vn_session=${before}` }, redirect: 'manual' });
    assert.equal(replay.status, 303);
    assert.equal(replay.headers.get('location'), '/dashboard/sign-in');
  });
});
