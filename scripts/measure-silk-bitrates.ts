/**
 * Which libopus bitrates keep every frame in SILK wideband 20 ms (TOC config 9) with the ffmpeg
 * this machine uses: `node --import tsx scripts/measure-silk-bitrates.ts [bitrates in kb/s...]`.
 * Encodes a few synthetic sources the way the WhatsApp profile does (16 kHz, mono, -application voip,
 * -frame_duration 20) at each bitrate and counts the TOC configurations of the frames.
 * The result is recorded in docs/platforms.md ("Audio").
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { resolveFfmpegPath } from '../src/audio/ffmpeg.js';
import { parseOpusPacket, readOggOpus } from '../src/audio/ogg-opus.js';
import { SPEECH_LIKE_FILTER } from '../src/audio/speech-like.js';

const run = promisify(execFile);
const ffmpeg = resolveFfmpegPath(process.env.FFMPEG_PATH);

const SOURCES: Record<string, string[]> = {
  'speech-like 44.1 kHz': ['-f', 'lavfi', '-i', SPEECH_LIKE_FILTER(20, 44100)],
  'speech-like 8 kHz': ['-f', 'lavfi', '-i', SPEECH_LIKE_FILTER(20, 8000)],
  'sine 440 Hz': ['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=44100:duration=20'],
  'pink noise': ['-f', 'lavfi', '-i', 'anoisesrc=d=20:c=pink:r=44100:a=0.3'],
  'silence': ['-f', 'lavfi', '-i', 'anullsrc=channel_layout=mono:sample_rate=44100', '-t', '20'],
};

const bitrates = process.argv.slice(2).map(Number).filter((n) => n > 0);
const rates = bitrates.length > 0 ? bitrates : [8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 64];

const dir = await mkdtemp(join(tmpdir(), 'silk-measure-'));
try {
  const { stdout, stderr } = await run(ffmpeg, ['-hide_banner', '-version']).catch((e: { stdout: string; stderr: string }) => e);
  console.log(`ffmpeg: ${(stdout || stderr).split('\n')[0]}`);
  console.log(`| source | ${rates.map((r) => `${r}k`).join(' | ')} |`);
  console.log(`| --- | ${rates.map(() => '---').join(' | ')} |`);
  for (const [name, input] of Object.entries(SOURCES)) {
    const cells: string[] = [];
    for (const kbps of rates) {
      const out = join(dir, 'out.ogg');
      await run(ffmpeg, [
        '-hide_banner', '-nostdin', '-y', '-loglevel', 'error', ...input,
        '-ac', '1', '-ar', '16000', '-c:a', 'libopus', '-application', 'voip', '-frame_duration', '20', '-b:a', `${kbps}k`, '-f', 'ogg', out,
      ]);
      const configs = new Map<number, number>();
      let frames = 0;
      for (const packet of readOggOpus(await readFile(out)).packets) {
        const p = parseOpusPacket(packet);
        for (const _ of p.frames) {
          frames++;
          configs.set(p.config, (configs.get(p.config) ?? 0) + 1);
        }
      }
      const nine = configs.get(9) ?? 0;
      cells.push(nine === frames ? 'all 9' : [...configs].sort((a, b) => b[1] - a[1]).map(([c, n]) => `${c}:${Math.round((100 * n) / frames)}%`).join(' '));
    }
    console.log(`| ${name} | ${cells.join(' | ')} |`);
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
