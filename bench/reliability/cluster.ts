/** Real `voicenote` processes (`serve --no-worker` and `worker`, from bin/voicenote.js) on the run's database, started and stopped by name. */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PG_URL, REDIS_URL } from './postgres.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin/voicenote.js');

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export interface Proc {
  name: string;
  kind: 'api' | 'worker';
  port: number;
  child: ChildProcess;
  logFile: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  exitedAt?: number;
}

export interface Cluster {
  runDir: string;
  env: Record<string, string>;
  procs: Map<string, Proc>;
  start(name: string, kind: 'api' | 'worker'): Promise<Proc>;
  /** Base URLs of the API processes that are running. */
  apis(): string[];
  /** Processes that ended without being told to (name → exit code/signal). */
  unexpectedExits: string[];
  stopAll(): Promise<void>;
}

export async function startCluster(options: { telegramApiRoot: string; extraEnv?: Record<string, string> }): Promise<Cluster> {
  const runDir = await mkdtemp(join(tmpdir(), 'voicenote-rel-'));
  const env: Record<string, string> = {
    DATABASE_URL: PG_URL,
    REDIS_URL,
    SECRET_KEY: randomBytes(32).toString('base64'),
    HOST: '127.0.0.1',
    TELEGRAM_API_ROOT: options.telegramApiRoot,
    AUDIO_ALLOW_PRIVATE_URLS: 'true',
    LOG_LEVEL: 'info',
    ...options.extraEnv,
  };
  const procs = new Map<string, Proc>();
  const told = new Set<ChildProcess>();
  const unexpectedExits: string[] = [];
  const cluster: Cluster = {
    runDir,
    env,
    procs,
    unexpectedExits,
    async start(name, kind) {
      const old = procs.get(name);
      const port = old?.port ?? (await freePort());
      const dataDir = join(runDir, `data-${name}`);
      await mkdir(dataDir, { recursive: true });
      const logFile = join(runDir, `${name}.log`);
      const logFrom = (await readFile(logFile, 'utf8').catch(() => '')).length;
      const out = createWriteStream(logFile, { flags: 'a' });
      const args = kind === 'api' ? [BIN, 'serve', '--no-worker'] : [BIN, 'worker'];
      const child = spawn(process.execPath, args, { env: { ...process.env, ...env, PORT: String(port), DATA_DIR: dataDir }, stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout!.pipe(out, { end: false });
      child.stderr!.pipe(out, { end: false });
      const proc: Proc = {
        name,
        kind,
        port,
        child,
        logFile,
        exited: new Promise((resolve) =>
          child.once('exit', (code, signal) => {
            proc.exitedAt = Date.now();
            if (!told.has(child)) unexpectedExits.push(`${name} exited by itself (code ${code}, signal ${signal})`);
            resolve({ code, signal });
          }),
        ),
      };
      const originalKill = child.kill.bind(child);
      child.kill = (signal?: NodeJS.Signals | number) => {
        told.add(child);
        return originalKill(signal);
      };
      procs.set(name, proc);
      if (kind === 'api') await waitReady(`http://127.0.0.1:${port}`, 60_000);
      else await waitLog(logFile, 'voicenote worker started', 60_000, logFrom);
      return proc;
    },
    apis() {
      return [...procs.values()].filter((p) => p.kind === 'api' && p.exitedAt === undefined).map((p) => `http://127.0.0.1:${p.port}`);
    },
    async stopAll() {
      for (const p of procs.values()) if (p.exitedAt === undefined) p.child.kill('SIGTERM');
      await Promise.race([Promise.all([...procs.values()].map((p) => p.exited)), sleep(30_000)]);
      for (const p of procs.values()) if (p.exitedAt === undefined) p.child.kill('SIGKILL');
    },
  };
  return cluster;
}

async function waitReady(base: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2_000) })).status === 200) return;
    } catch {
      // not yet
    }
    await sleep(200);
  }
  throw new Error(`${base} not ready in ${timeoutMs} ms`);
}

async function waitLog(file: string, text: string, timeoutMs: number, from: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const content = await readFile(file, 'utf8').catch(() => '');
    // Only what this start wrote: the log of an earlier start of the same process is in the same file.
    if (content.slice(from).includes(text)) return;
    await sleep(200);
  }
  throw new Error(`"${text}" not in ${file} after ${timeoutMs} ms`);
}

/** An enterprise account with limits high enough for any run; returns its keys. */
export function createAccount(cluster: Cluster, name = 'reliability'): { accountId: string; testKey: string; liveKey: string } {
  const env = { ...process.env, ...cluster.env, DATA_DIR: join(cluster.runDir, 'data-cli') };
  const created = JSON.parse(execFileSync(process.execPath, [BIN, 'accounts', 'create', '--name', name, '--plan', 'enterprise', '--json'], { env, encoding: 'utf8' })) as {
    account_id: string;
    keys: { test: { secret: string }; live: { secret: string } };
  };
  execFileSync(process.execPath, [BIN, 'accounts', 'set-plan', created.account_id, '--plan', 'enterprise', '--rate-limit', '1000000', '--quota', '1000000'], { env, encoding: 'utf8' });
  return { accountId: created.account_id, testKey: created.keys.test.secret, liveKey: created.keys.live.secret };
}
