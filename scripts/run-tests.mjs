#!/usr/bin/env node
// Runs the test files several at a time, each in a Node process of its own, and ends with
// each file's wall time, slowest first. Why not `node --test --test-concurrency=N` alone: it cannot
// start the slowest files first (it takes them in name order, so one long file started last holds
// the run's end), it interleaves the output of files running together, and it does not say how
// long each file took.
//
//   node scripts/run-tests.mjs [--jobs N] [--record] [FILE…]      (default: every test/*.test.ts)
//
// Jobs: TEST_JOBS or --jobs, default 4 on two cores (most files wait on sockets, timers and child
// processes more than they compute). Each file's output is printed whole when it fails (every file's
// with TEST_VERBOSE=1), so lines of files that ran together never mix. Files start slowest first, by
// this checkout's last run (test-artifacts/) or else by test/file-times.json, which `--record` rewrites
// from a whole run so that a fresh clone starts in a good order too.
//
// The TypeScript is compiled to JavaScript once per run (scripts/compile-tests.mjs) and each file runs
// under plain Node: loading the app through tsx's loader cost each file about a second of CPU more.
import { spawn } from 'node:child_process';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileForTests, removeCompiled } from './compile-tests.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Each file's time in this checkout's last run (not committed), and as last recorded for a fresh clone. */
const timesFile = join(root, 'test-artifacts', 'test-file-times.json');
const recordedTimesFile = join(root, 'test', 'file-times.json');
/** A whole file's limit, so one that hangs fails the run instead of holding it (tests have their own). */
const FILE_TIMEOUT_MS = Number(process.env.TEST_FILE_TIMEOUT_MS ?? '') || 600_000;

function parseArgs(argv) {
  const files = [];
  let jobs = Number(process.env.TEST_JOBS ?? '') || Math.max(2, availableParallelism() * 2);
  let record = false;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === '--record') record = true;
    else if (arg === '--jobs') jobs = Number(argv[++i]);
    else if (arg.startsWith('--jobs=')) jobs = Number(arg.slice('--jobs='.length));
    else files.push(arg);
  }
  if (!Number.isInteger(jobs) || jobs < 1) throw new Error('--jobs takes a whole number of at least 1');
  return { jobs, files, record };
}

async function allTestFiles() {
  const names = await readdir(join(root, 'test'));
  return names.filter((n) => n.endsWith('.test.ts')).sort().map((n) => join('test', n));
}

async function readTimes(file) {
  try {
    return JSON.parse(await readFile(file, 'utf8'));
  } catch {
    return {};
  }
}

async function writeTimes(file, times) {
  const sorted = Object.fromEntries(Object.entries(times).sort(([a], [b]) => a.localeCompare(b)));
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, `${JSON.stringify(sorted, null, 1)}\n`);
}

/** The counts of spec's summary lines (`ℹ tests 12`, `ℹ pass 11`, …). */
function summaryOf(output) {
  const count = (name) => {
    const m = new RegExp(`^ℹ ${name} (\\d+)$`, 'm').exec(output);
    return m ? Number(m[1]) : 0;
  };
  return { tests: count('tests'), pass: count('pass'), fail: count('fail'), skipped: count('skipped'), todo: count('todo'), cancelled: count('cancelled') };
}

/** The children's user + system time from bash's `times` (its second line: `0m1.250s 0m0.310s`). */
function childrenCpuMs(times) {
  const line = times.trim().split('\n')[1] ?? '';
  return [...line.matchAll(/(\d+)m([\d.]+)s/g)].reduce((sum, m) => sum + (Number(m[1]) * 60 + Number(m[2])) * 1000, 0);
}

/** Files running now, by process group: stopped with the runner (their groups do not get its Ctrl-C). */
const running = new Set();
/** This run's compiled JavaScript (removed when the run ends, however it ends). */
let compiledDir;
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, async () => {
    for (const pid of running) stopGroup(pid);
    if (compiledDir) await removeCompiled(compiledDir);
    process.exit(130);
  });
}

/** How Node runs a test file: its compiled copy, or (a file from outside the compiled folders) through tsx. */
function programOf(file) {
  const compiled = /^(src|test|clients\/typescript\/src)\/.+\.ts$/.test(file) && join(compiledDir, file.replace(/\.ts$/, '.js'));
  // --enable-source-maps: stack traces name the TypeScript's lines (the compiled files carry their maps).
  return compiled ? { flags: ['--enable-source-maps'], program: compiled } : { flags: ['--import', 'tsx'], program: file };
}

function stopGroup(pid) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

