import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { SPEECH_LIKE_FILTER } from '../src/audio/speech-like.js';

/** bench/starvation.ts's sources: one-minute notes nobody converted yet, each of its own bytes. */

const run = promisify(execFile);

/** A one-minute speech-like MP3 per note: a longer base, then per note its own start and pitch. */
export async function makeSources(ffmpegPath: string, dir: string, count: number): Promise<Buffer[]> {
  const base = join(dir, 'base.wav');
  await run(ffmpegPath, ['-nostdin', '-v', 'error', '-y', '-f', 'lavfi', '-i', SPEECH_LIKE_FILTER(90, 44100), '-ac', '2', base]);
  const make = async (i: number): Promise<Buffer> => {
    const out = join(dir, `note-${i}.mp3`);
    const pitch = (1 + (i % 25) * 0.006).toFixed(3);
    await run(ffmpegPath, [
      '-nostdin', '-v', 'error', '-y', '-ss', String((i * 0.37) % 25), '-i', base, '-t', '60',
      '-af', `asetrate=44100*${pitch},aresample=44100`, '-ar', '44100', '-ac', '2', '-c:a', 'libmp3lame', '-b:a', '128k', out,
    ]);
    return readFile(out);
  };
  const sources: Buffer[] = new Array(count);
  let next = 0;
  await Promise.all([0, 1].map(async () => {
    while (next < count) {
      const i = next++;
      sources[i] = await make(i);
    }
  }));
  return sources;
}

/** An ID3v2.3 tag of `padding` zero bytes: the same audio, new bytes (a new entry in the audio cache). */
export function id3Padding(padding: number): Buffer {
  const size = Buffer.from([(padding >> 21) & 0x7f, (padding >> 14) & 0x7f, (padding >> 7) & 0x7f, padding & 0x7f]);
  return Buffer.concat([Buffer.from('ID3\x03\x00\x00', 'latin1'), size, Buffer.alloc(padding)]);
}
