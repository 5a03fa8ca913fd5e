// scratch: cost of a send batch's statements and commit on SQLite, with and without some indexes
import SqliteDatabase from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDb, migrate } from '../src/store/db.js';
import { MESSAGE_INSERT_COLUMNS } from '../src/store/hot-path.js';
import { placeholders } from '../src/store/fixed-statement.js';
import { newMessageId } from '../src/core/ids.js';

const drop = (process.env.DROP ?? '').split(',').filter(Boolean);
const batch = Number(process.env.BATCH ?? 8);
const dir = mkdtempSync(join(tmpdir(), 'cb-'));
const db = await openDb({ databaseUrl: undefined, dataDir: dir });
await migrate(db);
await db.close();
const w = new SqliteDatabase(join(dir, 'voicenote.db'));
w.pragma('journal_mode = wal'); w.pragma('synchronous = normal'); w.pragma('cache_size = -2000');
for (const d of drop) w.exec(`drop index ${d}`);
const ins = w.prepare(`insert into messages (${MESSAGE_INSERT_COLUMNS.join(', ')}, next_attempt_at) values (${placeholders(MESSAGE_INSERT_COLUMNS.length)}, ${process.env.PLAIN ? '?' : "max(cast(unixepoch('subsec') * 1000 as integer), ?)"})`);
const now0 = Date.now();
const row = (i: number) => MESSAGE_INSERT_COLUMNS.map((c) => ({ id: newMessageId(Date.now()), account_id: 'acc_1', env: 'test', platform: 'telegram', recipient: String(100000 + ((i * 7919) % 1000)), audio_url: 'https://example.com/a.mp3', recording_indicator: 0, credentials: 'x'.repeat(200), sender_key: `bot${i % 100}`, request_id: 'req', status: 'queued', attempts: 0, next_attempt_at: now0, period_start: 0, created_at: Date.now(), updated_at: Date.now(), cancel_on_reply: 0 } as Record<string, unknown>)[c] ?? null);
const pre = Array.from({ length: 40000 }, (_, k) => row(k));
let tBegin = 0n, tIns = 0n, tCommit = 0n; const N = Number(process.env.N ?? 3000);
let i = 0;
// warm
for (let b = 0; b < 300; b++) { w.exec('begin immediate'); for (let k = 0; k < batch; k++) ins.run(...row(i++), 0); w.exec('commit'); }
for (let b = 0; b < N; b++) {
  const a = process.hrtime.bigint(); w.exec('begin immediate');
  const c = process.hrtime.bigint(); for (let k = 0; k < batch; k++) ins.run(...(process.env.PRE ? pre[i++ % 40000]! : row(i++)), 0);
  const d = process.hrtime.bigint(); w.exec('commit'); const e = process.hrtime.bigint();
  tBegin += c - a; tIns += d - c; tCommit += e - d;
  if (b % 200 === 0) w.pragma('wal_checkpoint(PASSIVE)');
}
const per = (t: bigint) => (Number(t) / 1000 / (N * batch)).toFixed(1);
console.log(`drop=[${drop}] batch=${batch}: per send µs begin ${per(tBegin)} insert ${per(tIns)} commit ${per(tCommit)} total ${per(tBegin + tIns + tCommit)}`);
