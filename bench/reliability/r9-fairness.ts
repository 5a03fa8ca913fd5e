/**
 * R9: one account misbehaving does not slow another. Account B sends REL_B_MESSAGES (40) sandbox voice
 * notes, one every 100 ms, with a webhook endpoint that answers at once; we time each note from its
 * acceptance to `delivered` (the database's delivered_at) and to its voice_note.delivered webhook
 * arriving at B's receiver. Twice, each on fresh storage and a fresh service (createApp in this process:
 * API, worker and webhook sender together, WORKER_CONCURRENCY 32, SANDBOX_LATENCY_MS 300):
 *   1. B alone;
 *   2. while account A has REL_A_MESSAGES (96) notes queued whose audio host never answers (each
 *      attempt holds its slot until the 30 s fetch timeout) and 16 webhook endpoints that never answer
 *      (4 test events each, 64 deliveries, each try held 10 s, the sender's timeout), all sent before B starts.
 * Shows B's p50/p99 in both runs and their ratio (the goal: within 2×). A short run of 5 notes first,
 * not counted, so that neither measured run pays for the process's warm-up.
 *   BENCH_DATABASE_URL=postgres://… (default: SQLite) node --import tsx bench/reliability/r9-fairness.ts
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createAccountWithKeys } from '../../src/admin/accounts.js';
import { createApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { updatePlan } from '../../src/store/accounts.js';
import { startAudioServer, type AudioServer } from '../../test/fakes/audio-server.js';
import { sharedFixtures, testFfmpegPath } from '../../test/fixtures/audio-fixtures.js';
import { makeDataDir, removeDir } from '../../test/fixtures/audio-harness.js';
import { dropSchema } from '../pg-schema.js';

const B_MESSAGES = Number(process.env.REL_B_MESSAGES ?? 40);
const A_MESSAGES = Number(process.env.REL_A_MESSAGES ?? 96);
const A_ENDPOINTS = 16;
const A_EVENTS_PER_ENDPOINT = 4;
const PG_URL = process.env.BENCH_DATABASE_URL?.trim() || undefined;

interface Receiver {
  url: string;
  /** Message id → when its voice_note.delivered arrived. */
  arrivals: Map<string, number>;
  close(): Promise<void>;
}

/** A webhook receiver that answers 200 at once (hang: never answers). */
async function startReceiver(hang: boolean): Promise<Receiver> {
  const arrivals = new Map<string, number>();
  const open = new Set<import('node:http').ServerResponse>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (hang) {
        open.add(res);
        return;
      }
      const at = Date.now();
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { type: string; data: { id: string } };
        if (body.type === 'voice_note.delivered' && !arrivals.has(body.data.id)) arrivals.set(body.data.id, at);
      } catch {
        // not ours
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    arrivals,
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of open) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function inject(app: App, method: 'GET' | 'POST', url: string, key: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await app.server.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
  });
  return { status: res.statusCode, json: res.body ? JSON.parse(res.body) : undefined };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

interface RunResult {
  delivery: number[];
  webhook: number[];
  undelivered: number;
}

