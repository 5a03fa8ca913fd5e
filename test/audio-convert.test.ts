import assert from 'node:assert/strict';
type VoicePlatform = 'linkedin' | 'telegram' | 'whatsapp';
import { audioTargetFor } from '../src/platforms/registry.js';
import { chmod, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, afterEach, before, describe } from 'node:test';
import { descendants } from './fixtures/processes.js';
import { it } from './fixtures/timed.js';
import { createAudioPipeline, type AudioPipeline, type PreparedAudio } from '../src/audio/index.js';
import { startAudioServer, type AudioServer } from './fakes/audio-server.js';
import {
  INPUT_NAMES,
  probeWithFfmpeg,
  sharedFixtures,
  testFfmpegPath,
  type FixtureName,
} from './fixtures/audio-fixtures.js';
import { describeOggOpus } from './fixtures/ogg-opus-reader.js';
import { countingFfmpeg, isAudioError, leftovers, makeDataDir, removeDir, type CountingFfmpeg } from './fixtures/audio-harness.js';

describe('detecting and converting audio', () => {
  let server: AudioServer;
  let dataDir: string;
  let pipeline: AudioPipeline;
  let ffmpegPath: string;
  let counting: CountingFfmpeg;
  let fixtures: Record<FixtureName, string>;

  before(async () => {
    ffmpegPath = await testFfmpegPath();
    fixtures = await sharedFixtures(ffmpegPath);
    server = await startAudioServer();
    for (const [name, path] of Object.entries(fixtures)) server.route(`/${name}`, { kind: 'file', path, contentType: 'application/octet-stream' });
    dataDir = await makeDataDir('convert');
    counting = await countingFfmpeg(ffmpegPath, dataDir);
    pipeline = createAudioPipeline({ dataDir, ffmpegPath: counting.path, allowPrivateUrls: true });
  });

  afterEach(async () => {
    assert.deepEqual(await leftovers(dataDir), []);
  });

  after(async () => {
    await pipeline.close();
    await server.close();
    await removeDir(dataDir);
  });

  async function prepare(name: string, platform: VoicePlatform, durationHint?: number): Promise<PreparedAudio> {
    return pipeline.prepare({ url: server.url(`/${name}`), target: audioTargetFor(platform), durationHint });
  }

  async function assertVoiceNote(a: PreparedAudio, platform: VoicePlatform, expectedSeconds: number): Promise<void> {
    const probed = await probeWithFfmpeg(ffmpegPath, a.path);
    assert.equal(probed.channels, 1, 'mono');
    assert.equal(probed.hasVideo, false, 'no video track');
    if (platform === 'linkedin') {
      assert.match(probed.container, /mp4|m4a/);
      assert.equal(probed.codec, 'aac');
      assert.equal(probed.profile, 'LC');
      assert.equal(a.mimeType, 'audio/mp4');
      assert.equal(a.fileName, 'voice.m4a');
      assert.equal(a.format, 'm4a_aac');
      // +faststart: the index (moov) comes before the media data (mdat).
      const bytes = await readFile(a.path);
      assert.ok(bytes.indexOf('moov') < bytes.indexOf('mdat'), 'moov before mdat');
    } else {
      assert.equal(probed.container, 'ogg');
      assert.equal(probed.codec, 'opus');
      assert.equal(probed.sampleRate, 48000);
      assert.equal(a.mimeType, 'audio/ogg; codecs=opus');
      assert.equal(a.fileName, 'voice.ogg');
      assert.equal(a.format, 'ogg_opus');
    }
    assert.equal(a.sizeBytes, (await stat(a.path)).size);
    assert.ok(Math.abs(a.durationSeconds - expectedSeconds) < 0.2, `duration ${a.durationSeconds}`);
    assert.ok(Math.abs(probed.durationSeconds - expectedSeconds) < 0.3, `probed duration ${probed.durationSeconds}`);
    assert.equal(a.waveform.length, 64);
    assert.ok(a.waveform.every((v) => Number.isInteger(v) && v >= 0 && v <= 100));
    assert.match(a.sourceSha256, /^[0-9a-f]{64}$/);
  }

  for (const name of INPUT_NAMES) {
    for (const platform of ['whatsapp', 'telegram', 'linkedin'] as const) {
      it(`${name} → ${platform}: probed output has the target codec, mono, right rate`, async () => {
        const a = await prepare(name, platform);
        try {
          await assertVoiceNote(a, platform, 3);
          assert.notDeepEqual(await readFile(a.path), await readFile(fixtures[name as FixtureName]), 'was converted');
        } finally {
          a.release();
        }
      });
    }
  }

  it('keeps the audio of an OGG Opus mono 48 kHz source for Telegram (tags dropped), re-encodes it for WhatsApp', async () => {
    const original = await readFile(fixtures['voice.ogg']);
    const encodesBefore = await counting.encodes();
    const t = await prepare('voice.ogg', 'telegram');
    await assertVoiceNote(t, 'telegram', 3);
    const sent = await readFile(t.path);
    t.release();
    assert.notDeepEqual(sent, original, 'the encoder= tag is gone');
    // The same audio packets: only the headers were rewritten.
    assert.deepEqual(describeOggOpus(sent).packets, describeOggOpus(original).packets);
    assert.deepEqual(describeOggOpus(sent).comments, []);
    assert.equal(await counting.encodes(), encodesBefore, 'no encoder ran for Telegram');
    const w = await prepare('voice.ogg', 'whatsapp');
    await assertVoiceNote(w, 'whatsapp', 3);
    assert.notDeepEqual(await readFile(w.path), original, 'a 48 kHz stream is not the native profile');
    w.release();
    assert.equal(await counting.encodes(), encodesBefore + 1);
  });

  it('passes an M4A AAC-LC mono source to LinkedIn byte for byte', async () => {
    const original = await readFile(fixtures['voice.m4a']);
    const a = await prepare('voice.m4a', 'linkedin');
    await assertVoiceNote(a, 'linkedin', 3);
    assert.deepEqual(await readFile(a.path), original);
    a.release();
  });

  it('converts those same voice files when the other platform needs the other format', async () => {
    const toLinkedIn = await prepare('voice.ogg', 'linkedin');
    await assertVoiceNote(toLinkedIn, 'linkedin', 3);
    toLinkedIn.release();
    const toWhatsApp = await prepare('voice.m4a', 'whatsapp');
    await assertVoiceNote(toWhatsApp, 'whatsapp', 3);
    toWhatsApp.release();
  });

  it('a 75-second file is audio_too_long for LinkedIn, without running the encoder', async () => {
    const encodesBefore = await counting.encodes();
    await assert.rejects(prepare('long-75s.mp3', 'linkedin'), isAudioError('audio_too_long', { transient: false, message: /75\.\d s/ }));
    assert.equal(await counting.encodes(), encodesBefore);
  });

  it('...and fine for WhatsApp, where the detected duration is reported', async () => {
    const a = await prepare('long-75s.mp3', 'whatsapp');
    await assertVoiceNote(a, 'whatsapp', 75);
    a.release();
  });

  it("applies the limits to the file's measured length and reports it, whatever duration the caller gave", async () => {
    await assert.rejects(prepare('long-75s.mp3', 'linkedin', 59), isAudioError('audio_too_long'));
    const long = await prepare('tone.mp3', 'linkedin', 61);
    assert.ok(Math.abs(long.durationSeconds - 3) < 0.2, `measured ${long.durationSeconds}`);
    long.release();
    const short = await prepare('tone.mp3', 'whatsapp', 500);
    assert.ok(Math.abs(short.durationSeconds - 3) < 0.2, `measured ${short.durationSeconds}`);
    short.release();
  });

  for (const [name, why] of [
    ['page.html', /not a readable audio file/],
    ['empty.bin', /empty/],
    ['corrupt.bin', /not a readable audio file/],
    ['truncated.m4a', /./],
    ['truncated.mp3', /truncated/],
  ] as const) {
    it(`${name} is audio_unsupported (permanent) for every platform`, async () => {
      for (const platform of ['whatsapp', 'linkedin'] as const) {
        await assert.rejects(prepare(name, platform), isAudioError('audio_unsupported', { transient: false, message: why }));
      }
    });
  }

  it('error messages do not leak server-side paths', async () => {
    await assert.rejects(prepare('corrupt.bin', 'whatsapp'), (err: Error) => !err.message.includes(dataDir) && !err.message.includes('/tmp/'));
  });

  it('a video file with no audio track is audio_unsupported', async () => {
    const { ffmpeg } = await import('./fixtures/audio-fixtures.js');
    const path = `${dataDir}/silent-video.mp4`;
    await ffmpeg(ffmpegPath, ['-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=5:duration=2', '-c:v', 'libx264', '-preset', 'ultrafast', '-f', 'mp4', path]);
    server.route('/silent-video.mp4', { kind: 'file', path });
    await assert.rejects(prepare('silent-video.mp4', 'whatsapp'), isAudioError('audio_unsupported'));
  });

  it('the waveform follows the audio: loud first half, silent second half', async () => {
    const a = await prepare('sine-then-silence.wav', 'whatsapp');
    const w = [...a.waveform];
    a.release();
    assert.equal(w.length, 64);
    assert.ok(w.slice(0, 31).every((v) => v >= 90), `first half ${w.slice(0, 32)}`);
    assert.ok(w.slice(33).every((v) => v === 0), `second half ${w.slice(32)}`);
    assert.equal(Math.max(...w), 100);
    assert.ok(new Set(w).size > 1);
  });

  it('an output over the platform limit is audio_too_large', async () => {
    // Speech bitrates keep every real note far below WhatsApp's 16 MiB and Telegram's 50 MiB, so the
    // rule is shown with a platform whose limit a 3-second note exceeds.
    const target = { ...audioTargetFor('whatsapp'), maxBytes: 1000 };
    await assert.rejects(pipeline.prepare({ url: server.url('/tone.mp3'), target }), isAudioError('audio_too_large', { transient: false, message: /at most 1000/ }));
  });
});

