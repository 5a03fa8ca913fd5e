import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { runCli } from './fixtures/cli-process.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe(`voicenote telegram-sessions (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let url: string;
  let key: string;
  let dir: string;
  before(async () => {
    t = await startTestApp({ worker: false, env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    url = `${await t.listen()}/api/v1`;
    key = (await t.createAccount()).testKey;
    dir = await mkdtemp(path.join(tmpdir(), 'tg-cli-'));
  });
  after(async () => {
    await t.close();
    await rm(dir, { recursive: true, force: true });
    await closeSharedAudio();
  });

  test('create, list, password, delete: --json prints the API answers; create writes the QR code as a PNG', async () => {
    const created = await runCli(['telegram-sessions', 'create', '--url', url, '--json'], { VOICENOTE_KEY: key });
    assert.equal(created.code, 0, created.stderr);
    const session = JSON.parse(created.stdout);
    assert.match(session.session_id, /^ts_[0-9A-Za-z]{24}$/);
    assert.equal(session.status, 'qr_pending');

    const qrFile = path.join(dir, 'qr.png');
    const human = await runCli(['telegram-sessions', 'create', '--key', key, '--url', url, '--qr-file', qrFile], {});
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^ts_\S+\tqr_pending\t-\t-\nQR code: /);
    assert.deepEqual((await readFile(qrFile)).subarray(0, 8), PNG_SIGNATURE);

    const listed = await runCli(['telegram-sessions', 'list', '--url', url, '--json'], { VOICENOTE_KEY: key });
    assert.equal(JSON.parse(listed.stdout).sessions.length, 2);

    await t.request({ method: 'POST', url: `/api/v1/telegram/sessions/${session.session_id}/simulate`, key, body: { event: 'scan_with_password' } });
    const noPassword = await runCli(['telegram-sessions', 'password', session.session_id, '--url', url], { VOICENOTE_KEY: key });
    assert.notEqual(noPassword.code, 0);
    assert.match(noPassword.stderr, /VOICENOTE_TELEGRAM_PASSWORD/);
    const wrong = await runCli(['telegram-sessions', 'password', session.session_id, '--url', url], { VOICENOTE_KEY: key, VOICENOTE_TELEGRAM_PASSWORD: 'nope' });
    assert.match(wrong.stderr, /422 invalid_parameter: .* \(password\)/);
    const right = await runCli(['telegram-sessions', 'password', session.session_id, '--url', url, '--json'], { VOICENOTE_KEY: key, VOICENOTE_TELEGRAM_PASSWORD: 'sandbox-password' });
    assert.equal(JSON.parse(right.stdout).status, 'connected', right.stderr);

    const deleted = await runCli(['telegram-sessions', 'delete', session.session_id, '--url', url, '--json'], { VOICENOTE_KEY: key });
    assert.deepEqual(JSON.parse(deleted.stdout), { deleted: true });
    const again = await runCli(['telegram-sessions', 'delete', session.session_id, '--url', url], { VOICENOTE_KEY: key });
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /404 not_found/);
  });
});
