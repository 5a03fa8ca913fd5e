/**
 * The service loads undici's own files by path (src/core/http-client.ts): a release that lays them out
 * differently must stop it at start with a message that says what to do, not with "Cannot find module"
 * or a wrong call in the middle of a delivery.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { loadUndiciParts } from '../src/core/http-client.js';

/** An undici package of `version` in a folder of its own, holding only `files` (path → source). */
async function fakeUndici(t: { after(fn: () => Promise<void>): void }, version: string, files: Record<string, string>): Promise<NodeJS.Require> {
  const root = await mkdtemp(path.join(tmpdir(), 'voicenote-undici-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const pkg = path.join(root, 'node_modules', 'undici');
  await mkdir(pkg, { recursive: true });
  await writeFile(path.join(pkg, 'package.json'), JSON.stringify({ name: 'undici', version, main: 'index.js' }));
  for (const [file, source] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(pkg, file)), { recursive: true });
    await writeFile(path.join(pkg, file), source);
  }
  return createRequire(path.join(root, 'index.js'));
}

const FUNCTION = 'module.exports = function part() {};';

describe('undici loaded by path', () => {
  test('the installed undici has every part where the service looks for it', () => {
    const parts = loadUndiciParts(createRequire(import.meta.url));
    for (const [name, part] of Object.entries(parts)) assert.equal(typeof part, 'function', name);
  });

  test('a file that moved stops the start with a message naming it, the version and the way out', async (t) => {
    const load = await fakeUndici(t, '7.99.0', {
      'lib/dispatcher/agent.js': FUNCTION,
      'lib/core/connect.js': FUNCTION,
      // lib/api/api-request.js moved elsewhere in this release
    });
    assert.throws(() => loadUndiciParts(load), {
      message:
        'undici 7.99.0 does not have requestOn in undici/lib/api/api-request.js (the file is not there). voicenote loads these files of undici by path ' +
        "to start faster (src/core/http-client.ts), and this undici lays them out differently: install the version package-lock.json pins (npm ci), or change http-client.ts to import them from 'undici'.",
    });
  });

  test('a file still there that no longer exports the part is refused the same way', async (t) => {
    const load = await fakeUndici(t, '7.99.1', {
      'lib/dispatcher/agent.js': FUNCTION,
      'lib/core/connect.js': FUNCTION,
      'lib/api/api-request.js': FUNCTION,
      'lib/global.js': 'module.exports = { setGlobalDispatcher() {} };',
      'lib/core/util.js': 'module.exports = { parseURL() {} };',
    });
    assert.throws(() => loadUndiciParts(load), /^Error: undici 7\.99\.1 does not have getGlobalDispatcher in undici\/lib\/global\.js \(it is not a function there\)\./);
  });
});
