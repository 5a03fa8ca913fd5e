#!/usr/bin/env node
// Runs the test files several processes at a time and ends with each file's wall time, slowest first.
//
//   node scripts/run-tests.mjs [--jobs N] [--batch-ms MS] [--record] [--check-imports] [FILE…]   (default: every test/*.test.ts)
//
// Files are run in batches, one Node process a batch (scripts/test-batch.mjs): the files of a batch
// one after another, each as a suite of its own, so a file's hooks and failures stay its own. A file's
// own process cost about 1.8 s of CPU before its first test, as much as a small file's tests; 127 files
// made that a third of the suite's CPU. Batches hold about --batch-ms (TEST_BATCH_MS, default 90 s) of
// their files' last times; a file that slow runs alone. The slowest batches start first, by this
// checkout's last run (test-artifacts/) or else by test/file-times.json, which `--record` rewrites from a
// whole run so that a fresh clone starts in a good order too.
//
// Jobs: TEST_JOBS or --jobs, default three times the cores, 6 on two (most files wait on sockets,
// timers and child processes more than they compute: 4 left a third of two cores idle). --check-imports
// runs `npm run check:imports` beside the files (what `npm test` does). Each file's output is printed
// whole when it fails (every file's with TEST_VERBOSE=1), so lines of files that ran together never mix.
//
// The TypeScript is compiled to JavaScript once per run (scripts/compile-tests.mjs) and runs under
// plain Node: loading the app through tsx's loader cost each process about a second of CPU more.
import { spawn } from 'node:child_process';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileForTests, removeCompiled } from './compile-tests.mjs';
import { SUMMARY_MARK, USAGE_MARK } from './test-batch-reporter.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Each file's time in this checkout's last run (not committed), and as last recorded for a fresh clone. */
const timesFile = join(root, 'test-artifacts', 'test-file-times.json');
const recordedTimesFile = join(root, 'test', 'file-times.json');
/** A batch's share of the run, by its files' last times: files faster than this share a process. */
const DEFAULT_BATCH_MS = 90_000;
/** A whole batch's limit, so one that hangs fails the run instead of holding it (tests have their own). */
const FILE_TIMEOUT_MS = Number(process.env.TEST_FILE_TIMEOUT_MS ?? '') || 600_000;

function parseArgs(argv) {
  const files = [];
  let jobs = Number(process.env.TEST_JOBS ?? '') || Math.max(2, availableParallelism() * 3);
  let record = false;
  let checkImports = false;
  let batchTargetMs = Number(process.env.TEST_BATCH_MS ?? '') || DEFAULT_BATCH_MS;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === '--record') record = true;
    else if (arg === '--check-imports') checkImports = true;
    else if (arg === '--jobs') jobs = Number(argv[++i]);
    else if (arg.startsWith('--jobs=')) jobs = Number(arg.slice('--jobs='.length));
    else if (arg === '--batch-ms') batchTargetMs = Number(argv[++i]);
    else files.push(arg);
  }
  if (!Number.isInteger(jobs) || jobs < 1) throw new Error('--jobs takes a whole number of at least 1');
  return { jobs, files, record, batchTargetMs, checkImports };
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

/** Files the run compiles (scripts/compile-tests.mjs) and runs in batches; any other file runs alone through tsx. */
function isCompiled(file) {
  return /^(src|test|clients\/typescript\/src)\/.+\.ts$/.test(file);
}

function stopGroup(pid) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** End of a file's section in a batch's spec output: its top-level suite's own line. */
function fileEndPattern(file) {
  return new RegExp(`^[✔✖﹣] ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(`, 'm');
}

/** A batch's output cut into each file's part (what it printed, up to its own end line). */
function outputByFile(output, files) {
  const parts = {};
  let rest = output;
  for (const file of files) {
    const end = fileEndPattern(file).exec(rest);
    if (!end) {
      parts[file] = rest;
      rest = '';
      continue;
    }
    const cut = rest.indexOf('\n', end.index);
    const stop = cut === -1 ? rest.length : cut + 1;
    parts[file] = rest.slice(0, stop);
    rest = rest.slice(stop);
  }
  // What came after the last file (the batch's summary, its list of failing tests) goes with the last.
  if (files.length) parts[files.at(-1)] += rest;
  return parts;
}

