import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from './fixtures/timed.js';
import { ROOT } from './fixtures/cli-process.js';

/* The systemd units of docs/deploy.md are valid units (where systemd-analyze exists) and run the real bin. */

const UNITS = path.join(ROOT, 'deploy', 'systemd');
const hasSystemdAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;

test('every unit passes systemd-analyze verify', { skip: hasSystemdAnalyze ? false : 'systemd-analyze is not installed' }, async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'voicenote-units-'));
  try {
    const names = (await readdir(UNITS)).filter((name) => name.endsWith('.service'));
    assert.deepEqual(names.sort(), ['voicenote-api.service', 'voicenote-worker@.service', 'voicenote.service']);
    for (const name of names) {
      // Node may live elsewhere on this machine than on a server: verify checks that ExecStart's binary exists.
      const text = (await readFile(path.join(UNITS, name), 'utf8')).replaceAll('/usr/bin/node', process.execPath);
      assert.match(text, /ExecStart=\S+ \/opt\/voicenote\/bin\/voicenote\.js (serve|worker)/);
      await writeFile(path.join(dir, name), text);
      const run = spawnSync('systemd-analyze', ['verify', '--man=no', path.join(dir, name)], { encoding: 'utf8' });
      assert.equal(run.status, 0, `${name}: ${run.stderr}`);
      assert.equal(run.stderr.trim(), '', `${name}: no warnings`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