function runFile(file) {
  return new Promise((resolve) => {
    const started = Date.now();
    // The file runs as the program itself, not under `--test` (which starts a runner process that
    // starts the file's: a second Node with the TypeScript loader, about half a second of CPU a file).
    // Through bash for its `times`: the CPU the file's process and everything it started used
    // (services, CLI runs, ffmpeg, the browser), written on descriptor 3.
    const { flags, program } = programOf(file);
    const child = spawn(
      'bash',
      ['-c', '"$@"; status=$?; times >&3; exit $status', 'run-test-file', process.execPath,
        ...flags, '--test-reporter=spec', '--test-timeout=600000', '--test-force-exit', program],
      // A process group of its own: a file past its limit is stopped with everything it started.
      { cwd: root, env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe', 'pipe'], detached: true },
    );
    running.add(child.pid);
    const chunks = [];
    let times = '';
    child.stdout.on('data', (c) => chunks.push(c));
    child.stderr.on('data', (c) => chunks.push(c));
    child.stdio[3].on('data', (c) => (times += c));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      stopGroup(child.pid);
    }, FILE_TIMEOUT_MS);
    child.on('close', (code, signal) => {
      running.delete(child.pid);
      clearTimeout(timer);
      const output = Buffer.concat(chunks).toString('utf8');
      const ms = Date.now() - started;
      const note = timedOut ? `\nthe file ran past ${FILE_TIMEOUT_MS / 1000} s and was stopped\n` : '';
      resolve({ file, ms, cpuMs: childrenCpuMs(times), code: code ?? 1, signal, output: output + note, ...summaryOf(output) });
    });
  });
}

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

async function main() {
  const { jobs, files: asked, record } = parseArgs(process.argv.slice(2));
  const files = asked.length ? asked.map((f) => relative(root, resolve(process.cwd(), f))) : await allTestFiles();
  const times = { ...(await readTimes(recordedTimesFile)), ...(await readTimes(timesFile)) };
  // Slowest first (by the last run), files never timed before them all: the run ends when its longest file does.
  const queue = [...files].sort((a, b) => (times[b] ?? Infinity) - (times[a] ?? Infinity) || a.localeCompare(b));
  const started = Date.now();
  compiledDir = await compileForTests(root);
  const results = [];
  let next = 0;
  process.stdout.write(`running ${files.length} test files, ${jobs} at a time\n`);
  async function lane() {
    while (next < queue.length) {
      const file = queue[next++];
      const result = await runFile(file);
      results.push(result);
      const ok = result.code === 0 && result.fail === 0;
      if (!ok || process.env.TEST_VERBOSE) process.stdout.write(`\n──── ${file} ────\n${result.output}`);
      process.stdout.write(`${ok ? 'ok  ' : 'FAIL'} ${file} (${result.pass}/${result.tests} passed, ${seconds(result.ms)}, ${seconds(result.cpuMs)} CPU) [${results.length}/${files.length}]\n`);
    }
  }
  try {
    await Promise.all(Array.from({ length: Math.min(jobs, queue.length) }, lane));
  } finally {
    await removeCompiled(compiledDir);
  }
  const wall = Date.now() - started;

  const failed = results.filter((r) => r.code !== 0 || r.fail > 0);
  const total = (key) => results.reduce((sum, r) => sum + r[key], 0);
  process.stdout.write('\nfile times, slowest first (wall, and the CPU of the file and all it started):\n');
  for (const r of [...results].sort((a, b) => b.ms - a.ms)) {
    process.stdout.write(`  ${seconds(r.ms).padStart(8)} ${seconds(r.cpuMs).padStart(8)} CPU  ${r.file}${failed.includes(r) ? '  FAILED' : ''}\n`);
  }
  process.stdout.write(
    `\n${files.length} files, ${total('tests')} tests, ${total('cancelled')} cancelled, in ${seconds(wall)} ` +
      `(${jobs} files at a time; ${seconds(total('cpuMs'))} of CPU)\n`,
  );
  if (failed.length) process.stdout.write(`files that failed: ${failed.map((r) => r.file).join(', ')}\n`);
  // A file that died before its summary counts as a failure even though it reported none.
  const failures = total('fail') + failed.filter((r) => r.fail === 0).length;
  process.stdout.write(`tests: ${total('pass')} passed, ${failures} failed, ${total('skipped')} skipped\n`);

  // Only the suite's own files: a file given from elsewhere has no place in the order.
  const measured = Object.fromEntries(results.filter((r) => /^test\/[^/]+\.test\.ts$/.test(r.file)).map((r) => [r.file, r.ms]));
  await writeTimes(timesFile, { ...(await readTimes(timesFile)), ...measured });
  if (record) await writeTimes(recordedTimesFile, measured);
  process.exitCode = failed.length ? 1 : 0;
}

await main();
