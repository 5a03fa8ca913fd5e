import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
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

describe('voicenote telegram-sessions create and a session id that is a path', () => {
  test('the QR file stays in the working folder whatever session_id the server answers, and is never written over a file', async (t) => {
    const dir = await mkdtemp(path.join(tmpdir(), 'tg-cli-qr-'));
    const work = path.join(dir, 'work');
    await mkdir(work);
    const answers = ['../../escaped', path.join(dir, 'absolute'), '..', '../../escaped'];
    // A server at a wrong or hostile --url: it answers whatever session_id it likes.
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ session_id: answers.shift(), status: 'qr_pending', username: null, phone_number: null, qr_code: `data:image/png;base64,${PNG_SIGNATURE.toString('base64')}` }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.after(async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`;
    const create = () => runCli(['telegram-sessions', 'create', '--url', url], { VOICENOTE_KEY: 'sk_test_x' }, { cwd: work });
    for (const expected of ['escaped.png', `${path.join(dir, 'absolute').replace(/[^A-Za-z0-9_-]/g, '')}.png`, 'telegram-session.png']) {
      const run = await create();
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, new RegExp(`QR code: ${expected.replace(/[.]/g, '\\.')} `));
      assert.deepEqual((await readFile(path.join(work, expected))).subarray(0, 8), PNG_SIGNATURE);
    }
    // The same name again: refused, the file there kept.
    const again = await create();
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /escaped\.png exists already; choose the QR code's file with --qr-file/);
    assert.deepEqual((await readdir(dir)).sort(), ['work'], 'nothing written outside the working folder');
    assert.equal((await readdir(work)).length, 3);
  });
});