/**
 * Runs a batch of test files in one Node process (scripts/test-batch.mjs), and gives back one result a
 * file: its tests' counts, its wall time, the CPU its process spent on it, and its part of the output.
 * Files outside the compiled folders run alone through tsx, as their own program.
 */
function runBatch(batch) {
  return new Promise((resolve) => {
    const started = Date.now();
    const compiled = batch.every(isCompiled);
    // The files run as the program itself, not under `--test` (which starts a runner process that
    // starts the file's: a second Node, about half a second of CPU). Through bash for its `times`: the
    // CPU the batch's process and everything it started used (services, CLI runs, ffmpeg, the
    // browser), written on descriptor 3.
    const program = compiled
      ? ['--enable-source-maps', '--test-reporter=spec', '--test-reporter-destination=stdout', `--test-reporter=${join(root, 'scripts', 'test-batch-reporter.mjs')}`,
         '--test-reporter-destination=stderr', '--test-timeout=600000', '--test-force-exit', join(root, 'scripts', 'test-batch.mjs'), compiledDir, ...batch]
      : ['--import', 'tsx', '--test-reporter=spec', '--test-timeout=600000', '--test-force-exit', batch[0]];
    const child = spawn(
      'bash',
      ['-c', '"$@"; status=$?; times >&3; exit $status', 'run-test-batch', process.execPath, ...program],
      // A process group of its own: a batch past its limit is stopped with everything it started.
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
      const note = timedOut ? `\nthe batch ran past ${FILE_TIMEOUT_MS / 1000} s and was stopped\n` : '';
      const lines = (Buffer.concat(chunks).toString('utf8') + note).split('\n');
      const output = lines.filter((line) => !line.startsWith(SUMMARY_MARK) && !line.startsWith(USAGE_MARK)).join('\n');
      const batchMs = Date.now() - started;
      const cpuMs = childrenCpuMs(times);
      if (!compiled) {
        resolve([{ file: batch[0], ms: batchMs, cpuMs, ownCpuMs: cpuMs, code: code ?? 1, signal, output, ...summaryOf(output) }]);
        return;
      }
      const marked = (mark) => lines.filter((line) => line.startsWith(mark)).map((line) => JSON.parse(line.slice(mark.length)));
      const summaries = marked(SUMMARY_MARK);
      const usage = marked(USAGE_MARK);
      const parts = outputByFile(output, batch);
      const results = batch.map((file) => {
        const summary = summaries.find((s) => s.file === file);
        // A file with no summary never ended: the batch died (or was stopped) before or during it.
        if (!summary) return { file, ms: 0, ownCpuMs: 0, code: 1, signal, output: parts[file], tests: 0, pass: 0, fail: 0, skipped: 0, todo: 0, cancelled: 0 };
        const failed = summary.fail > 0 || summary.fileFailed;
        const used = usage.find((u) => u.file === file) ?? { ms: summary.ms, cpuMs: 0 };
        return { ...summary, file, ms: used.ms, ownCpuMs: used.cpuMs, code: failed ? 1 : 0, signal, output: parts[file] + (summary.error ? `\n${summary.error}\n` : '') };
      });
      // Every file passed and yet the process failed (an error after the last test, a crash on the way
      // out): the batch's last file carries the failure, with the process's output.
      if ((code !== 0 || signal) && results.every((r) => r.code === 0)) {
        const last = results.at(-1);
        last.code = 1;
        last.output += `\nthe batch's process ended with ${signal ? `signal ${signal}` : `code ${code}`} after its files passed\n`;
      }
      resolve(results.map((result, i) => (i === 0 ? { ...result, batchCpuMs: cpuMs, batchMs } : result)));
    });
  });
}

/**
 * Files in batches of about `targetMs` of their last times, slowest batches first; a file as slow as
 * that alone. Each batch is one process (scripts/test-batch.mjs says why).
 */
function batchesOf(files, times, targetMs) {
  const sorted = [...files].sort((a, b) => (times[b] ?? Infinity) - (times[a] ?? Infinity) || a.localeCompare(b));
  const batches = [];
  let open = [];
  let openMs = 0;
  for (const file of sorted) {
    const ms = times[file] ?? targetMs;
    if (!isCompiled(file) || ms >= targetMs) {
      batches.push({ files: [file], ms });
      continue;
    }
    open.push(file);
    openMs += ms;
    if (openMs >= targetMs) {
      batches.push({ files: open, ms: openMs });
      open = [];
      openMs = 0;
    }
  }
  if (open.length) batches.push({ files: open, ms: openMs });
  return batches.sort((a, b) => b.ms - a.ms);
}

