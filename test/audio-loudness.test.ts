import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { createAudioPipeline, type AudioPipeline } from '../src/audio/index.js';
import { audioTargetFor } from '../src/platforms/registry.js';
import { startAudioServer, type AudioServer } from './fakes/audio-server.js';
import { ffmpeg, testFfmpegPath } from './fixtures/audio-fixtures.js';
import { makeDataDir, removeDir } from './fixtures/audio-harness.js';
import { espeakSpeech } from './fixtures/speech.js';

/**
 * A loud stereo upload must not come out louder than it went in, nor clipped: the mono note a
 * recipient hears keeps the loudness of the source's channels (within 1 dB) and no sample reaches
 * full scale. The source is speech (espeak-ng) at 16 kHz, so every platform's note carries its whole
 * band, raised by this file's own code to a peak of −1.5 dBFS in both channels; each note is decoded
 * to 32-bit float PCM (where a clipped sample shows as |x| ≥ 1) and measured here.
 */

const run = promisify(execFile);
const RATE = 16000;
const PEAK_DBFS = -1.5;

/** The samples of a 16-bit PCM WAV as floats (this file's own reader: the canonical 44-byte header). */
function readWav16(file: Buffer): Float64Array {
  assert.equal(file.toString('ascii', 0, 4), 'RIFF');
  assert.equal(file.readUInt16LE(34), 16, '16-bit PCM');
  const data = file.indexOf('data', 12);
  const length = file.readUInt32LE(data + 4);
  const x = new Float64Array(length / 2);
  for (let i = 0; i < x.length; i++) x[i] = file.readInt16LE(data + 8 + i * 2) / 32768;
  return x;
}

/** 16-bit PCM WAV, the same signal in both channels. */
function stereoWav(x: Float64Array): Buffer {
  const data = Buffer.alloc(x.length * 4);
  x.forEach((v, i) => {
    const s = Math.round(Math.max(-1, Math.min(1, v)) * 32767);
    data.writeInt16LE(s, i * 4);
    data.writeInt16LE(s, i * 4 + 2);
  });
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(2, 22);
  h.writeUInt32LE(RATE, 24);
  h.writeUInt32LE(RATE * 4, 28);
  h.writeUInt16LE(4, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36);
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

const rms = (x: ArrayLike<number>): number => {
  let s = 0;
  for (let i = 0; i < x.length; i++) s += x[i]! * x[i]!;
  return Math.sqrt(s / x.length);
};
const dB = (ratio: number): number => 20 * Math.log10(ratio);

describe('loud stereo sources: the mono note keeps their loudness and is not clipped', () => {
  let ffmpegPath: string;
  let dataDir: string;
  let server: AudioServer;
  let pipeline: AudioPipeline;
  let sourceRms: number;

  before(async () => {
    ffmpegPath = await testFfmpegPath();
    dataDir = await makeDataDir('loudness');
    const speech = join(dataDir, 'speech.wav');
    await espeakSpeech(ffmpegPath, speech, { seconds: 12, rate: RATE });
    const signal = readWav16(await readFile(speech));
    const peak = signal.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    const gain = 10 ** (PEAK_DBFS / 20) / peak;
    for (let i = 0; i < signal.length; i++) signal[i] = signal[i]! * gain;
    sourceRms = rms(signal);
    const wav = join(dataDir, 'loud.wav');
    await writeFile(wav, stereoWav(signal));
    // The uploads where the clipping was heard: compressed stereo at 44.1 kHz, which ffmpeg decodes to float.
    await ffmpeg(ffmpegPath, ['-i', wav, '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '192k', '-f', 'mp3', join(dataDir, 'loud.mp3')]);
    await ffmpeg(ffmpegPath, ['-i', wav, '-ar', '44100', '-c:a', 'aac', '-b:a', '192k', '-f', 'ipod', join(dataDir, 'loud.m4a')]);
    server = await startAudioServer();
    for (const name of ['loud.mp3', 'loud.m4a', 'loud.wav']) {
      server.route(`/${name}`, { kind: 'file', path: join(dataDir, name), contentType: 'application/octet-stream' });
    }
    pipeline = createAudioPipeline({ dataDir: join(dataDir, 'data'), ffmpegPath, allowPrivateUrls: true });
  });

  after(async () => {
    await pipeline.close();
    await server.close();
    await removeDir(dataDir);
  });

  async function decodedFloat(path: string): Promise<Float32Array> {
    const { stdout } = await run(ffmpegPath, ['-hide_banner', '-nostdin', '-v', 'error', '-i', path, '-f', 'f32le', '-acodec', 'pcm_f32le', 'pipe:1'], {
      encoding: 'buffer',
      maxBuffer: 64 * 1024 * 1024,
    });
    const aligned = Buffer.from(stdout);
    return new Float32Array(aligned.buffer, aligned.byteOffset, aligned.length / 4);
  }

  for (const name of ['loud.mp3', 'loud.m4a', 'loud.wav']) {
    for (const platform of ['whatsapp', 'telegram', 'linkedin'] as const) {
      it(`${name} → ${platform}: no sample at full scale, loudness within 1 dB of the source`, async () => {
        const a = await pipeline.prepare({ url: server.url(`/${name}`), target: audioTargetFor(platform) });
        try {
          const pcm = await decodedFloat(a.path);
          assert.ok(pcm.length > 0);
          const peak = pcm.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
          assert.ok(peak < 1, `peak ${peak.toFixed(3)} (${dB(peak).toFixed(2)} dBFS): clipped`);
          const change = dB(rms(pcm) / sourceRms);
          assert.ok(Math.abs(change) <= 1, `loudness changed by ${change.toFixed(2)} dB (source ${dB(sourceRms).toFixed(2)} dBFS RMS)`);
        } finally {
          a.release();
        }
      });
    }
  }
});
