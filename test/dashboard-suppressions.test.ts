import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { assertErrorEnvelope, closeSharedAudio, defaultSendBody, startTestApp, STORAGE_LABEL, type TestApp } from './fixtures/app-harness.js';
import { BROWSER_SKIP_REASON, launchBrowser, type Browser } from './fixtures/browser.js';
import { createDashboardAccount, type DashboardAccount } from './fixtures/dashboard-harness.js';

/**
 * The dashboard's Suppression list page (docs/dashboard.md) as a person uses it, in real Chromium over
 * loopback HTTP: a recipient added by hand, a pasted CSV file of 10,000 rows imported, the search, a
 * removal; each seen by the next send over the API, and only in the signed-in account's environment.
 */
describe(`the dashboard's suppression list in a browser (${STORAGE_LABEL})`, { skip: BROWSER_SKIP_REASON ?? false }, () => {
  let t: TestApp;
  let base: string;
  let browser: Browser;
  let account: DashboardAccount;

  before(async () => {
    t = await startTestApp({ worker: false });
    base = await t.listen();
    account = await createDashboardAccount(t);
    browser = await launchBrowser();
    const { page } = browser;
    await page.goto(`${base}/dashboard/sign-in`);
    await page.getByLabel('Email').fill(account.email);
    await page.getByLabel('Password').fill(account.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${base}/dashboard/usage`);
  });

  after(async () => {
    await browser?.close();
    await t?.close();
    await closeSharedAudio();
  });

  const shown = () => browser.page.locator('table[data-list="suppressions"] tbody tr');
  /** Each listed row as the page shows it: recipient, platform, source, note. */
  const rowsShown = async (): Promise<string[][]> =>
    (await shown().all()).length === 0 ? [] : Promise.all((await shown().all()).map(async (row) => (await row.locator('td').allInnerTexts()).slice(0, 4).map((cell) => cell.trim())));
  const send = (recipient: string, key = account.testKey) => t.send(key, { ...defaultSendBody('telegram', t.voiceUrl), recipient });
  const listed = async (query: string, key = account.testKey) => (await t.request({ method: 'GET', url: `/api/v1/suppressions${query}`, key })).json();

  it('is linked from the account page; a recipient added by hand is listed as the platform names it, and the next send to them is refused', async () => {
    const { page } = browser;
    await page.goto(`${base}/dashboard/account`);
    await page.getByRole('link', { name: 'Suppression list' }).click();
    await page.waitForURL(`${base}/dashboard/suppressions`);
    assert.equal(await page.locator('h1').innerText(), 'Suppression list');
    await page.getByText('Nobody is listed yet.').waitFor();

    await page.getByLabel('Platform', { exact: true }).selectOption('telegram');
    await page.getByLabel(/^Recipient/).fill('@Jane_Doe');
    await page.getByLabel('Note (optional)').fill('asked by phone');
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'Listed. Notes waiting for them were canceled' }).waitFor();
    assert.deepEqual(await rowsShown(), [['@jane_doe', 'telegram', 'dashboard', 'asked by phone']]);
    assertErrorEnvelope(await send('@JANE_DOE'), 422, 'recipient_suppressed');
    // Only this environment's list: the live key's is empty, and so is another account's.
    assert.deepEqual((await listed('', account.liveKey)).data, []);
    const other = await t.createAccount();
    assert.equal((await send('@jane_doe', other.testKey)).statusCode, 202);
  });

  it('imports a pasted CSV file of 10,000 rows, naming a bad row by its number; the search finds them; the next send to one is refused', async () => {
    const { page } = browser;
    const numbers = Array.from({ length: 10_000 }, (_, i) => String(4_917_000_000 + i));
    const lines = numbers.map((n) => `telegram,${n},from the old tool`);
    lines.splice(2, 0, 'whatsapp,jane,not a number');
    // Pasted as one value (typing 200 KB key by key through fill() stalls Chromium's text area for minutes).
    await page.getByLabel(/^The file's text/).evaluate((area, text) => void ((area as { value: string }).value = text), `platform,recipient,note\n${lines.join('\n')}\n`);
    await page.getByRole('button', { name: 'Import' }).click();
    // A rejected row makes the answer an error that names it; every good row is listed all the same.
    const report = await page.getByRole('alert').innerText();
    assert.match(report, /^10,000 listed, 1 rejected, of 10,001 rows\. row 3: recipient must be the phone number with country code/);
    assertErrorEnvelope(await send(numbers[9_999]!), 422, 'recipient_suppressed');
    const imported = await listed(`?source=import&recipient=${numbers[0]}`);
    assert.deepEqual(imported.data.map((d: any) => [d.platform, d.recipient, d.note]), [['telegram', numbers[0], 'from the old tool']]);

    // The page shows the newest 100 and says so; a search by the start of a recipient finds the others.
    await page.goto(`${base}/dashboard/suppressions`);
    assert.equal(await shown().count(), 100);
    await page.getByText('The newest 100 are shown; search to find others.').waitFor();
    await page.getByLabel('Search').fill('491700012');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL(`${base}/dashboard/suppressions?q=491700012`);
    const found = await rowsShown();
    assert.deepEqual(found.map((r) => r[0]).sort(), Array.from({ length: 10 }, (_, i) => `491700012${i}`));
    assert.ok(found.every((r) => r[1] === 'telegram' && r[2] === 'import' && r[3] === 'from the old tool'));
    await page.getByLabel('Search').fill('@nobody_here');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('Nobody listed matches.').waitFor();
    assert.equal(await shown().count(), 0);
  });

  it('a file without a platform column lists its rows on the platform chosen; Remove takes one off and sends to them are accepted again', async () => {
    const { page } = browser;
    await page.goto(`${base}/dashboard/suppressions`);
    await page.getByLabel(/^The file's text/).fill('Recipient\n+44 20 7946 0958\n');
    await page.getByLabel('Platform of rows without one').selectOption('*');
    await page.getByRole('button', { name: 'Import' }).click();
    await page.getByRole('status').filter({ hasText: '1 listed, 0 rejected, of 1 row.' }).waitFor();
    // Every platform: a Telegram send to the same number is refused too.
    assertErrorEnvelope(await send('442079460958'), 422, 'recipient_suppressed');

    await page.getByLabel('Search').fill('4420');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL(`${base}/dashboard/suppressions?q=4420`);
    assert.deepEqual(await rowsShown(), [['442079460958', 'every platform', 'import', '']]);
    await page.getByRole('button', { name: 'Remove' }).click();
    await page.getByRole('status').filter({ hasText: 'Taken off the list' }).waitFor();
    assert.equal((await send('442079460958')).statusCode, 202);
    assert.deepEqual((await listed('?recipient=442079460958')).data, []);
  });
});
