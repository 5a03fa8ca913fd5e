import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { getPriority } from 'node:os';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { promisify } from 'node:util';
import { createAudioPipeline, type AudioPipeline, type PreparedAudio } from '../src/audio/index.js';
import { nativeNoteFile, nativeSettings, PcmFramer } from '../src/audio/native-note.js';
import { loadNativeOpus, opusLookahead, type OpusRate } from '../src/audio/opus-encoder.js';
import { SPEECH_LIKE_FILTER } from '../src/audio/speech-like.js';
import { audioTargetFor } from '../src/platforms/registry.js';
import type { AudioServer } from './fakes/audio-server.js';
import { ffmpeg } from './fixtures/audio-fixtures.js';
import { capturingLogger, isAudioError, leftovers, type CountingFfmpeg } from './fixtures/audio-harness.js';
import { describeOggOpus, type OggOpusDescription } from './fixtures/ogg-opus-reader.js';
import { startPipelineBench, type PipelineBench } from './fixtures/pipeline-bench.js';
import { descendants } from './fixtures/processes.js';
import { it } from './fixtures/timed.js';

/**
 * Opus notes encoded in this process by the libopus binding (ffmpeg only decodes), read back with the
 * tests' own Ogg Opus reader and decoded by ffmpeg; and the ffmpeg encode the pipeline falls back to
 * when the binding does not load.
 */

const run = promisify(execFile);

/** The source's length: odd on purpose, so the last packet is trimmed. */
const SECONDS = 6.37;

/** ffmpeg's decode of a file as mono s16le at `rate`: what a player plays. */
async function decodePcm(ffmpegPath: string, path: string, rate: number): Promise<Int16Array> {
  const { stdout } = await run(ffmpegPath, ['-hide_banner', '-nostdin', '-v', 'error', '-i', path, '-f', 's16le', '-ac', '1', '-ar', String(rate), 'pipe:1'], {
    encoding: 'buffer',
    maxBuffer: 64 * 1024 * 1024,
  });
  return new Int16Array(stdout.buffer, stdout.byteOffset, stdout.length / 2);
}

/** The lag (in samples, within ±max) at which `out` matches `ref` best. */
function bestLag(ref: Int16Array, out: Int16Array, max: number): number {
  let best = 0;
  let bestScore = -Infinity;
  const end = Math.min(ref.length, out.length) - max;
  for (let lag = -max; lag <= max; lag++) {
    let s = 0;
    for (let i = max; i < end; i++) s += ref[i]! * out[i + lag]!;
    if (s > bestScore) {
      bestScore = s;
      best = lag;
    }
  }
  return best;
}

const playable = (d: OggOpusDescription): number => Number(d.lastGranule - BigInt(d.preSkip)) / 48000;

/** Granules: every audio page but the last counts the samples ended on it; the last trims within its last packet. */
function assertGranules(d: OggOpusDescription, label: string): void {
  const n = d.audioPageGranules.length;
  for (let i = 0; i < n - 1; i++) assert.equal(d.audioPageGranules[i], d.audioPageEnds[i], `${label}: granule of audio page ${i}`);
  const end = d.audioPageEnds[n - 1]!;
  assert.ok(d.lastGranule <= end && d.lastGranule > end - BigInt(d.packets.at(-1)!.samples), `${label}: last granule ${d.lastGranule} for ${end} samples`);
  assert.equal(d.pages.at(-1)!.flags & 0x04, 0x04, `${label}: the last page ends the stream`);
  assert.equal(d.pages.filter((p) => p.flags & 0x04).length, 1, `${label}: one end of stream`);
}

/**
 * A fake binding for the failure paths, written as a module the encoder processes load: `packet` is what
 * each frame encodes to; after `failAfter` frames, it throws. Returns the module's path.
 */
async function fakeBinding(dir: string, name: string, packet: Buffer, failAfter = Infinity): Promise<string> {
  const path = join(dir, `${name}.cjs`);
  await writeFile(path, `
    const packet = Buffer.from(${JSON.stringify([...packet])});
    const failAfter = ${Number.isFinite(failAfter) ? failAfter : 'Infinity'};
    exports.OpusEncoder = class {
      constructor() { this.frames = 0; }
      encode() {
        if (++this.frames > failAfter) throw new Error('the fake encoder broke');
        return Buffer.from(packet);
      }
      applyEncoderCTL() {}
      setBitrate() {}
    };
  `);
  return path;
}

