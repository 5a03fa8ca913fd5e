/**
 * What starting the service costs, in CPU: `npm run build && node --import tsx bench/app-start.ts`.
 *
 * 1. An app in a process that builds many (every test file, the benchmarks): createApp on a new SQLite
 *    database, listen on loopback, one GET /healthz, close. With the routes' compiled schemas kept for
 *    the process (src/api/schema-compilers.ts, the default) against Fastify's own way, every schema
 *    compiled anew per server (`schemaCompilers: 'per-server'`), the two interleaved in one run.
 * 2. A process of the compiled bin (dist/, as `npm install` builds it): `voicenote --help`,
 *    `voicenote accounts list`, and `voicenote serve` until it answers /readyz then SIGTERM, with
 *    MCP off (the default) and on (`MCP_ENABLED=true` loads the MCP SDK and its schemas at start).
 * CPU, not wall time (bench/cpu-time.ts): the machine is shared. Medians of BENCH_ROUNDS (default 15)
 * apps and BENCH_PROCESSES (default 5) processes of each kind.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AppOptions } from '../src/app.js';
import { buildApp, openStorage } from './api/storage.js';
import { childrenCpuSeconds, processCpuSeconds } from './cpu-time.js';
import { intEnv } from './env.js';
import { commandLine, machineDescription, writeSection } from './report.js';

const ROUNDS = intEnv('BENCH_ROUNDS', 15, 1);
const PROCESSES = intEnv('BENCH_PROCESSES', 5, 1);
const BIN = fileURLToPath(new URL('../bin/voicenote.js', import.meta.url));

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const ms = (seconds: number): string => `${Math.round(seconds * 1000)} ms`;

/** One app's start, first request and close, in this process's CPU seconds. */
async function oneApp(schemaCompilers: NonNullable<AppOptions['schemaCompilers']>): Promise<number> {
  const storage = await openStorage('sqlite', undefined);
  try {
    const before = processCpuSeconds();
    const app = await buildApp(storage, {}, { schemaCompilers });
    await app.server.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.app.server.address() as { port: number };
    const answer = await fetch(`http://127.0.0.1:${port}/healthz`);
    if (answer.status !== 200) throw new Error(`/healthz answered ${answer.status}`);
    await answer.arrayBuffer();
    await app.close();
    return processCpuSeconds() - before;
  } finally {
    await storage.cleanup();
  }
}

/** A bin process to its end (`ready` set: until /readyz answers 200, then SIGTERM), in CPU seconds. */
async function oneProcess(args: string[], env: Record<string, string>, ready = false): Promise<number> {
  const dataDir = await mkdtemp(join(tmpdir(), 'voicenote-bench-start-'));
  const before = childrenCpuSeconds();
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATA_DIR: dataDir, LOG_LEVEL: 'info', PORT: '0', HOST: '127.0.0.1', MAX_EVENT_LOOP_DELAY_MS: '0', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      let asked = false;
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        output += chunk;
        const base = /"address":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(output)?.[1];
        if (!ready || asked || !base) return;
        asked = true;
        void (async () => {
          for (let i = 0; i < 600; i++) {
            const answer = await fetch(`${base}/readyz`).catch(() => undefined);
            if (answer?.status === 200) break;
            await new Promise((r) => setTimeout(r, 50));
          }
          child.kill('SIGTERM');
        })();
      });
      child.stderr.resume();
      child.on('error', reject);
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) resolve();
        else reject(new Error(`voicenote ${args.join(' ')} ended with ${code ?? signal}: ${output.slice(-500)}`));
      });
    });
    return childrenCpuSeconds() - before;
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const loadBefore = loadavg()[0]!;
  // Warm-up: the first app of a process pays for loading every module, whichever way it compiles.
  await oneApp('shared');
  const shared: number[] = [];
  const perServer: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    perServer.push(await oneApp('per-server'));
    shared.push(await oneApp('shared'));
  }

  const kinds: Array<{ label: string; args: string[]; env: Record<string, string>; ready?: boolean }> = [
    { label: '`voicenote --help`', args: ['--help'], env: {} },
    { label: '`voicenote accounts list` (a new SQLite database)', args: ['accounts', 'list'], env: {} },
    { label: '`voicenote serve` to /readyz, then SIGTERM (MCP off)', args: ['serve'], env: {}, ready: true },
    { label: '`voicenote serve` to /readyz, then SIGTERM, `MCP_ENABLED=true`', args: ['serve'], env: { MCP_ENABLED: 'true' }, ready: true },
  ];
  const processRows: string[] = [];
  for (const kind of kinds) {
    const runs: number[] = [];
    for (let i = 0; i < PROCESSES; i++) runs.push(await oneProcess(kind.args, kind.env, kind.ready));
    processRows.push(`| ${kind.label} | ${ms(median(runs))} | ${ms(Math.min(...runs))} | ${ms(Math.max(...runs))} |`);
  }

  const ratio = median(perServer) / median(shared);
  const markdown = [
    '## Starting the service',
    '',
    `Measured ${new Date().toISOString()} with \`${commandLine('node --import tsx bench/app-start.ts')}\` (source: \`bench/app-start.ts\`).`,
    '',
    machineDescription(),
    `Load average (1 min) at the start ${loadBefore.toFixed(1)}, at the end ${loadavg()[0]!.toFixed(1)}: CPU time grows a little on a busy machine (caches shared with neighbours).`,
    '',
    `CPU time (user + system), medians. An app built in a process that builds many (every test file does): createApp on a new SQLite database, listen, one \`GET /healthz\`, close; ${ROUNDS} of each kind, interleaved, after one warm-up app.`,
    '',
    '| compiled schemas | median | fastest | slowest |',
    '|---|---|---|---|',
    `| kept for the process (\`src/api/schema-compilers.ts\`, the default) | ${ms(median(shared))} | ${ms(Math.min(...shared))} | ${ms(Math.max(...shared))} |`,
    `| baseline: compiled anew for each server (Fastify's own way) | ${ms(median(perServer))} | ${ms(Math.min(...perServer))} | ${ms(Math.max(...perServer))} |`,
    '',
    `Keeping them: ${ratio.toFixed(1)}× less CPU per app after the first.`,
    '',
    `Processes of the compiled bin (\`dist/\`), ${PROCESSES} of each, CPU of the whole process from start to exit:`,
    '',
    '| process | median | fastest | slowest |',
    '|---|---|---|---|',
    ...processRows,
  ].join('\n');
  await writeSection('app-start', markdown);
  process.stdout.write(`${markdown}\n`);
}

await main();
