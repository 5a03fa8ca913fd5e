import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { ROOT } from './fixtures/cli-process.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, type TestApp } from './fixtures/app-harness.js';

/*
 * The typed client as another project gets it: `npm install --install-links <checkout>/clients/typescript`
 * (docs/api.md's command) into a folder outside the checkout, which must bring the client's own
 * dependency (openapi-fetch) and nothing of the checkout's node_modules. Then it is imported and
 * used against a listening service, and a TypeScript file of that project compiles against it —
 * a wrong platform refused there too. Needs the build's clients/typescript/dist (npm run build).
 */

const run = promisify(execFile);
const CLIENT_DIR = path.join(ROOT, 'clients', 'typescript');
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

after(async () => {
  await closeSharedAudio();
});

describe(`the typed client installed on its own (${STORAGE_LABEL})`, () => {
  let project: string;
  let t: TestApp;
  before(async () => {
    assert.ok(existsSync(path.join(CLIENT_DIR, 'dist', 'index.js')), 'npm run build writes clients/typescript/dist');
    project = await mkdtemp(path.join(tmpdir(), 'voicenote-client-user-'));
    await writeFile(path.join(project, 'package.json'), JSON.stringify({ name: 'user-project', version: '1.0.0', private: true, type: 'module' }));
    await run('npm', ['install', '--install-links', '--no-audit', '--no-fund', '--loglevel=error', CLIENT_DIR], { cwd: project, timeout: 240_000 });
    t = await startTestApp({ worker: false });
  });
  after(async () => {
    await t?.close();
    if (project) await rm(project, { recursive: true, force: true });
  });

  test('a copy with its own openapi-fetch, not a link into the checkout', () => {
    assert.ok(existsSync(path.join(project, 'node_modules', '@voicenote', 'client', 'dist', 'index.js')));
    assert.ok(existsSync(path.join(project, 'node_modules', 'openapi-fetch', 'package.json')), 'its dependency is installed with it');
  });

  test('imported from that project, it sends a voice note', async () => {
    const baseUrl = await t.listen();
    const { testKey } = await t.createAccount();
    const script = path.join(project, 'send.mjs');
    await writeFile(
      script,
      `import { createVoicenoteClient } from '@voicenote/client';
const client = createVoicenoteClient({ baseUrl: process.argv[2], apiKey: process.argv[3] });
const { data, error, response } = await client.POST('/api/v1/send', { body: { platform: 'telegram', recipient: '123456789', audio_url: process.argv[4], session: { bot_token: process.argv[5] } } });
console.log(JSON.stringify({ status: response.status, data, error }));
`,
    );
    const { stdout } = await run(process.execPath, [script, baseUrl, testKey, t.voiceUrl, TELEGRAM_TOKEN], { cwd: project });
    const answer = JSON.parse(stdout);
    assert.equal(answer.status, 202, stdout);
    assert.match(answer.data.id, /^msg_/);
    assert.equal(answer.data.status, 'queued');
  });

  test('TypeScript in that project: a right body compiles, platform \'signal\' does not', async () => {
    const ok = path.join(project, 'ok.ts');
    const bad = path.join(project, 'bad.ts');
    await writeFile(ok, `import type { SendRequest } from '@voicenote/client';
export const body: SendRequest = { platform: 'whatsapp', recipient: '14155550100', audio_url: 'https://example.com/a.ogg', session: { session_id: 'ws_1' } };
`);
    await writeFile(bad, `import type { SendRequest } from '@voicenote/client';
export const body: SendRequest = { platform: 'signal', recipient: '1', audio_url: 'https://example.com/a.ogg', session: { bot_token: 'x' } };
`);
    const flags = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--lib', 'es2023,dom'];
    await run(process.execPath, [TSC, ...flags, ok], { cwd: project });
    const failed = await run(process.execPath, [TSC, ...flags, bad], { cwd: project }).then(
      () => null,
      (error: { stdout: string }) => error.stdout,
    );
    assert.ok(failed !== null, 'platform "signal" must not type-check');
    assert.match(failed, /bad\.ts.*error TS2322/s);
  });
});
