import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { promisify } from 'node:util';
import type { AudioPipeline, PreparedAudio } from '../src/audio/index.js';
import { SPEECH_LIKE_FILTER } from '../src/audio/speech-like.js';
import { code3Packet, parseOpusPacket, readOggOpus, writeOggOpus } from '../src/audio/ogg-opus.js';
import { NotPttFrames, repackAsPtt } from '../src/audio/whatsapp-ptt.js';
import { audioTargetFor } from '../src/platforms/registry.js';
import type { AudioServer } from './fakes/audio-server.js';
import { ffmpeg } from './fixtures/audio-fixtures.js';
import { startPipelineBench, type PipelineBench } from './fixtures/pipeline-bench.js';
import type { CountingFfmpeg } from './fixtures/audio-harness.js';
import { describeOggOpus, describeOpusPacket, type OggOpusDescription } from './fixtures/ogg-opus-reader.js';

/**
 * What each platform's app receives, read with the tests' own Ogg Opus reader (not the writer's
 * code): WhatsApp's native push-to-talk profile, Telegram's file sized for its waveform, and a
 * cache that keeps the two apart.
 */

const run = promisify(execFile);

/** Decodes with ffmpeg to 48 kHz PCM: the number of samples a player would play. */
async function ffmpegDecodedSamples(ffmpegPath: string, path: string): Promise<number> {
  const { stdout } = await run(ffmpegPath, ['-hide_banner', '-nostdin', '-v', 'error', '-i', path, '-f', 's16le', '-ac', '1', '-ar', '48000', 'pipe:1'], {
    encoding: 'buffer',
    maxBuffer: 256 * 1024 * 1024,
  });
  return stdout.length / 2;
}

function assertNativePtt(d: OggOpusDescription, label: string): void {
  assert.equal(d.channels, 1, `${label}: mono`);
  assert.equal(d.mapping, 0, `${label}: channel mapping 0`);
  assert.equal(d.inputRate, 16000, `${label}: OpusHead input rate`);
  assert.equal(d.preSkip, 312, `${label}: pre-skip of libopus at 16 kHz, in 48 kHz samples`);
  assert.doesNotMatch(d.vendor, /Lav[fc]/, `${label}: vendor`);
  assert.equal(d.vendor, 'voicenote');
  assert.deepEqual(d.comments, [], `${label}: no tags, no encoder=`);
  assert.ok(d.packets.length > 0);
  d.packets.forEach((p, i) => {
    const last = i === d.packets.length - 1;
    assert.equal(p.config, 9, `${label}: packet ${i} is SILK wideband 20 ms`);
    assert.equal(p.stereo, false);
    assert.equal(p.code, 3, `${label}: packet ${i} uses code 3`);
    if (last) assert.ok(p.frameSizes.length >= 1 && p.frameSizes.length <= 3, `${label}: last packet holds ${p.frameSizes.length}`);
    else assert.equal(p.frameSizes.length, 3, `${label}: packet ${i} holds three frames`);
  });
  // Every audio page but the last counts exactly the samples of the packets ended so far; the last
  // may trim the final packet's padding, never more than that packet.
  const n = d.audioPageGranules.length;
  for (let i = 0; i < n - 1; i++) assert.equal(d.audioPageGranules[i], d.audioPageEnds[i], `${label}: granule of audio page ${i}`);
  const end = d.audioPageEnds[n - 1]!;
  assert.ok(d.lastGranule <= end && d.lastGranule > end - BigInt(d.packets.at(-1)!.samples), `${label}: last granule ${d.lastGranule} for ${end} samples`);
}

const playable = (d: OggOpusDescription): number => Number(d.lastGranule - BigInt(d.preSkip)) / 48000;