/** Pids of this process's children whose program is `program` (zombies have no command line, so they do not count). */
/** Processes started by this one, or by the processes it started, running `program`. */
async function descendantsRunning(program: string): Promise<number[]> {
  return (await descendants()).filter((p) => p.argv0 === program).map((p) => p.pid);
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('aborting a conversion', () => {
  let server: AudioServer;
  let dataDir: string;
  let ffmpegPath: string;
  let pipeline: AudioPipeline;

  before(async () => {
    ffmpegPath = await testFfmpegPath();
    const fixtures = await sharedFixtures(ffmpegPath);
    server = await startAudioServer();
    server.route('/long-75s.mp3', { kind: 'file', path: fixtures['long-75s.mp3'], contentType: 'audio/mpeg' });
    dataDir = await makeDataDir('abort');
    // ffmpeg with -re reads its input at the audio's own pace: converting the 75-second file takes 75 s,
    // so an ffmpeg the abort failed to kill would still be running long after the test has looked.
    const slow = join(dataDir, 'ffmpeg-realtime.sh');
    await writeFile(slow, `#!/bin/sh\nexec '${ffmpegPath}' -re "$@"\n`);
    await chmod(slow, 0o755);
    pipeline = createAudioPipeline({ dataDir, ffmpegPath: slow, allowPrivateUrls: true });
  });

  after(async () => {
    await pipeline.close();
    await server.close();
    await removeDir(dataDir);
  });

  it('rejects with the abort and kills ffmpeg: no ffmpeg of this process is left running, nor a temp file', async () => {
    const controller = new AbortController();
    const prepared = pipeline.prepare({ url: server.url('/long-75s.mp3'), target: audioTargetFor('telegram'), signal: controller.signal });
    prepared.catch(() => undefined);
    const [pid] = await until('ffmpeg to be converting', async () => {
      const pids = await descendantsRunning(ffmpegPath);
      return pids.length > 0 ? pids : undefined;
    });

    controller.abort();
    await assert.rejects(prepared, (err: unknown) => {
      assert.equal((err as Error).name, 'AbortError', `the abort, not a conversion failure: ${String(err)}`);
      return true;
    });
    // SIGKILL takes effect at once; the bound only turns an ffmpeg left running (75 s of work) into a failure.
    await until('ffmpeg to be gone', async () => ((await descendantsRunning(ffmpegPath)).length === 0 ? true : undefined), 5_000);
    assert.ok(!(await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')), `ffmpeg ${pid} no longer runs`);
    await until('the temp files to be removed', async () => ((await leftovers(dataDir)).length === 0 ? true : undefined), 5_000);
  });
});
