/**
 * A CSV import of 10,000 suppressions: `node --import tsx bench/suppression-import.ts` (PostgreSQL too
 * when BENCH_PG_URL is set, e.g. postgres://postgres@127.0.0.1:5432/test). What `voicenote suppressions
 * import FILE.csv` does, minus the process start: the file read and parsed (readSuppressionCsv), sent
 * over loopback HTTP in calls of 1,000 (importSuppressions, the CLI's own code), to an app with its
 * worker off and 500 notes of the account waiting (so each call also looks for notes to cancel). Then
 * one send to the last row's recipient, which must be refused (the import applies at once).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readSuppressionCsv } from '../src/core/suppression-csv.js';
import { importSuppressions } from '../src/cli/suppressions-command.js';
import { ApiClient } from '../src/cli/http.js';
import { benchAccount, buildApp, openStorage } from './api/storage.js';
import { intEnv } from './env.js';
import { botToken } from './reliability/fakes.js';
import { commandLine, machineDescription, writeSection } from './report.js';

const ROWS = intEnv('BENCH_ROWS', 10_000, 1);
const WAITING = intEnv('BENCH_WAITING', 500, 0);
const RUNS = intEnv('BENCH_RUNS', 3, 1);

async function measure(storageName: 'sqlite' | 'postgres'): Promise<{ storage: string; runs: number[]; refused: boolean }> {
  const runs: number[] = [];
  let refused = true;
  for (let run = 0; run < RUNS; run++) {
    const storage = await openStorage(storageName, process.env.BENCH_PG_URL);
    const app = await buildApp(storage);
    const dir = await mkdtemp(join(tmpdir(), 'voicenote-bench-import-'));
    try {
      await app.server.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.server.app.server.address() as { port: number };
      const account = await benchAccount(app);
      const client = new ApiClient(`http://127.0.0.1:${port}/api/v1`, account.testKey);
      const session = { bot_token: botToken('import', run) };
      for (let i = 0; i < WAITING; i++) {
        const answer = await client.send({ platform: 'telegram', recipient: String(5_000_000 + i), audio_url: 'http://127.0.0.1:9/a.ogg', session, send_at: new Date(Date.now() + 86_400_000).toISOString() } as never);
        if (!answer.ok) throw new Error(`setup send: ${JSON.stringify(answer.error)}`);
      }
      const file = join(dir, 'suppressions.csv');
      const lines = ['platform,recipient,note', ...Array.from({ length: ROWS }, (_, i) => `telegram,${4_917_000_000 + i},imported`)];
      await writeFile(file, `${lines.join('\n')}\n`);
      const started = performance.now();
      const rows = readSuppressionCsv(await readFile(file, 'utf8'));
      const result = await importSuppressions(client, rows);
      runs.push(performance.now() - started);
      if (result.listed !== ROWS) throw new Error(`listed ${result.listed} of ${ROWS}`);
      const after = await client.send({ platform: 'telegram', recipient: String(4_917_000_000 + ROWS - 1), audio_url: 'http://127.0.0.1:9/a.ogg', session } as never);
      refused &&= !after.ok && after.error.code === 'recipient_suppressed';
    } finally {
      await app.close();
      await storage.cleanup();
      await rm(dir, { recursive: true, force: true });
    }
  }
  return { storage: storageName, runs, refused };
}

const results = [await measure('sqlite'), ...(process.env.BENCH_PG_URL ? [await measure('postgres')] : [])];
const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const section = `## Suppression list import

Measured ${new Date().toISOString()} with \`${commandLine('node --import tsx bench/suppression-import.ts')}\` (source: \`bench/suppression-import.ts\`).

${machineDescription()}

A CSV file of ${ROWS.toLocaleString('en-US')} Telegram recipients read, parsed and sent as \`voicenote suppressions import\` sends it (calls of 1,000 to \`POST /api/v1/suppressions\` over loopback HTTP, the CLI's own code, without the process start), to an app with its worker off and ${WAITING} notes of the account waiting (each call also looks for notes to cancel). ${RUNS} runs per storage, each on a new database. The target is under 10 s.

| storage | fastest | median | slowest | next send to an imported recipient |
|---|---|---|---|---|
${results
  .map((r) => {
    const sorted = [...r.runs].sort((a, b) => a - b);
    return `| ${r.storage} | ${seconds(sorted[0]!)} | ${seconds(sorted[Math.floor(sorted.length / 2)]!)} | ${seconds(sorted.at(-1)!)} | ${r.refused ? '422 `recipient_suppressed`' : 'accepted (wrong)'} |`;
  })
  .join('\n')}
`;
console.log(section);
if (!process.env.BENCH_NO_WRITE) await writeSection('suppression-import', section);