describe('audio per platform profile', () => {
  let bench: PipelineBench;
  let server: AudioServer;
  let dataDir: string;
  let ffmpegPath: string;
  let counting: CountingFfmpeg;
  let pipeline: AudioPipeline;
  let sources: PipelineBench['sources'];
  let log: PipelineBench['log'];

  before(async () => {
    bench = await startPipelineBench('profiles', async (dataDir, ffmpegPath) => {
      const speech = (seconds: number, rate: number): string[] => ['-f', 'lavfi', '-i', SPEECH_LIKE_FILTER(seconds, rate)];
      const base = join(dataDir, 'base-8s.wav');
      await ffmpeg(ffmpegPath, [...speech(8, 16000), '-c:a', 'pcm_s16le', '-f', 'wav', base]);
      const loop = (times: number): string[] => ['-stream_loop', String(times - 1), '-i', base];
      return {
        'speech-stereo-44k.mp3': [6, [...speech(6, 44100), '-ac', '2', '-c:a', 'libmp3lame', '-b:a', '96k', '-f', 'mp3']],
        'speech-8k.wav': [6, [...speech(6, 8000), '-ac', '1', '-c:a', 'pcm_s16le', '-f', 'wav']],
        'speech-mono-48k.ogg': [6, [...speech(6, 48000), '-ac', '1', '-c:a', 'libopus', '-b:a', '32k', '-application', 'voip', '-f', 'ogg']],
        'speech.m4a': [6, [...speech(6, 44100), '-ac', '2', '-c:a', 'aac', '-b:a', '64k', '-f', 'ipod']],
        // 2 s of speech, 10 s of silence, 2 s of speech.
        'long-silences.wav': [14, [
          ...speech(2, 16000), '-f', 'lavfi', '-i', 'anullsrc=channel_layout=mono:sample_rate=16000', ...speech(2, 16000),
          '-filter_complex', '[1:a]atrim=duration=10[s];[0:a][s][2:a]concat=n=3:v=0:a=1[out]', '-map', '[out]', '-c:a', 'pcm_s16le', '-f', 'wav',
        ]],
        'one-second.wav': [1, [...speech(1, 44100), '-c:a', 'pcm_s16le', '-f', 'wav']],
        // Long clips loop 8 s of speech-like sound (synthesizing 10 minutes sample by sample is slow).
        'ten-minutes.mp3': [600, [...loop(75), '-t', '600', '-ac', '1', '-c:a', 'libmp3lame', '-b:a', '32k', '-f', 'mp3']],
        // Speech over pink noise, 5 minutes: as hard on a VBR budget as a voice note gets.
        'five-minutes-noisy.mp3': [300, [
          ...loop(38), '-f', 'lavfi', '-i', 'anoisesrc=d=300:c=pink:r=16000:a=0.05',
          '-filter_complex', '[0:a]atrim=duration=300[v];[v][1:a]amix=inputs=2:duration=first[out]', '-map', '[out]', '-ac', '1', '-c:a', 'libmp3lame', '-b:a', '48k', '-f', 'mp3',
        ]],
        // Tags and a cover picture, as music files carry them.
        'tagged-with-cover.mp3': [6, [
          ...speech(6, 44100), '-f', 'lavfi', '-i', 'color=c=red:s=64x64:d=1', '-frames:v', '1', '-map', '0:a', '-map', '1:v', '-c:v', 'png',
          '-disposition:v', 'attached_pic', '-c:a', 'libmp3lame', '-b:a', '64k', '-metadata', 'title=Cover song', '-metadata', 'artist=Somebody',
          '-id3v2_version', '3', '-f', 'mp3',
        ]],
        'tagged-mono.ogg': [6, [...speech(6, 48000), '-ac', '1', '-c:a', 'libopus', '-b:a', '24k', '-metadata', 'title=Tagged', '-f', 'ogg']],
      };
    });
    ({ server, dataDir, ffmpegPath, counting, pipeline, sources, log } = bench);
  });

  after(() => bench?.close());

  const prepare = (name: string, platform: 'whatsapp' | 'telegram' | 'linkedin'): Promise<PreparedAudio> =>
    pipeline.prepare({ url: server.url(`/${name}`), target: audioTargetFor(platform) });

  for (const name of ['speech-stereo-44k.mp3', 'speech-8k.wav', 'speech-mono-48k.ogg', 'speech.m4a', 'long-silences.wav', 'one-second.wav', 'ten-minutes.mp3']) {
    it(`WhatsApp: ${name} becomes a native push-to-talk note that ffmpeg plays for its full length`, async () => {
      const a = await prepare(name, 'whatsapp');
      try {
        assert.equal(a.mimeType, 'audio/ogg; codecs=opus');
        const bytes = await readFile(a.path);
        assert.notDeepEqual(bytes, await readFile(sources[name]!.path), 're-encoded');
        const d = describeOggOpus(bytes);
        assertNativePtt(d, name);
        const expected = sources[name]!.seconds;
        // `seconds` comes from the decode that drew the waveform; the file says the same length.
        assert.ok(Math.abs(a.durationSeconds - expected) < 0.1, `seconds ${a.durationSeconds} for ${expected}`);
        assert.ok(Math.abs(playable(d) - a.durationSeconds) < 0.01, `file plays ${playable(d)} s, seconds says ${a.durationSeconds}`);
        const decoded = await ffmpegDecodedSamples(ffmpegPath, a.path);
        assert.ok(Math.abs(decoded - Number(d.lastGranule - BigInt(d.preSkip))) <= 960, `ffmpeg decodes ${decoded} samples`);
        assert.equal(a.waveform.length, 64);
      } finally {
        a.release();
      }
    });
  }

  it('WhatsApp: the waveform shows the long silence, from the same decode as the length', async () => {
    const a = await prepare('long-silences.wav', 'whatsapp');
    const w = [...a.waveform];
    a.release();
    // Bars 12–50 lie inside the 10 s pause (2 s to 12 s of 14 s).
    assert.ok(w.slice(12, 51).every((v) => v === 0), `pause ${w.slice(12, 51)}`);
    assert.ok(Math.max(...w.slice(0, 8)) > 20 && Math.max(...w.slice(56)) > 20, `speech ${w}`);
  });

  it('WhatsApp: a note already in the native profile goes out byte for byte, without an encoder run', async () => {
    const first = await prepare('speech-stereo-44k.mp3', 'whatsapp');
    const native = join(dataDir, 'native.ogg');
    await writeFile(native, await readFile(first.path));
    first.release();
    server.route('/native.ogg', { kind: 'file', path: native });
    const encodes = await counting.encodes();
    const again = await prepare('native.ogg', 'whatsapp');
    try {
      assert.equal(again.cacheHit, false);
      assert.deepEqual(await readFile(again.path), await readFile(native));
      assert.equal(await counting.encodes(), encodes, 'no encoder ran');
    } finally {
      again.release();
    }
  });

  it('WhatsApp: frames that are not SILK wideband are never packed into a mixed stream', async () => {
    // A pure tone at 32 kb/s makes libopus switch to CELT (config 23) at 16 kHz.
    const celt = join(dataDir, 'celt.ogg');
    await ffmpeg(ffmpegPath, ['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=16000:duration=2', '-ac', '1', '-ar', '16000', '-c:a', 'libopus', '-b:a', '32k', '-application', 'voip', '-frame_duration', '20', '-f', 'ogg', celt]);
    assert.throws(() => repackAsPtt(readFileSync(celt)), (err: unknown) => err instanceof NotPttFrames && /config 23/.test(err.message));
  });

  it("WhatsApp: the repacker takes either ffmpeg's pre-skip, 312 (4.4 on) or 104 (before, in 16 kHz samples), and writes 312; any other is refused", async () => {
    // A real SILK wideband encode by the ffmpeg at hand, its OpusHead then written with each pre-skip, so
    // both spellings are tested whichever ffmpeg this machine has (the bundled 2018 one writes 104 only).
    const encoded = join(dataDir, 'pre-skip.ogg');
    await ffmpeg(ffmpegPath, ['-f', 'lavfi', '-i', SPEECH_LIKE_FILTER(2, 16000), '-ac', '1', '-ar', '16000', '-c:a', 'libopus', '-b:a', '16k', '-application', 'voip', '-frame_duration', '20', '-f', 'ogg', encoded]);
    const stream = readOggOpus(readFileSync(encoded));
    const withPreSkip = (preSkip: number): Buffer => writeOggOpus({ ...stream, head: { ...stream.head, preSkip } });
    const frames = (file: Buffer): string[] => readOggOpus(file).packets.flatMap((p) => parseOpusPacket(p).frames.map((f) => f.toString('hex')));
    for (const preSkip of [312, 104]) {
      const input = withPreSkip(preSkip);
      const out = repackAsPtt(input);
      const d = describeOggOpus(out);
      assertNativePtt(d, `pre-skip ${preSkip}`);
      assert.equal(d.lastGranule, stream.finalGranule, `pre-skip ${preSkip}: the same final granule, so the same playable length`);
      assert.deepEqual(frames(out), frames(input), `pre-skip ${preSkip}: the same frames, three to a packet`);
    }
    for (const preSkip of [0, 120, 936, 3840]) {
      assert.throws(() => repackAsPtt(withPreSkip(preSkip)), new RegExp(`pre-skip is ${preSkip}, expected 312`), `pre-skip ${preSkip}`);
    }
  });

  it('Telegram and WhatsApp get different files from one source, each cached under its own profile', async () => {
    const w = await prepare('speech.m4a', 'whatsapp');
    const t = await prepare('speech.m4a', 'telegram');
    try {
      assert.notEqual(w.contentKey, t.contentKey);
      assert.notDeepEqual(await readFile(w.path), await readFile(t.path));
      assert.equal(describeOggOpus(await readFile(t.path)).inputRate, 48000);
      assertNativePtt(describeOggOpus(await readFile(w.path)), 'whatsapp');
    } finally {
      w.release();
      t.release();
    }
    const again = await prepare('speech.m4a', 'whatsapp');
    assert.equal(again.cacheHit, true);
    assertNativePtt(describeOggOpus(await readFile(again.path)), 'cached whatsapp');
    again.release();
  });

  it('Telegram: a short note is encoded at 32 kb/s, a 5-minute one fits in 1,000,000 bytes', async () => {
    const short = await prepare('speech-stereo-44k.mp3', 'telegram');
    assert.equal(describeOggOpus(await readFile(short.path)).inputRate, 48000);
    short.release();
    assert.equal(log.converted().at(-1)?.opus_kbps, 32);
    const long = await prepare('five-minutes-noisy.mp3', 'telegram');
    try {
      assert.ok(long.sizeBytes <= 1_000_000, `${long.sizeBytes} bytes`);
      assert.ok(Math.abs(long.durationSeconds - 300) < 0.2);
      const d = describeOggOpus(await readFile(long.path));
      assert.ok(Math.abs(playable(d) - 300) < 0.1);
      assert.match(String(log.converted().at(-1)?.opus_kbps), /^2\d$/, 'a lower bitrate than 32k');
    } finally {
      long.release();
    }
  });

  it('Telegram: no cover art and no tags in the file sent', async () => {
    for (const name of ['tagged-with-cover.mp3', 'tagged-mono.ogg']) {
      const a = await prepare(name, 'telegram');
      try {
        const d = describeOggOpus(await readFile(a.path));
        assert.deepEqual(d.comments, [], name);
        assert.equal(d.vendor, 'voicenote');
        assert.equal(d.channels, 1);
      } finally {
        a.release();
      }
    }
    // A mono Ogg Opus that fits keeps its own audio packets: only the headers change.
    const src = describeOggOpus(await readFile(sources['tagged-mono.ogg']!.path));
    assert.ok(src.comments.some((c) => /^title=Tagged$/i.test(c)), 'the source has a title');
    const a = await prepare('tagged-mono.ogg', 'telegram');
    const out = describeOggOpus(await readFile(a.path));
    a.release();
    assert.deepEqual(out.packets, src.packets);
    assert.equal(out.lastGranule, src.lastGranule);
  });
});