function runImportCheck() {
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', '--silent', 'check:imports'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks = [];
    child.stdout.on('data', (c) => chunks.push(c));
    child.stderr.on('data', (c) => chunks.push(c));
    child.on('close', (code) => resolve({ code: code ?? 1, output: Buffer.concat(chunks).toString('utf8') }));
  });
}

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

async function main() {
  const { jobs, files: asked, record, batchTargetMs, checkImports } = parseArgs(process.argv.slice(2));
  const files = asked.length ? asked.map((f) => relative(root, resolve(process.cwd(), f))) : await allTestFiles();
  const times = { ...(await readTimes(recordedTimesFile)), ...(await readTimes(timesFile)) };
  const batches = batchesOf(files, times, batchTargetMs);
  const started = Date.now();
  compiledDir = await compileForTests(root);
  // The import rules (`npm run check:imports`) checked beside the tests: a few seconds of CPU while
  // the first files wait on their servers.
  const importCheck = checkImports ? runImportCheck() : undefined;
  const results = [];
  let next = 0;
  let batchCpuMs = 0;
  process.stdout.write(`running ${files.length} test files in ${batches.length} processes, ${jobs} at a time\n`);
  async function lane() {
    while (next < batches.length) {
      const batch = batches[next++];
      for (const result of await runBatch(batch.files)) {
        results.push(result);
        batchCpuMs += result.batchCpuMs ?? 0;
        const ok = result.code === 0 && result.fail === 0;
        if (!ok || process.env.TEST_VERBOSE) process.stdout.write(`\n──── ${result.file} ────\n${result.output}`);
        process.stdout.write(`${ok ? 'ok  ' : 'FAIL'} ${result.file} (${result.pass}/${result.tests} passed, ${seconds(result.ms)}, ${seconds(result.ownCpuMs)} CPU) [${results.length}/${files.length}]\n`);
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: Math.min(jobs, batches.length) }, lane));
  } finally {
    await removeCompiled(compiledDir);
  }
  const wall = Date.now() - started;
  const imports = await importCheck;
  if (imports) process.stdout.write(`\nimport rules (npm run check:imports): ${imports.code === 0 ? imports.output.trim().split('\n').at(-1) : `FAILED\n${imports.output}`}\n`);

  const failed = results.filter((r) => r.code !== 0 || r.fail > 0);
  const total = (key) => results.reduce((sum, r) => sum + r[key], 0);
  process.stdout.write('\nfile times, slowest first (wall, and the CPU its process spent on it; what it started is in the total):\n');
  for (const r of [...results].sort((a, b) => b.ms - a.ms)) {
    process.stdout.write(`  ${seconds(r.ms).padStart(8)} ${seconds(r.ownCpuMs).padStart(8)} CPU  ${r.file}${failed.includes(r) ? '  FAILED' : ''}\n`);
  }
  process.stdout.write(
    `\n${files.length} files, ${total('tests')} tests, ${total('cancelled')} cancelled, in ${seconds(wall)} ` +
      `(${batches.length} processes, ${jobs} at a time; ${seconds(batchCpuMs)} of CPU with everything they started)\n`,
  );
  if (failed.length) process.stdout.write(`files that failed: ${failed.map((r) => r.file).join(', ')}\n`);
  // A file that died before its summary counts as a failure even though it reported none.
  const failures = total('fail') + failed.filter((r) => r.fail === 0).length;
  process.stdout.write(`tests: ${total('pass')} passed, ${failures} failed, ${total('skipped')} skipped\n`);

  // Only the suite's own files: a file given from elsewhere has no place in the order.
  const measured = Object.fromEntries(results.filter((r) => /^test\/[^/]+\.test\.ts$/.test(r.file)).map((r) => [r.file, r.ms]));
  await writeTimes(timesFile, { ...(await readTimes(timesFile)), ...measured });
  if (record) await writeTimes(recordedTimesFile, measured);
  process.exitCode = failed.length || (imports && imports.code !== 0) ? 1 : 0;
}

await main();
