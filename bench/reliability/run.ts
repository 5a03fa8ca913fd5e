/** The set-up every reliability script shares, and its tear-down, in one place. */
import { startCluster, type Cluster } from './cluster.js';
import { startAudio, startFakeTelegram, type FakeTelegram } from './fakes.js';
import type { FakeFaults } from './fake-telegram-process.js';
import { freshDatabase } from './postgres.js';

export interface RunParts {
  cluster: Cluster;
  telegram: FakeTelegram;
  audio: Awaited<ReturnType<typeof startAudio>>;
}

export interface RunOptions {
  /** The fake Bot API's faults (none by default). */
  faults?: FakeFaults;
  /** Environment of every voicenote process, beside the cluster's own. */
  extraEnv?: Record<string, string>;
  /** Runs after the script's body, before the processes are stopped (put back what the run changed). */
  beforeStop?: () => Promise<void>;
  /** Runs last, after everything is stopped, however the run ended. */
  afterStop?: () => Promise<void>;
}

/**
 * A fresh database, the fake Bot API, an audio host, and a cluster of voicenote processes (none started
 * yet: the script starts the ones it needs); `body` runs with them, and everything is stopped after it,
 * however it ended.
 */
export async function withCluster(options: RunOptions, body: (parts: RunParts) => Promise<void>): Promise<void> {
  await freshDatabase();
  const telegram = await startFakeTelegram(options.faults);
  const audio = await startAudio();
  try {
    const cluster = await startCluster({ telegramApiRoot: telegram.apiRoot, ...(options.extraEnv ? { extraEnv: options.extraEnv } : {}) });
    try {
      await body({ cluster, telegram, audio });
    } finally {
      await options.beforeStop?.();
      await cluster.stopAll();
    }
  } finally {
    await telegram.close();
    await audio.server.close();
    await options.afterStop?.();
  }
}