describe('Ogg Opus writing, read back by the independent reader', () => {
  const frame = (length: number, fill: number): Buffer => Buffer.alloc(length, fill);

  it('code 3 packets: CBR when the frames are equal, VBR with one- and two-byte lengths otherwise', () => {
    const cbr = describeOpusPacket(code3Packet(9, false, [frame(40, 1), frame(40, 2), frame(40, 3)]));
    assert.deepEqual([cbr.config, cbr.code, cbr.frameSizes, cbr.samples], [9, 3, [40, 40, 40], 2880]);
    const vbr = code3Packet(9, false, [frame(300, 1), frame(10, 2), frame(1275, 3)]);
    assert.equal(vbr[1], 0x80 | 3, 'VBR flag and three frames');
    assert.deepEqual(describeOpusPacket(vbr).frameSizes, [300, 10, 1275]);
    assert.deepEqual(parseOpusPacket(vbr).frames.map((f) => f.length), [300, 10, 1275]);
    assert.throws(() => code3Packet(9, false, [frame(1276, 0)]), /over 1275/);
  });

  it('pages: packets longer than 255 bytes span lacing values, granules count every sample, CRCs check', () => {
    const packets = Array.from({ length: 40 }, (_, i) => code3Packet(9, false, [frame(200 + i, 1), frame(90, 2), frame(90, 3)]));
    const bytes = writeOggOpus({
      head: { channels: 1, preSkip: 312, inputSampleRate: 16000, outputGain: 0, mappingFamily: 0 },
      tags: { vendor: 'voicenote', comments: [] },
      packets,
      finalGranule: 40n * 2880n - 1000n,
      serial: 7,
    });
    const d = describeOggOpus(bytes);
    assert.equal(d.packets.length, 40);
    assert.equal(d.lastGranule, 40n * 2880n - 1000n);
    for (let i = 0; i < d.audioPageGranules.length - 1; i++) assert.equal(d.audioPageGranules[i], d.audioPageEnds[i]);
    assert.ok(d.audioPageGranules.length >= 3, 'a second of audio a page');
    // One flipped byte fails the CRC.
    const broken = Buffer.from(bytes);
    broken[broken.length - 5] = (broken[broken.length - 5] as number) ^ 0xff;
    assert.throws(() => describeOggOpus(broken), /CRC/);
    assert.throws(() => readOggOpus(broken), /CRC/);
  });
});
