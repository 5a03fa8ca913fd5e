/** What the reliability runs deliver to and fetch from: the fake Bot API in a process of its own, an audio host. */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startAudioServer, type AudioServer } from '../../test/fakes/audio-server.js';
import { sharedFixtures, testFfmpegPath } from '../../test/fixtures/audio-fixtures.js';
import type { FakeFaults, FakeStats } from './fake-telegram-process.js';
import { sleep } from './cluster.js';

export interface FakeTelegram {
  apiRoot: string;
  stats(): Promise<FakeStats>;
  close(): Promise<void>;
}

export async function startFakeTelegram(faults: FakeFaults = {}): Promise<FakeTelegram> {
  const child = fork(fileURLToPath(new URL('./fake-telegram-process.ts', import.meta.url)), [JSON.stringify(faults)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const apiRoot = await new Promise<string>((resolve, reject) => {
    child.once('message', (m: { type: string; apiRoot: string }) => resolve(m.apiRoot));
    child.once('exit', () => reject(new Error('fake telegram exited')));
  });
  return {
    apiRoot,
    stats: () =>
      new Promise((resolve) => {
        const onMessage = (m: { type: string; stats: FakeStats }): void => {
          if (m.type !== 'stats') return;
          child.off('message', onMessage);
          resolve(m.stats);
        };
        child.on('message', onMessage);
        child.send({ type: 'stats' });
      }),
    close: async () => {
      child.send({ type: 'close' });
      await Promise.race([new Promise((r) => child.once('exit', r)), sleep(5_000)]);
      child.kill('SIGKILL');
    },
  };
}

export async function startAudio(): Promise<{ server: AudioServer; url: string }> {
  const fixtures = await sharedFixtures(await testFfmpegPath());
  const server = await startAudioServer();
  server.route('/voice.ogg', { kind: 'file', path: fixtures['voice.ogg'], contentType: 'audio/ogg' });
  return { server, url: server.url('/voice.ogg') };
}

/** A well-formed bot token of its own for message `i` of a run: the fake tells messages apart by it. */
export function botToken(run: string, i: number): string {
  return `${100000000 + i}:${`${run}${'x'.repeat(40)}`.slice(0, 20)}${String(i).padStart(16, '0')}`;
}
