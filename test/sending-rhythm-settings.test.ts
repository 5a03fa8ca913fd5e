import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import pg from 'pg';
import { findRhythm } from '../src/store/rhythm.js';
import { closeSharedAudio, defaultSendBody, startTestApp, STORAGE_LABEL, TEST_DATABASE_URL, withRestartableStorage } from './fixtures/app-harness.js';
import { runCli, type Run } from './fixtures/cli-process.js';
import { createDashboardAccount, csrfIn, FormClient } from './fixtures/dashboard-harness.js';
import { startTelegramApi } from './fakes/telegram-api.js';
import { eventually } from './fixtures/eventually.js';

/*
 * The daily rhythm's settings as users change them: `voicenote rhythm show|set` (compiled dist/: build
 * first) and the dashboard's "Sending rhythm" page, and a note's wait for its sender's cap on the
 * dashboard's message page.
 */

after(async () => {
  await closeSharedAudio();
});

function storageEnv(reuse: { dataDir: string; pgSchema?: string; secretKey: string }): Record<string, string> {
  return {
    DATA_DIR: reuse.dataDir,
    SECRET_KEY: reuse.secretKey,
    ...(TEST_DATABASE_URL && reuse.pgSchema
      ? { DATABASE_URL: `${TEST_DATABASE_URL}${TEST_DATABASE_URL.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${reuse.pgSchema}`)}` }
      : {}),
  };
}

function jsonOf(run: Run, what: string): any {
  assert.equal(run.code, 0, `${what} failed: ${run.stderr}`);
  assert.equal(run.stdout.trimEnd().split('\n').length, 1, `one line on stdout: ${run.stdout}`);
  return JSON.parse(run.stdout);
}

function oneErrorLine(run: Run): string {
  assert.notEqual(run.code, 0, `should fail: ${run.stdout}`);
  const lines = run.stderr.split('\n').filter((line) => line !== '' && !line.startsWith('voicenote: note:'));
  assert.equal(lines.length, 1, `one stderr line: ${run.stderr}`);
  return lines[0]!;
}

describe(`voicenote rhythm show / set (${STORAGE_LABEL})`, () => {
  it('shows the defaults, sets a cap and a warm-up, turns caps off, goes back to the defaults; bad input is one line', async () => {
    await withRestartableStorage(async (reuse) => {
      if (reuse.pgSchema) {
        const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
        await client.connect();
        await client.query(`create schema if not exists ${reuse.pgSchema}`).finally(() => client.end());
      }
      const t = await startTestApp({ reuse });
      try {
        const account = await t.createAccount();
        const env = storageEnv(reuse);
        const db = t.app.services.db.kysely;

        const shown = jsonOf(await runCli(['rhythm', 'show', '--account', account.accountId, '--json'], env), 'rhythm show');
        assert.equal(shown.account_id, account.accountId);
        const byPlatform = Object.fromEntries(shown.rhythms.map((r: any) => [r.platform, r]));
        assert.deepEqual(byPlatform.whatsapp, {
          platform: 'whatsapp',
          source: 'default',
          daily_cap: 15,
          warmup: { start: 5, days: 7 },
          send_window: null,
          applies_to: [{ kind: 'whatsapp_session', daily_cap: 15, warmup: { start: 5, days: 7 } }],
          senders: [],
        });
        assert.deepEqual(byPlatform.linkedin.daily_cap, 100);
        assert.deepEqual([byPlatform.telegram.daily_cap, byPlatform.telegram.warmup], [null, null]);
        // Telegram's defaults differ by kind of sender: bots are not capped, linked accounts are.
        assert.deepEqual(byPlatform.telegram.applies_to, [
          { kind: 'telegram_bot', daily_cap: null, warmup: null },
          { kind: 'telegram_account', daily_cap: 20, warmup: { start: 5, days: 7 } },
        ]);
        const telegramText = await runCli(['rhythm', 'show', '--account', account.accountId, '--platform', 'telegram'], env);
        assert.equal(telegramText.stdout, 'telegram (the default)\n         telegram_bot: no daily cap\n         telegram_account: at most 20 a day (UTC), warm-up from 5 a day over 7 days\n');

        const set = jsonOf(await runCli(['rhythm', 'set', '--account', account.accountId, '--platform', 'linkedin', '--daily-cap', '40', '--warmup', '10:5', '--json'], env), 'rhythm set');
        assert.deepEqual([set.source, set.daily_cap, set.warmup], ['account', 40, { start: 10, days: 5 }]);
        assert.deepEqual(await findRhythm(db, account.accountId, 'linkedin'), { dailyCap: 40, warmup: { start: 10, days: 5 }, custom: true });

        const off = jsonOf(await runCli(['rhythm', 'set', '--account', account.accountId, '--platform', 'whatsapp', '--no-cap', '--json'], env), 'rhythm set --no-cap');
        assert.deepEqual([off.daily_cap, off.warmup], [null, null]);
        assert.equal((await findRhythm(db, account.accountId, 'whatsapp')).dailyCap, null);

        const text = await runCli(['rhythm', 'show', '--account', account.accountId, '--platform', 'whatsapp'], env);
        assert.equal(text.code, 0, text.stderr);
        assert.equal(text.stdout, "whatsapp (this account's setting)\n         whatsapp_session: no daily cap\n");

        const back = jsonOf(await runCli(['rhythm', 'set', '--account', account.accountId, '--platform', 'whatsapp', '--defaults', '--json'], env), 'rhythm set --defaults');
        assert.deepEqual([back.source, back.daily_cap], ['default', 15]);

        // A send window alone leaves the cap as it was (the default stays the default).
        const windowed = jsonOf(
          await runCli(['rhythm', 'set', '--account', account.accountId, '--platform', 'whatsapp', '--window', 'mon-fri 09:00-18:00 Europe/Berlin', '--json'], env),
          'rhythm set --window',
        );
        assert.deepEqual(windowed.send_window, { days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '09:00', end: '18:00', time_zone: 'Europe/Berlin' });
        assert.deepEqual([windowed.source, windowed.daily_cap], ['default', 15]);
        const overHttp = await t.request({ method: 'GET', url: '/api/v1/rhythm', key: account.testKey });
        assert.deepEqual(overHttp.json().data.find((r: any) => r.platform === 'whatsapp').send_window, windowed.send_window);
        const windowText = await runCli(['rhythm', 'show', '--account', account.accountId, '--platform', 'whatsapp'], env);
        assert.match(windowText.stdout, /\n         send window: mon-fri 09:00-18:00 Europe\/Berlin\n$/);
        const noWindow = jsonOf(await runCli(['rhythm', 'set', '--account', account.accountId, '--platform', 'whatsapp', '--no-window', '--json'], env), 'rhythm set --no-window');
        assert.equal(noWindow.send_window, null);
        assert.match(
          oneErrorLine(await runCli(['rhythm', 'set', '--account', account.accountId, '--platform', 'whatsapp', '--window', 'mon-fri 09:00-18:00 Mars/Olympus'], env)),
          /IANA time zone/,
        );

        assert.match(oneErrorLine(await runCli(['rhythm', 'set', '--account', account.accountId, '--platform', 'telegram', '--daily-cap', '3', '--no-cap'], env)), /--daily-cap or --no-cap/);
        assert.match(oneErrorLine(await runCli(['rhythm', 'set', '--account', account.accountId, '--platform', 'telegram', '--warmup', '5:3'], env)), /warm-up rises to the daily cap/);
        assert.match(oneErrorLine(await runCli(['rhythm', 'set', '--account', account.accountId, '--platform', 'fax', '--daily-cap', '3'], env)), /platform must be one of/);
        assert.match(oneErrorLine(await runCli(['rhythm', 'show', '--account', 'acct_nope'], env)), /no account acct_nope/);
      } finally {
        await t.close();
      }
    });
  });
});

describe(`the dashboard's sending rhythm (${STORAGE_LABEL})`, () => {
  it('a cap set on the page (with its CSRF token) holds the next live note back, and its page shows the wait', async () => {
    const fake = await startTelegramApi();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, builtInRhythm: true });
    try {
      const account = await createDashboardAccount(t);
      const client = new FormClient(t);
      assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
      const page = await client.get('/dashboard/rhythm');
      assert.equal(page.statusCode, 200);
      assert.match(page.body, /data-platform="whatsapp"[\s\S]*At most 15 notes per sender and UTC day, a new sender starting at 5 a day/);
      assert.match(
        page.body,
        /<li data-kind="telegram_bot">Telegram bots: No daily cap\.<\/li><li data-kind="telegram_account">Linked Telegram accounts: At most 20 notes per sender and UTC day, a new sender starting at 5 a day/,
      );

      const refused = await client.post('/dashboard/rhythm', { platform: 'telegram', daily_cap: '1', warmup_start: '', warmup_days: '' });
      assert.equal(refused.statusCode, 403, 'no change without the CSRF token');
      const saved = await client.post('/dashboard/rhythm', { _csrf: csrfIn(page.body), platform: 'telegram', daily_cap: '1', warmup_start: '', warmup_days: '' });
      assert.equal(saved.statusCode, 303);
      assert.equal((await findRhythm(t.app.services.db.kysely, account.accountId, 'telegram')).dailyCap, 1);
      const bad = await client.post('/dashboard/rhythm', { _csrf: csrfIn(page.body), platform: 'telegram', daily_cap: 'lots' });
      assert.equal(bad.statusCode, 422);

      // A send window for WhatsApp, typed as the CLI takes it; a bad one is refused and changes nothing.
      const badWindow = await client.post('/dashboard/rhythm/window', { _csrf: csrfIn(page.body), platform: 'whatsapp', window: 'weekdays 9-5 Berlin' });
      assert.equal(badWindow.statusCode, 422);
      assert.match(badWindow.body, /Send window: must read DAYS HH:MM-HH:MM TIME_ZONE/);
      const windowSaved = await client.post('/dashboard/rhythm/window', { _csrf: csrfIn(page.body), platform: 'whatsapp', window: 'sat,sun 10:00-14:00 UTC' });
      assert.equal(windowSaved.statusCode, 303);
      const withWindow = await client.get('/dashboard/rhythm');
      assert.match(withWindow.body, /data-platform="whatsapp"[\s\S]*Send window: sat,sun 10:00-14:00 UTC\./);
      const overHttp = await t.request({ method: 'GET', url: '/api/v1/rhythm', key: account.testKey });
      assert.deepEqual(overHttp.json().data.find((r: any) => r.platform === 'whatsapp').send_window, { days: ['sat', 'sun'], start: '10:00', end: '14:00', time_zone: 'UTC' });

      const first = await t.send(account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '330000001' });
      assert.equal((await t.waitForStatus(account.liveKey, first.json().id, ['delivered', 'failed'])).status, 'delivered');
      const second = (await t.send(account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '330000002' })).json().id;
      const waiting = await eventually(async () => {
        const res = await client.get(`/dashboard/messages/${second}?env=live`);
        return res.body.includes('data-field="waiting_for"') ? res.body : undefined;
      }, 'the wait on the message page');
      assert.match(waiting, /sender's daily cap is reached/);
      const list = await client.get('/dashboard/messages?env=live');
      assert.match(list.body, /data-waiting="daily_cap"/);
      const rhythmPage = await client.get('/dashboard/rhythm');
      assert.match(rhythmPage.body, /1 today of 1/);
    } finally {
      await t.close();
      await fake.close();
    }
  });
});
