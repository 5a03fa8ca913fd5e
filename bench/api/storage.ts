/** One storage of a bench server process: its data directory (and PostgreSQL schema), the app on it, its account. */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import pino from 'pino';
import { dropSchema } from '../pg-schema.js';
import { createAccountWithKeys } from '../../src/admin/accounts.js';
import { createApp, type App, type AppOptions } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { updatePlan } from '../../src/store/accounts.js';
import type { Storage } from './settings.js';

export interface BenchStorage {
  env: Record<string, string>;
  pgSchema?: string;
  dataDir: string;
  cleanup(): Promise<void>;
}

export async function openStorage(storage: Storage, pgUrl: string | undefined): Promise<BenchStorage> {
  const dataDir = await mkdtemp(join(tmpdir(), 'voicenote-bench-api-'));
  const removeDir = () => rm(dataDir, { recursive: true, force: true });
  if (storage === 'sqlite') return { env: { DATA_DIR: dataDir }, dataDir, cleanup: removeDir };
  const pgSchema = `bench_${randomBytes(6).toString('hex')}`;
  return {
    env: { DATA_DIR: dataDir, DATABASE_URL: pgUrl! },
    pgSchema,
    dataDir,
    async cleanup() {
      await dropSchema(pgUrl!, pgSchema);
      await removeDir();
    },
  };
}

/** The app on `storage`, worker off, silent; `appOptions`: what a bench sets that no environment variable does. */
export async function buildApp(storage: BenchStorage, extraEnv: Record<string, string> = {}, appOptions: Pick<AppOptions, 'sqliteBusyTimeoutMs' | 'schemaCompilers'> = {}): Promise<App> {
  const config = loadConfig({
    ...storage.env,
    LOG_LEVEL: 'silent',
    SECRET_KEY: randomBytes(32).toString('base64'),
    AUDIO_ALLOW_PRIVATE_URLS: 'true',
    SANDBOX_LATENCY_MS: '0',
    // Load shedding off: on this shared machine a start-up stall would turn the first requests into 503s.
    MAX_EVENT_LOOP_DELAY_MS: '0',
    ...(process.env.FFMPEG_PATH ? { FFMPEG_PATH: process.env.FFMPEG_PATH } : {}),
    ...extraEnv,
  });
  return createApp(config, {
    worker: false,
    logger: pino({ level: 'silent' }),
    ...(storage.pgSchema ? { pgSchema: storage.pgSchema } : {}),
    ...appOptions,
  });
}

/** An enterprise account whose send rate limit and quota never get in the way. */
export async function benchAccount(app: App): Promise<{ accountId: string; testKey: string; liveKey: string }> {
  const db = app.services.db.kysely;
  const created = await createAccountWithKeys(db, { name: 'bench', plan: 'enterprise' });
  await updatePlan(db, created.account.id, { plan: 'enterprise', rateLimit: 10_000_000, quota: 10_000_000 });
  return { accountId: created.account.id, testKey: created.testKey.secret, liveKey: created.liveKey.secret };
}

export async function inject(app: App, method: 'GET' | 'POST', url: string, key: string | undefined, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await app.server.app.inject({
    method,
    url,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
  });
  return { status: res.statusCode, json: res.body ? JSON.parse(res.body) : undefined };
}

export async function countMessages(app: App): Promise<{ total: number; delivered: number; failed: number }> {
  const rows = await app.services.db.kysely
    .selectFrom('messages')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy('status')
    .execute();
  const by = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  return {
    total: rows.reduce((s, r) => s + Number(r.n), 0),
    delivered: by.delivered ?? 0,
    failed: by.failed ?? 0,
  };
}

/** A PostgreSQL URL whose connections use this schema (the worker process has no other way to be told). */
export function withSearchPath(url: string, schema: string): string {
  return `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
}

export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]+):[^@/]*@/i, '$1:***@');
}

export async function postgresReachable(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  try {
    await client.connect();
    await client.query('select 1');
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    await client.end().catch(() => undefined);
  }
}
