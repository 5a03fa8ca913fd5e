/** The processes the API bench starts: the fake Bot API, the HTTP server, the service's own worker. */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { nodeFlags } from '../env.js';
import { HTTP_SERVER, TELEGRAM_PROCESS, VOICENOTE_BIN } from './settings.js';
import type { BenchStorage } from './storage.js';

export interface FakeCounts {
  answered: number;
  floodRefusals: number;
  /** The fake's process.cpuUsage(), user + system, in µs. */
  cpuMicros: number;
}

export async function startTelegramProcess(): Promise<{
  apiRoot: string;
  child: ChildProcess;
  answered(): Promise<FakeCounts>;
  stop(): Promise<void>;
}> {
  const child = fork(TELEGRAM_PROCESS, ['--flood-limits'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const apiRoot = await new Promise<string>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { apiRoot: string }).apiRoot));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`fake Telegram exited with ${code}`)));
  });
  return {
    apiRoot,
    child,
    answered: () =>
      new Promise((resolve) => {
        child.once('message', (m) => resolve(m as FakeCounts));
        child.send('count');
      }),
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.disconnect();
      }),
  };
}

/** The HTTP phase's server process (bench/http-server.mjs: the compiled service, no tsx), once it listens. */
export async function startHttpServer(
  storage: BenchStorage,
  sendBody: Record<string, unknown>,
  readKeys: number,
): Promise<{ child: ChildProcess; url: string; messageId: string; readKeys: string[]; sendKey: string; request(command: 'count'): Promise<{ count: number }>; close(): Promise<void> }> {
  const child = fork(HTTP_SERVER, [], {
    execArgv: nodeFlags('BENCH_SERVER_NODE_OPTIONS'),
    env: {
      PATH: process.env.PATH ?? '',
      ...storage.env,
      ...(storage.pgSchema ? { BENCH_PG_SCHEMA: storage.pgSchema } : {}),
      BENCH_SEND_BODY: JSON.stringify(sendBody),
      BENCH_READ_KEYS: String(readKeys),
      ...(process.env.FFMPEG_PATH ? { FFMPEG_PATH: process.env.FFMPEG_PATH } : {}),
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = await new Promise<{ url: string; messageId: string; readKeys: string[]; sendKey: string }>((resolve, reject) => {
    child.once('message', (m) => resolve(m as { url: string; messageId: string; readKeys: string[]; sendKey: string }));
    void exited.then((code) => reject(new Error(`the HTTP server process exited with ${code} before it listened`)));
  });
  return {
    child,
    ...ready,
    request: (command) =>
      new Promise((resolve) => {
        child.once('message', (m) => resolve(m as { count: number }));
        child.send(command);
      }),
    async close() {
      child.send('close');
      await exited;
    },
  };
}

/** The service's own `voicenote worker` (bin/voicenote.js, from dist/), as it runs in production. */
export function startWorkerProcess(env: Record<string, string>): { child: ChildProcess; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [...nodeFlags('BENCH_WORKER_NODE_OPTIONS'), VOICENOTE_BIN, 'worker'], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited };
}
