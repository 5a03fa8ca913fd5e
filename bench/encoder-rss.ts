/**
 * Memory of an Opus encoder process: `node --import tsx bench/encoder-rss.ts` (`npm run build` first:
 * it runs the compiled encoder, as `npm start` does). Its RSS after each of BENCH_NOTES (5) one-minute
 * Telegram notes, decoded, encoded, waveform folded and written. Prints only.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { SPEECH_LIKE_FILTER } from '../src/audio/speech-like.js';
import { intEnv } from './env.js';

const NOTES = intEnv('BENCH_NOTES', 5, 1);
const compiled = (path: string) => import(pathToFileURL(resolve(path)).href);
const { EncoderProcesses } = (await compiled('dist/audio/encoder-processes.js')) as typeof import('../src/audio/encoder-processes.js');
const { resolveFfmpegPath } = (await compiled('dist/audio/index.js')) as typeof import('../src/audio/index.js');
const { OPUS_BINDING } = (await compiled('dist/audio/opus-encoder.js')) as typeof import('../src/audio/opus-encoder.js');

/** RSS in MiB of this process's encoder child. */
async function encoderRss(): Promise<number> {
  for (const task of await readdir('/proc/self/task')) {
    for (const pid of (await readFile(`/proc/self/task/${task}/children`, 'utf8')).split(' ').filter(Boolean)) {
      const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
      if (/^Name:\s+voicenote-enc/m.test(status)) return Number(/^VmRSS:\s+(\d+)/m.exec(status)![1]) / 1024;
    }
  }
  throw new Error('no encoder process');
}

const ffmpegPath = resolveFfmpegPath(process.env.FFMPEG_PATH);
const work = await mkdtemp(join(tmpdir(), 'voicenote-bench-encoder-rss-'));
const source = join(work, 'speech.mp3');
execFileSync(ffmpegPath, ['-nostdin', '-v', 'error', '-f', 'lavfi', '-i', SPEECH_LIKE_FILTER(60, 44100), '-ac', '2', '-b:a', '128k', source]);
const encoders = new EncoderProcesses({ module: OPUS_BINDING, name: 'bench', processes: 1, niceness: 10 });
const args = ['-nostdin', '-v', 'error', '-i', source, '-ac', '1', '-ar', '48000', '-c:a', 'pcm_s16le', '-f', 's16le', 'pipe:1', '-ac', '1', '-ar', '8000', '-c:a', 'pcm_s16le', '-f', 's16le', 'pipe:3'];
const after: string[] = [];
try {
  for (let i = 0; i < NOTES; i++) {
    const reply = await encoders.encode({ ffmpegPath, args, withWave: true, timeoutMs: 120_000, profile: 'ogg_opus', kbps: 32, outputPath: join(work, 'note.ogg') });
    if (reply.bytes === undefined) throw new Error(`the encode failed: ${reply.encodeError ?? reply.stderr}`);
    after.push((await encoderRss()).toFixed(1));
  }
} finally {
  await encoders.close();
  await rm(work, { recursive: true, force: true });
}
console.log(`encoder process RSS after each of ${NOTES} one-minute Telegram notes: ${after.join(', ')} MiB`);
