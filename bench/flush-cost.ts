/**
 * What one disk flush of a write-ahead log costs when the commit extends the file and when it
 * overwrites blocks already there: the two cases of SQLite's WAL before and after the checkpoint
 * thread restarts a long log (src/store/sqlite-checkpointer.ts). Each round writes nine WAL frames
 * (4 KiB pages with their 24-byte headers, about one send batch's commit) and flushes them with
 * `fdatasync`, 300 times, in the system's temporary folder (where the other benches keep their data);
 * wall time and this process's CPU time (user + system) per flush, the two cases alternately.
 *
 *   node --import tsx bench/flush-cost.ts
 */
import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { intEnv } from './env.js';

const FLUSHES = intEnv('BENCH_FLUSHES', 300, 1);
const ROUNDS = intEnv('BENCH_ROUNDS', 3, 1);
const COMMIT = Buffer.alloc(9 * (4096 + 24), 1);
/** The overwritten log's length in commits (about 1,000 frames, the restart threshold). */
const LOG_COMMITS = 111;

function measure(dir: string, mode: 'append' | 'overwrite'): { wallUs: number; cpuUs: number } {
  const file = join(dir, `${mode}.wal`);
  const fd = openSync(file, 'w');
  try {
    if (mode === 'overwrite') {
      for (let i = 0; i < LOG_COMMITS; i++) writeSync(fd, COMMIT, 0, COMMIT.length, i * COMMIT.length);
      fdatasyncSync(fd);
    }
    const cpu = process.cpuUsage();
    const started = process.hrtime.bigint();
    for (let i = 0; i < FLUSHES; i++) {
      const commit = mode === 'append' ? i : i % LOG_COMMITS;
      writeSync(fd, COMMIT, 0, COMMIT.length, commit * COMMIT.length);
      fdatasyncSync(fd);
    }
    const wallUs = Number(process.hrtime.bigint() - started) / 1000 / FLUSHES;
    const used = process.cpuUsage(cpu);
    return { wallUs, cpuUs: (used.user + used.system) / FLUSHES };
  } finally {
    closeSync(fd);
    rmSync(file, { force: true });
  }
}

const dir = mkdtempSync(join(tmpdir(), 'voicenote-flush-cost-'));
try {
  const rows: string[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const mode of ['append', 'overwrite'] as const) {
      const { wallUs, cpuUs } = measure(dir, mode);
      rows.push(`| ${round} | ${mode === 'append' ? 'extends the file' : 'overwrites blocks already written'} | ${Math.round(wallUs)} µs | ${Math.round(cpuUs)} µs |`);
    }
  }
  console.log(`${FLUSHES} flushes of a ${COMMIT.length}-byte commit each, in ${tmpdir()}:\n`);
  console.log('| round | the commit | wall time per flush | CPU per flush |');
  console.log('|---|---|---|---|');
  for (const row of rows) console.log(row);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
