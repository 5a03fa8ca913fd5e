import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { ROOT } from './fixtures/cli-process.js';

/**
 * The suite never hangs: run through package.json's own test command, a test that waits on a server
 * that never answers fails within its limit, and a fixture that failed with a server still listening
 * does not keep the file running.
 */

async function scripts(): Promise<Record<string, string>> {
  return JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')).scripts;
}

const STUCK_FILE = (timed: string) => `
import { createServer } from 'node:http';
import { before, describe } from 'node:test';
import { it } from ${JSON.stringify(timed)};

const silent = createServer(() => { /* never answers */ });
before(() => new Promise((resolve) => silent.listen(0, '127.0.0.1', () => resolve())));

it('waits on a server that never answers', async () => {
  const { port } = silent.address();
  await fetch('http://127.0.0.1:' + port + '/');
});

describe('a fixture that fails with a server open', () => {
  before(async () => {
    const left = createServer(() => {});
    await new Promise((resolve) => left.listen(0, '127.0.0.1', () => resolve()));
    throw new Error('fixture failed');
  });
  it('never runs', () => {});
});
`;

describe('test time limits', () => {
  it('runs every file through the runner, which bounds it and forces it to end once its tests have', async () => {
    const { test, 'test:file': testFile } = await scripts();
    for (const script of [test ?? '', testFile ?? '']) assert.match(script, /node scripts\/run-tests\.mjs( --[a-z-]+)*$/);
    const runner = await readFile(join(ROOT, 'scripts', 'run-tests.mjs'), 'utf8');
    const limit = /'--test-timeout=(\d+)'/.exec(runner);
    assert.ok(limit, 'no --test-timeout in the runner');
    assert.ok(Number(limit[1]) > 0 && Number(limit[1]) <= 15 * 60_000, `file limit ${limit[1]} ms`);
    assert.match(runner, /'--test-force-exit'/);
  });

  it('fails a test that never answers within its limit instead of hanging', { timeout: 90_000 }, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'voicenote-stuck-'));
    const file = join(dir, 'stuck.test.ts');
    await writeFile(file, STUCK_FILE(pathToFileURL(join(ROOT, 'test', 'fixtures', 'timed.ts')).href));
    const [node, ...args] = ((await scripts())['test:file'] ?? '').split(/\s+/);
    assert.equal(node, 'node');
    // One file at a time is enough here, and keeps the run's times of the real suite untouched.
    args.push('--jobs', '1');
    const started = Date.now();
    // Without NODE_TEST_CONTEXT the child is a runner of its own, not a file of this run.
    const { NODE_TEST_CONTEXT: _ownRun, ...env } = process.env;
    const child = spawn(process.execPath, [...args, file], {
      cwd: ROOT,
      env: { ...env, VOICENOTE_TEST_TIMEOUT_MS: '1500' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group: the runner and the file's process end together
    });
    const killAll = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    // Ended here at the latest, so a run that would hang fails this test and leaves nothing behind.
    const stop = setTimeout(killAll, 60_000);
    try {
      const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
      const seconds = (Date.now() - started) / 1000;
      assert.notEqual(code, 0, output);
      // Node 20 reports in TAP when not on a terminal, Node 24 with its spec reporter.
      assert.match(output, /(not ok \d+ - |✖ )waits on a server that never answers[\s\S]*?test timed out after 1500ms/);
      assert.match(output, /fixture failed/);
      assert.ok(seconds < 55, `ended after ${seconds} s:\n${output}`);
    } finally {
      clearTimeout(stop);
      killAll();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
