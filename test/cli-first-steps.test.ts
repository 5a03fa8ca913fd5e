import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { runCli } from './fixtures/cli-process.js';
import { startCliScene, type CliScene } from './fixtures/cli-scene.js';
import { STORAGE_LABEL, TELEGRAM_TOKEN, type TestApp } from './fixtures/app-harness.js';

/** The CLI in a newcomer's first minutes (issue 40): the commands the API has, and its addresses as people type them. */
describe(`voicenote CLI: the first steps (${STORAGE_LABEL})`, () => {
  let scene: CliScene;
  let t: TestApp;
  let origin: string;
  let key: string;
  let dir: string;
  before(async () => {
    scene = await startCliScene('cli-first-', { app: { env: { SANDBOX_AUTO_SCAN_SECONDS: '1' } } });
    ({ t, origin, key, dir } = scene);
  });
  after(() => scene?.close());

  const telegramFlags = (recipient: string) => ['--platform', 'telegram', '--recipient', recipient, '--bot-token', TELEGRAM_TOKEN];

  test("VOICENOTE_URL or --url may be the service's bare origin: /api/v1 is added", async () => {
    for (const env of [{ VOICENOTE_URL: origin }, { VOICENOTE_URL: `${origin}/` }]) {
      const run = await runCli(['send', ...telegramFlags('123456789'), '--audio', t.voiceUrl, '--json'], { ...env, VOICENOTE_KEY: key });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(JSON.parse(run.stdout).status, 'queued');
    }
    const listed = await runCli(['senders', 'list', '--url', origin, '--json'], { VOICENOTE_KEY: key });
    assert.equal(listed.code, 0, listed.stderr);
    // A path is taken as written.
    const wrong = await runCli(['senders', 'list', '--url', `${origin}/v2`], { VOICENOTE_KEY: key });
    assert.match(wrong.stderr, /404 not_found: no route GET \/v2\/senders/);
  });

  test('recipients check asks POST /recipients/check, with --json like its siblings', async () => {
    const missing = await runCli(['recipients', 'check', ...telegramFlags('123456787'), '--url', origin], { VOICENOTE_KEY: key });
    assert.equal(missing.code, 0, missing.stderr);
    assert.match(missing.stdout, /^telegram 123456787: does not exist \(.+\)\n$/);
    const found = await runCli(['recipients', 'check', ...telegramFlags('123456789'), '--url', origin, '--json'], { VOICENOTE_KEY: key });
    assert.deepEqual(JSON.parse(found.stdout), { platform: 'telegram', recipient: '123456789', exists: true, reason: null, suppressed: false });
    const bad = await runCli(['recipients', 'check', '--platform', 'telegram', '--recipient', '1', '--url', origin], { VOICENOTE_KEY: key });
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /^voicenote: 422 invalid_parameter: .*\(session/);
  });

  test('send --recording-indicator and --listen reach the API, as the CSV columns do; messages show reads the note and its replies', async () => {
    // A recipient ending in 6 answers each delivered note a few seconds later (the sandbox's answering recipients).
    const sent = await runCli(['send', ...telegramFlags('3000006'), '--audio', t.voiceUrl, '--recording-indicator', '--listen', '--url', origin, '--wait', '--json'], { VOICENOTE_KEY: key });
    assert.equal(sent.code, 0, sent.stderr);
    const id = JSON.parse(sent.stdout).id as string;
    const deadline = Date.now() + 20_000;
    let shown: any;
    for (;;) {
      const run = await runCli(['messages', 'show', id, '--url', origin, '--json'], { VOICENOTE_KEY: key });
      assert.equal(run.code, 0, run.stderr);
      shown = JSON.parse(run.stdout);
      if (shown.replies.length > 0 || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    assert.notEqual(shown.recording_indicator, null, 'the indicator was asked for');
    assert.equal(shown.replies[0]?.text, 'Thanks, got it!', 'the reply arrived');
    const human = await runCli(['messages', 'show', id, '--url', origin], { VOICENOTE_KEY: key });
    assert.match(human.stdout, new RegExp(`^${id}  delivered  telegram → 3000006`));
    assert.match(human.stdout, /replies \(1\):\n {2}\S+ {2}text {2}Thanks, got it!\n/);
    // --listen is sent: WhatsApp refuses it by name.
    const refused = await runCli(['send', '--platform', 'whatsapp', '--recipient', '14155550100', '--session-id', 'ws_000000000000000000000000', '--audio', t.voiceUrl, '--listen', '--url', origin], { VOICENOTE_KEY: key });
    assert.match(refused.stderr, /422 invalid_parameter: whatsapp takes no listen.*\(listen\)/);

    const csv = path.join(dir, 'flags.csv');
    await writeFile(csv, `platform,recipient,audio_url,bot_token,session_id,recording_indicator,listen\ntelegram,3000011,${t.voiceUrl},${TELEGRAM_TOKEN},,yes,\nwhatsapp,14155550100,${t.voiceUrl},,ws_000000000000000000000000,,true\n`);
    const bulk = await runCli(['send', '--csv', csv, '--url', origin, '--json'], { VOICENOTE_KEY: key });
    const result = JSON.parse(bulk.stdout);
    assert.equal(result.accepted, 1, bulk.stdout);
    assert.match(result.rows[1].error.message, /whatsapp takes no listen.*\(listen\)/);
    const fromCsv = await t.request({ method: 'GET', url: `/api/v1/messages/${result.rows[0].id}`, key });
    assert.notEqual(fromCsv.json().recording_indicator, null);
  });

  test('send --wait says why a note waits for a retry: the last attempt\'s error', async () => {
    // 10000000004: two transient platform errors, then delivered.
    const run = await runCli(['send', ...telegramFlags('10000000004'), '--audio', t.voiceUrl, '--url', origin, '--wait'], { VOICENOTE_KEY: key });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(JSON.parse(run.stdout).status, 'delivered');
    assert.match(run.stderr, /^voicenote: msg_\S+ queued: attempt 1 failed: platform_error: sandbox: transient platform error \(attempt 1\); next attempt at \S+Z$/m);
  });

  test('--session-id says Telegram accounts too; telegram-sessions create --wait follows the scan and prints the linked session', async () => {
    const help = await runCli(['send', '--help'], {});
    assert.match(help.stdout, /--session-id <id>\s+whatsapp: the session \(ws_…\); telegram: a linked\s+account \(ts_…\)/);
    const qrFile = path.join(dir, 'qr.png');
    const run = await runCli(['telegram-sessions', 'create', '--url', origin, '--qr-file', qrFile, '--wait'], { VOICENOTE_KEY: key });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^ts_\S+\tqr_pending\t-\t-\nQR code: .*qr\.png \(kept current while this waits\)\nts_\S+\tconnected\t@voicenote_sandbox\t/);
    const json = await runCli(['telegram-sessions', 'create', '--url', origin, '--wait', '--json', '--qr-file', qrFile], { VOICENOTE_KEY: key });
    assert.equal(JSON.parse(json.stdout).status, 'connected', json.stdout);
  });

  test('a command that creates a database says which one, and points at the service\'s DATA_DIR', async () => {
    const fresh = path.join(dir, 'other-terminal');
    const listed = await runCli(['accounts', 'list'], { DATA_DIR: fresh, SECRET_KEY: randomBytes(32).toString('base64') });
    assert.equal(listed.code, 0, listed.stderr);
    assert.equal(
      listed.stderr,
      `voicenote: note: created a new database at ${path.join(fresh, 'voicenote.db')} (DATA_DIR=${fresh}); if the service keeps its data elsewhere, give this command the service's DATA_DIR (export DATA_DIR=… in this terminal)\n`,
    );
    const migrated = await runCli(['migrate'], { DATA_DIR: path.join(dir, 'third-terminal'), SECRET_KEY: randomBytes(32).toString('base64') });
    assert.equal(migrated.code, 0, migrated.stderr);
    assert.match(migrated.stderr, /^voicenote: note: created a new database at .*third-terminal.*DATA_DIR=.*; if the service keeps its data elsewhere/);
  });
});