describe('Opus encoded in-process by the libopus binding', () => {
  let bench: PipelineBench;
  let server: AudioServer;
  let dataDir: string;
  let ffmpegPath: string;
  let counting: CountingFfmpeg;
  let pipeline: AudioPipeline;
  let log: PipelineBench['log'];

  before(async () => {
    const speech = ['-f', 'lavfi', '-i', SPEECH_LIKE_FILTER(SECONDS, 44100), '-ac', '2'];
    bench = await startPipelineBench('native-opus', () => ({
      'speech.wav': [SECONDS, [...speech, '-c:a', 'pcm_s16le', '-f', 'wav']],
      'speech.mp3': [SECONDS, [...speech, '-c:a', 'libmp3lame', '-b:a', '96k', '-f', 'mp3']],
    }));
    ({ server, dataDir, ffmpegPath, counting, pipeline, log } = bench);
  });

  after(() => bench?.close());

  const prepare = (p: AudioPipeline, name: string, platform: 'whatsapp' | 'telegram'): Promise<PreparedAudio> =>
    p.prepare({ url: server.url(`/${name}`), target: audioTargetFor(platform) });

  it('the binding loads and encodes here (npm ci builds it from source where no prebuilt binary is reachable)', () => {
    const native = loadNativeOpus();
    assert.match(native.name, /^@discordjs\/opus/);
    const encoder = native.encoder({ sampleRate: 16000, kbps: 16, complexity: 5 });
    assert.equal(encoder.frameSamples, 320);
    assert.equal(encoder.lookahead, 104);
    assert.ok(encoder.encode(Buffer.alloc(640)).length > 0);
  });

  for (const name of ['speech.wav', 'speech.mp3']) {
    it(`WhatsApp, ${name}: a native push-to-talk note, encoded in-process, that ffmpeg plays for its length`, async () => {
      const a = await prepare(pipeline, name, 'whatsapp');
      try {
        const converted = log.converted().at(-1)!;
        assert.equal(converted.opus_encoder, 'libopus');
        assert.equal(converted.opus_kbps, 16);
        const call = (await counting.calls()).at(-1)!;
        assert.doesNotMatch(call, /libopus/, 'ffmpeg did not encode');
        assert.match(call, / -ar 16000 -c:a pcm_s16le .* pipe:1 .* pipe:3$/, 'one decode: the encoder’s PCM and the waveform’s');
        const d = describeOggOpus(await readFile(a.path));
        assert.deepEqual([d.channels, d.mapping, d.inputRate, d.preSkip, d.outputGain], [1, 0, 16000, 312, 0]);
        assert.equal(d.vendor, 'voicenote');
        assert.deepEqual(d.comments, []);
        d.packets.forEach((p, i) => {
          assert.deepEqual([p.config, p.stereo, p.code], [9, false, 3], `packet ${i}`);
          if (i < d.packets.length - 1) assert.equal(p.frameSizes.length, 3, `packet ${i} holds three frames`);
        });
        assertGranules(d, name);
        if (name === 'speech.wav') assert.ok(Math.abs(playable(d) - SECONDS) < 0.001, `plays ${playable(d)} s`);
        assert.ok(Math.abs(playable(d) - a.durationSeconds) < 0.01, `file plays ${playable(d)} s, seconds says ${a.durationSeconds}`);
        const decoded = (await decodePcm(ffmpegPath, a.path, 48000)).length / 48000;
        assert.ok(Math.abs(decoded - SECONDS) < 0.04, `ffmpeg decodes ${decoded} s of ${SECONDS}`);
        assert.ok(Math.max(...a.waveform) === 100, 'a waveform from the same decode');
      } finally {
        a.release();
      }
    });

    it(`Telegram, ${name}: 48 kHz Ogg Opus at 32 kb/s, encoded in-process, that ffmpeg plays for its length`, async () => {
      const a = await prepare(pipeline, name, 'telegram');
      try {
        const converted = log.converted().at(-1)!;
        assert.equal(converted.opus_encoder, 'libopus');
        assert.equal(converted.opus_kbps, 32);
        const d = describeOggOpus(await readFile(a.path));
        assert.deepEqual([d.channels, d.mapping, d.inputRate, d.preSkip, d.outputGain], [1, 0, 48000, 312, 0]);
        assert.equal(d.vendor, 'voicenote');
        assert.deepEqual(d.comments, []);
        assert.ok(d.packets.every((p) => p.samples === 960 && p.stereo === false), '20 ms mono packets');
        assertGranules(d, name);
        if (name === 'speech.wav') assert.ok(Math.abs(playable(d) - SECONDS) < 0.001, `plays ${playable(d)} s`);
        const decoded = (await decodePcm(ffmpegPath, a.path, 48000)).length / 48000;
        assert.ok(Math.abs(decoded - SECONDS) < 0.04, `ffmpeg decodes ${decoded} s of ${SECONDS}`);
        assert.equal(a.telegramWaveform?.length, 100);
        const kbps = (a.sizeBytes * 8) / SECONDS / 1000;
        assert.ok(kbps > 20 && kbps < 40, `${kbps.toFixed(1)} kb/s`);
      } finally {
        a.release();
      }
    });
  }

  it('one line in the log says which encoder the pipeline uses', () => {
    const said = log.lines.filter((l) => l.obj.opus_encoder !== undefined && l.msg !== 'audio converted');
    assert.equal(said.length, 1, JSON.stringify(said));
    assert.equal(said[0]!.level, 'info');
    assert.match(String(said[0]!.obj.opus_encoder), /^@discordjs\/opus/);
  });

  it("the encodes run in processes of their own, 10 below this process's priority", { skip: process.platform !== 'linux' }, async () => {
    // The notes above were encoded by this pipeline, whose encoder processes stay for the next ones.
    const encoders = (await descendants()).filter((c) => c.comm.startsWith('voicenote-enc'));
    assert.ok(encoders.length >= 1, JSON.stringify(await descendants()));
    for (const e of encoders) assert.equal(e.nice, Math.min(19, getPriority() + 10));
  });

  for (const rate of [16000, 48000] as const) {
    it(`pre-skip is the encoder's look-ahead at ${rate / 1000} kHz: the decoded note lines up with its source, sample for sample`, async () => {
      const raw = join(dataDir, `speech-${rate}.pcm`);
      await ffmpeg(ffmpegPath, ['-f', 'lavfi', '-i', SPEECH_LIKE_FILTER(3, rate), '-ac', '1', '-f', 's16le', '-c:a', 'pcm_s16le', raw]);
      const pcm = await readFile(raw);
      const profile = rate === 16000 ? 'ogg_opus_ptt' : 'ogg_opus';
      const encoder = loadNativeOpus().encoder(nativeSettings(profile, rate === 16000 ? 16 : 32));
      const packets: Buffer[] = [];
      const framer = new PcmFramer(encoder, (p) => packets.push(p));
      // Chunks of odd sizes, as a pipe may cut them.
      for (let at = 0; at < pcm.length; at += 4097) framer.push(pcm.subarray(at, at + 4097));
      const samples = framer.end();
      assert.equal(samples, pcm.length / 2);
      const file = join(dataDir, `speech-${rate}.ogg`);
      await writeFile(file, nativeNoteFile(profile, { sampleRate: encoder.sampleRate, lookahead: encoder.lookahead, packets, samples }));
      const d = describeOggOpus(await readFile(file));
      assert.equal(d.preSkip, opusLookahead(rate as OpusRate) * (48000 / rate));
      assert.equal(d.preSkip, 312);
      const source = new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length / 2);
      const decoded = await decodePcm(ffmpegPath, file, rate);
      assert.ok(Math.abs(decoded.length - source.length) <= rate / 1000, `decoded ${decoded.length} samples of ${source.length}`);
      // A wrong pre-skip shifts the whole note: 104 samples at 16 kHz, 312 at 48 kHz if none were skipped.
      // A quarter of a millisecond is left for the codec's own phase (hybrid mode at 48 kHz: 5 samples).
      const lag = bestLag(source, decoded, rate / 100);
      assert.ok(Math.abs(lag) <= rate / 4000, `decoded audio is ${lag} samples off its source`);
    });
  }

  it('without the binding, ffmpeg encodes: valid notes for both platforms, one warning', async () => {
    const fallbackLog = capturingLogger();
    const fallback = createAudioPipeline(
      { dataDir: join(dataDir, 'fallback'), ffmpegPath: counting.path, allowPrivateUrls: true, logger: fallbackLog.logger },
      { opusBinding: join(dataDir, 'no-such-binding', 'opus.node') },
    );
    try {
      const w = await prepare(fallback, 'speech.mp3', 'whatsapp');
      assert.match((await counting.calls()).at(-1)!, / -c:a libopus .* -ar 16000 /);
      const dw = describeOggOpus(await readFile(w.path));
      w.release();
      assert.deepEqual([dw.inputRate, dw.preSkip, dw.vendor], [16000, 312, 'voicenote']);
      assert.ok(dw.packets.every((p) => p.config === 9 && p.code === 3));
      assertGranules(dw, 'fallback whatsapp');
      const t = await prepare(fallback, 'speech.mp3', 'telegram');
      assert.match((await counting.calls()).at(-1)!, / -c:a libopus .* -b:a 32k .* -ar 48000 /);
      const dt = describeOggOpus(await readFile(t.path));
      t.release();
      assert.deepEqual([dt.inputRate, dt.vendor, dt.comments], [48000, 'voicenote', []]);
      assert.ok(Math.abs(playable(dt) - SECONDS) < 0.04);
      assert.deepEqual(fallbackLog.converted().map((c) => c.opus_encoder), ['ffmpeg', 'ffmpeg']);
      const warned = fallbackLog.lines.filter((l) => l.level === 'warn');
      assert.equal(warned.length, 1, 'warned once');
      assert.equal(warned[0]!.obj.opus_encoder, 'ffmpeg');
      assert.match(String(warned[0]!.obj.reason), /no-such-binding/);
    } finally {
      await fallback.close();
    }
  });

  it('the binding\'s package not installed (an optional dependency whose native build failed): ffmpeg encodes, one warning names it', async () => {
    // npm leaves out an optional dependency whose install failed: require() finds no such package.
    const absentLog = capturingLogger();
    const absent = createAudioPipeline(
      { dataDir: join(dataDir, 'absent'), ffmpegPath: counting.path, allowPrivateUrls: true, logger: absentLog.logger },
      { opusBinding: '@discordjs/opus-not-installed' },
    );
    try {
      const w = await prepare(absent, 'speech.mp3', 'whatsapp');
      assert.match((await counting.calls()).at(-1)!, / -c:a libopus .* -ar 16000 /);
      const dw = describeOggOpus(await readFile(w.path));
      w.release();
      assert.deepEqual([dw.inputRate, dw.preSkip], [16000, 312]);
      assert.deepEqual(absentLog.converted().map((c) => c.opus_encoder), ['ffmpeg']);
      const warned = absentLog.lines.filter((l) => l.level === 'warn');
      assert.equal(warned.length, 1);
      assert.match(String(warned[0]!.obj.reason), /Cannot find (module|package) '@discordjs\/opus-not-installed'/);
    } finally {
      await absent.close();
    }
  });

  it('an encoder that fails mid-note: audio_unsupported, ffmpeg stopped, nothing left behind', async () => {
    const broken = createAudioPipeline(
      { dataDir: join(dataDir, 'broken'), ffmpegPath, allowPrivateUrls: true },
      // Valid SILK wideband frames (TOC 0x48) until the 50th frame.
      { opusBinding: await fakeBinding(dataDir, 'broken', Buffer.from([0x48, 0x01, 0x02]), 50) },
    );
    try {
      await assert.rejects(prepare(broken, 'speech.mp3', 'whatsapp'), isAudioError('audio_unsupported', { message: /encoding the audio failed: the fake encoder broke/ }));
      assert.deepEqual(await leftovers(join(dataDir, 'broken')), []);
    } finally {
      await broken.close();
    }
  });

  it('frames that are not SILK wideband: tried at 16, 12 and 10 kb/s, then audio_unsupported, never sent mixed', async () => {
    const celtLog = capturingLogger();
    const celt = createAudioPipeline(
      { dataDir: join(dataDir, 'celt'), ffmpegPath: counting.path, allowPrivateUrls: true, logger: celtLog.logger },
      // TOC config 23: CELT fullband 20 ms.
      { opusBinding: await fakeBinding(dataDir, 'celt', Buffer.from([23 << 3, 0x01, 0x02])) },
    );
    const before = (await counting.calls()).length;
    try {
      await assert.rejects(prepare(celt, 'speech.wav', 'whatsapp'), isAudioError('audio_unsupported', { message: /native WhatsApp voice note: .*config 23/ }));
      const calls = (await counting.calls()).slice(before);
      assert.equal(calls.length, 3, 'one decode per bitrate');
      assert.ok(calls.every((c) => / -ar 16000 -c:a pcm_s16le /.test(c)));
      assert.match(calls[0]!, /pipe:3$/, 'the first decode draws the waveform');
      assert.doesNotMatch(calls[1]!, /pipe:3/, 'the retries do not');
    } finally {
      await celt.close();
    }
  });
});

describe('the libopus binding is optional at install', () => {
  it('package.json and package-lock.json list @discordjs/opus as an optional dependency: a failed native build is a warning, not a failed install', async () => {
    const root = join(import.meta.dirname, '..');
    const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8'));
    const lock = JSON.parse(await readFile(join(root, 'package-lock.json'), 'utf8'));
    assert.equal(pkg.dependencies['@discordjs/opus'], undefined);
    assert.match(pkg.optionalDependencies['@discordjs/opus'], /^\^/);
    // What `npm ci` installs from: the same declaration, and the package marked optional.
    assert.equal(lock.packages[''].dependencies['@discordjs/opus'], undefined);
    assert.equal(lock.packages[''].optionalDependencies['@discordjs/opus'], pkg.optionalDependencies['@discordjs/opus']);
    assert.equal(lock.packages['node_modules/@discordjs/opus'].optional, true);
  });
});