async function run(audio: AudioServer, misbehave: boolean, bMessages = B_MESSAGES): Promise<RunResult> {
  const dataDir = await makeDataDir('r9');
  const pgSchema = PG_URL ? `r9_${randomBytes(5).toString('hex')}` : undefined;
  const config = loadConfig({
    DATA_DIR: dataDir,
    AUDIO_ALLOW_PRIVATE_URLS: 'true',
    SANDBOX_LATENCY_MS: '300',
    LOG_LEVEL: 'silent',
    MAX_EVENT_LOOP_DELAY_MS: '0',
    SHUTDOWN_GRACE_MS: '0',
    SECRET_KEY: randomBytes(32).toString('base64'),
    ...(PG_URL ? { DATABASE_URL: PG_URL } : {}),
  });
  const app = await createApp(config, { worker: true, logger: pino({ level: 'silent' }), ...(pgSchema ? { pgSchema } : {}) });
  const alive = await startReceiver(false);
  const dead = await startReceiver(true);
  try {
    const db = app.services.db.kysely;
    const make = async (name: string) => {
      const created = await createAccountWithKeys(db, { name, plan: 'enterprise' });
      await updatePlan(db, created.account.id, { plan: 'enterprise', rateLimit: 1_000_000, quota: 1_000_000 });
      return created.testKey.secret;
    };
    const b = await make('B');
    const hook = await inject(app, 'POST', '/api/v1/webhook_endpoints', b, { url: alive.url, events: ['voice_note.delivered'] });
    if (hook.status !== 201) throw new Error(`B's endpoint: ${hook.status}`);
    if (misbehave) {
      const a = await make('A');
      for (let i = 0; i < A_ENDPOINTS; i++) {
        const created = await inject(app, 'POST', '/api/v1/webhook_endpoints', a, { url: `${dead.url}/${i}`, events: ['voice_note.delivered'] });
        if (created.status !== 201) throw new Error(`A's endpoint: ${created.status}`);
        for (let k = 0; k < A_EVENTS_PER_ENDPOINT; k++) await inject(app, 'POST', `/api/v1/webhook_endpoints/${created.json.id}/test`, a, {});
      }
      for (let i = 0; i < A_MESSAGES; i++) {
        const body = { platform: 'telegram', recipient: '123456789', audio_url: audio.url(`/never.ogg?n=${i}`), session: { bot_token: '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ' } };
        const res = await inject(app, 'POST', '/api/v1/send', a, body);
        if (res.status !== 202) throw new Error(`A's send: ${res.status}`);
      }
      // A holds its slots before B starts.
      await sleep(1_000);
    }
    const sent: { id: string; at: number }[] = [];
    for (let i = 0; i < bMessages; i++) {
      const body = { platform: 'telegram', recipient: '123456789', audio_url: audio.url('/voice.ogg'), session: { bot_token: '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ' } };
      const res = await inject(app, 'POST', '/api/v1/send', b, body);
      if (res.status !== 202) throw new Error(`B's send: ${res.status}`);
      sent.push({ id: res.json.id, at: Date.parse(res.json.created_at) });
      await sleep(100);
    }
    const deadline = Date.now() + 300_000;
    while (alive.arrivals.size < sent.length && Date.now() < deadline) await sleep(100);
    const rows = await db
      .selectFrom('messages')
      .select(['id', 'created_at', 'delivered_at'])
      .where('id', 'in', sent.map((s) => s.id))
      .execute();
    const delivery = rows.filter((r) => r.delivered_at !== null).map((r) => Number(r.delivered_at) - Number(r.created_at));
    const webhook = sent.filter((s) => alive.arrivals.has(s.id)).map((s) => alive.arrivals.get(s.id)! - s.at);
    return { delivery, webhook, undelivered: sent.length - delivery.length };
  } finally {
    await app.close();
    await alive.close();
    await dead.close();
    await removeDir(dataDir);
    if (pgSchema) await dropSchema(PG_URL!, pgSchema);
  }
}

const fixtures = await sharedFixtures(await testFfmpegPath());
const audio = await startAudioServer();
audio.route('/voice.ogg', { kind: 'file', path: fixtures['voice.ogg'], contentType: 'audio/ogg' });
audio.route('/never.ogg', { kind: 'stall', beforeHeaders: true });
try {
  // A first, short run not counted: code loaded and compiled, the audio fixtures made.
  await run(audio, false, 5);
  const alone = await run(audio, false);
  const crowded = await run(audio, true);
  const fmt = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  const line = (label: string, r: RunResult) =>
    `| ${label} | ${r.delivery.length}/${B_MESSAGES} | ${fmt(percentile(r.delivery, 50))} | ${fmt(percentile(r.delivery, 99))} | ${r.webhook.length}/${B_MESSAGES} | ${fmt(percentile(r.webhook, 50))} | ${fmt(percentile(r.webhook, 99))} |`;
  console.log(`storage: ${PG_URL ? 'postgres' : 'sqlite'}`);
  console.log('| run | B delivered | delivery p50 | delivery p99 | B webhooks | webhook p50 | webhook p99 |');
  console.log('|---|---|---|---|---|---|---|');
  console.log(line('B alone', alone));
  console.log(line(`B while A misbehaves (${A_MESSAGES} hanging notes, ${A_ENDPOINTS} silent endpoints)`, crowded));
  console.log(
    `ratio p99: delivery ${(percentile(crowded.delivery, 99) / percentile(alone.delivery, 99)).toFixed(2)}×, webhook ${(percentile(crowded.webhook, 99) / percentile(alone.webhook, 99)).toFixed(2)}×`,
  );
} finally {
  await audio.close();
}
