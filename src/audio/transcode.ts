import { readFile, rm, writeFile } from 'node:fs/promises';
import type { EncoderProcesses } from './encoder-processes.js';
import { MONO_WITHOUT_CLIPPING, OPUS_ENCODER } from './encoder-settings.js';
import { AudioError } from './errors.js';
import { baseInputArgs, type FfmpegResult, type FfmpegRunner, type FfmpegRunOptions } from './ffmpeg.js';
import { OggOpusError, OUR_VENDOR, readOggOpus, withoutTags } from './ogg-opus.js';
import { lastFfmpegLine, parseInputStreams, type SourceInfo, type StreamLayout } from './probe.js';
import type { AudioProfile } from './targets.js';
import { TELEGRAM_OVERSHOOT_BPS, TELEGRAM_WAVEFORM_MAX_BYTES, telegramBitrateKbps } from './telegram-voice.js';
import { WAVEFORM_SAMPLE_RATE, WaveformAccumulator } from './waveform.js';
import { NotPttFrames, PTT_BITRATES_KBPS, PTT_INPUT_RATE, pttEncodeArgs, repackAsPtt, whyNotPtt } from './whatsapp-ptt.js';

/** Encoder settings per profile (docs/how-it-works.md, "Audio"); `kbps` only for Telegram's length-chosen bitrate. */
export function encodeArgs(profile: AudioProfile, kbps?: number): string[] {
  if (profile === 'ogg_opus') {
    return [...OPUS_ENCODER, '-b:a', `${kbps ?? 32}k`, ...MONO_WITHOUT_CLIPPING, '-ar', '48000', '-application', 'voip', '-f', 'ogg'];
  }
  if (profile === 'ogg_opus_ptt') return pttEncodeArgs(kbps ?? PTT_BITRATES_KBPS[0]);
  // 44.1 kHz so a 96 kHz or 8 kHz source does not yield an odd-rate AAC stream; ipod = the M4A brand.
  return ['-c:a', 'aac', '-b:a', '64k', ...MONO_WITHOUT_CLIPPING, '-ar', '44100', '-movflags', '+faststart', '-f', 'ipod'];
}

// A crude resampler (filter_size=1) is plenty for a 64-bar energy envelope and costs a sixth of the
// default one; without -flush_packets 0 ffmpeg writes every tiny PCM packet to the pipe separately.
const waveformOutput = (pipe: 'pipe:1' | 'pipe:3'): string[] => [
  '-map', '0:a:0', '-ac', '1', '-af', `aresample=${WAVEFORM_SAMPLE_RATE}:filter_size=1:phase_shift=0`,
  '-c:a', 'pcm_s16le', '-flush_packets', '0', '-f', 's16le', pipe,
];
const WAVEFORM_OUTPUT = waveformOutput('pipe:1');

// Only the audio, without cover art, subtitles, data streams or any of the source's metadata.
const AUDIO_ONLY = ['-map', '0:a:0', '-vn', '-sn', '-dn', '-map_metadata', '-1'];

/** Cheap first look (metadata only): could this already be the target? Confirmed by ffmpeg afterwards. */
function mayPassThrough(info: SourceInfo, profile: AudioProfile): boolean {
  if (profile === 'ogg_opus' || profile === 'ogg_opus_ptt') {
    return info.demuxer === 'ogg' && /opus/i.test(info.codec ?? '') && info.channels === 1;
  }
  // MP4 headers often claim 2 channels for mono AAC, so channels are left to ffmpeg's look.
  return info.demuxer === 'mov' && /aac/i.test(info.codec ?? '');
}

function isTargetLayout(layout: StreamLayout, profile: AudioProfile): boolean {
  const a = layout.audio;
  if (a === null || layout.hasVideo || a.channels !== 1) return false;
  if (profile === 'm4a_aac') return a.codec === 'aac' && a.profile === 'LC';
  return a.codec === 'opus';
}

export interface ConversionOutcome {
  passThrough: boolean;
  /** Which encoder made an Opus note and at what bitrate (the log says it). */
  opus?: { encoder: 'libopus' | 'ffmpeg'; kbps: number };
  /** Length of the decoded source. */
  decodedSeconds: number;
  waveform: Uint8Array;
  /** The 100 bars (0–31) Telegram's apps draw, from the same decode. */
  telegramWaveform: Uint8Array;
}

export interface ConvertOptions {
  runner: FfmpegRunner;
  sourcePath: string;
  info: SourceInfo;
  profile: AudioProfile;
  /** Where a converted file is written; untouched when the source passes through. */
  outputPath: string;
  timeoutMs: number;
  /** Kills ffmpeg when aborted. */
  signal?: AbortSignal;
  /** The libopus encoder processes, when the binding loaded; without them ffmpeg encodes. */
  opusEncoder?: () => EncoderProcesses | null;
}

function failure(result: FfmpegResult, what: string): Error {
  if (result.killed) return new Error('ffmpeg was stopped (the attempt was aborted or the pipeline closed)');
  if (result.timedOut) return new AudioError('audio_unsupported', `${what} took too long and was stopped`);
  return new AudioError('audio_unsupported', `${what} failed: ${lastFfmpegLine(result.stderr)}`);
}

/** What the waveform decode gave: the decoded length, our 64 bars and Telegram's 100. */
interface DecodedWave {
  samples: number;
  seconds: number;
  bars: Uint8Array;
  telegramBars: Uint8Array;
}

const decodedWave = (acc: WaveformAccumulator): DecodedWave => ({ samples: acc.samples, seconds: acc.seconds, bars: acc.finish(), telegramBars: acc.telegramLevels() });

function checkDecoded(result: FfmpegResult, wave: { samples: number; seconds: number }, info: SourceInfo, what: string): StreamLayout {
  if (result.exitCode !== 0) throw failure(result, what);
  const layout = parseInputStreams(result.stderr);
  if (layout.audio === null) throw new AudioError('audio_unsupported', 'audio source has no audio track');
  if (wave.samples === 0) throw new AudioError('audio_unsupported', 'audio source decodes to no audio');
  // A container that promises more than the bytes deliver was cut short in transit or storage.
  const declared = info.durationSeconds;
  if (declared !== null && declared > 1 && wave.seconds < declared * 0.9) {
    throw new AudioError(
      'audio_unsupported',
      `audio source is truncated or corrupt: declares ${declared.toFixed(1)} s, decodes to ${wave.seconds.toFixed(1)} s`,
    );
  }
  return layout;
}

/** Runs a repack of ffmpeg's output; a file our reader cannot take is the audio's fault, not a crash. */
function unpackable(repack: () => Buffer, what: string): Buffer {
  try {
    return repack();
  } catch (err) {
    if (err instanceof OggOpusError) {
      throw new AudioError('audio_unsupported', `the encoder's output could not be packed as ${what}: ${err.message}`, { cause: err });
    }
    throw err;
  }
}

/**
 * What may go out without a new encode, read from the source's own bytes: the file as it is, new
 * bytes with the same audio (Telegram: headers without tags), or null (encode).
 */
async function keepableOgg(opts: ConvertOptions): Promise<'as-is' | Buffer | null> {
  const file = await readFile(opts.sourcePath);
  if (opts.profile === 'ogg_opus_ptt') return whyNotPtt(file) === null ? 'as-is' : null;
  // Telegram: the source's own packets if they already fit the size the length allows.
  try {
    const stream = readOggOpus(file);
    if (stream.head.channels !== 1 || stream.head.mappingFamily !== 0) return null;
    const seconds = Number(stream.finalGranule - BigInt(stream.head.preSkip)) / 48000;
    if (!(seconds > 0)) return null;
    const allowed = Math.max(TELEGRAM_WAVEFORM_MAX_BYTES, (seconds * (telegramBitrateKbps(seconds) * 1000 + TELEGRAM_OVERSHOOT_BPS)) / 8);
    if (file.length > allowed) return null;
    if (stream.tags.comments.length === 0 && !/^Lav[fc]/.test(stream.tags.vendor)) return 'as-is';
    return withoutTags(file, OUR_VENDOR);
  } catch (err) {
    // Not a stream we can rewrite page by page (chained, odd granules…): ffmpeg encodes it.
    if (err instanceof OggOpusError) return null;
    throw err;
  }
}

/**
 * One ffmpeg run per job: decode once, and from that decode both the target and 8 kHz PCM for the
 * waveform. A likely pass-through gets a decode-only run first, which also proves the file is sound
 * before its bytes go out unchanged. Opus notes are encoded in this process by the libopus binding
 * when it loaded (ffmpeg then only decodes), else by ffmpeg; either way the Ogg file is written in
 * TypeScript: WhatsApp's push-to-talk profile, or Telegram's headers without tags.
 */
export async function convertAudio(opts: ConvertOptions): Promise<ConversionOutcome> {
  const input = baseInputArgs(opts.sourcePath, opts.info.demuxer);
  const runOpts = (wave?: WaveformAccumulator) => ({
    timeoutMs: opts.timeoutMs,
    ...(wave ? { onStdout: (c: Buffer) => wave.push(c) } : {}),
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  if (mayPassThrough(opts.info, opts.profile)) {
    const keep = opts.profile === 'm4a_aac' ? 'as-is' : await keepableOgg(opts);
    if (keep !== null) {
      const wave = new WaveformAccumulator();
      const result = await opts.runner.run([...input, ...WAVEFORM_OUTPUT], runOpts(wave));
      const layout = checkDecoded(result, wave, opts.info, 'decoding the audio');
      if (isTargetLayout(layout, opts.profile)) {
        if (keep !== 'as-is') await writeFile(opts.outputPath, keep);
        return { passThrough: keep === 'as-is', decodedSeconds: wave.seconds, waveform: wave.finish(), telegramWaveform: wave.telegramLevels() };
      }
    }
  }
  if (opts.profile === 'm4a_aac') {
    const wave = new WaveformAccumulator();
    const result = await opts.runner.run([...input, ...AUDIO_ONLY, ...encodeArgs('m4a_aac'), `file:${opts.outputPath}`, ...WAVEFORM_OUTPUT], runOpts(wave));
    checkDecoded(result, wave, opts.info, 'converting the audio');
    return { passThrough: false, decodedSeconds: wave.seconds, waveform: wave.finish(), telegramWaveform: wave.telegramLevels() };
  }

  const encoders = opts.opusEncoder?.() ?? null;
  const encoded = `${opts.outputPath}.enc`;
  let wave: DecodedWave | undefined;
  const keepWave = (w: DecodedWave): void => {
    wave ??= w;
  };
  // One encode at a bitrate, written to outputPath: the note's size. The first also gives the waveform.
  const encode = async (kbps: number): Promise<number> => {
    if (encoders) return encodeWithLibopus(opts, encoders, kbps, wave === undefined, keepWave);
    const file = await encodeWithFfmpeg(opts, encoded, kbps, wave === undefined ? keepWave : null);
    await writeFile(opts.outputPath, file);
    return file.length;
  };
  const done = (kbps: number): ConversionOutcome => ({
    passThrough: false,
    opus: { encoder: encoders ? 'libopus' : 'ffmpeg', kbps },
    decodedSeconds: wave!.seconds,
    waveform: wave!.bars,
    telegramWaveform: wave!.telegramBars,
  });
  try {
    if (opts.profile === 'ogg_opus') {
      let kbps = telegramBitrateKbps(opts.info.durationSeconds);
      const bytes = await encode(kbps);
      // The container did not say how long it is (or said wrong): choose again from the decoded length.
      const again = telegramBitrateKbps(wave!.seconds);
      if (bytes > TELEGRAM_WAVEFORM_MAX_BYTES && again < kbps) await encode((kbps = again));
      return done(kbps);
    }

    // WhatsApp: every frame must be SILK wideband 20 ms; a lower bitrate is tried if one is not.
    let last: NotPttFrames | undefined;
    for (const kbps of PTT_BITRATES_KBPS) {
      try {
        await encode(kbps);
        return done(kbps);
      } catch (err) {
        if (!(err instanceof NotPttFrames)) throw err;
        last = err;
      }
    }
    throw new AudioError('audio_unsupported', `audio could not be encoded as a native WhatsApp voice note: ${last?.message ?? 'no encode'}`);
  } finally {
    await rm(encoded, { force: true });
  }
}

const runOptions = (opts: ConvertOptions, handlers: Pick<FfmpegRunOptions, 'onStdout' | 'onPipe3'>) => ({
  timeoutMs: opts.timeoutMs,
  ...handlers,
  ...(opts.signal ? { signal: opts.signal } : {}),
});

/**
 * ffmpeg encodes into `encoded` (its own Ogg Opus), finished here: repacked into WhatsApp's
 * push-to-talk profile, or (Telegram) given headers without tags. With `keepWave`, the same run
 * decodes the waveform too.
 */
async function encodeWithFfmpeg(opts: ConvertOptions, encoded: string, kbps: number, keepWave: ((wave: DecodedWave) => void) | null): Promise<Buffer> {
  const input = baseInputArgs(opts.sourcePath, opts.info.demuxer);
  const wave = keepWave ? new WaveformAccumulator() : null;
  const args = [...input, ...AUDIO_ONLY, ...encodeArgs(opts.profile, kbps), `file:${encoded}`, ...(wave ? WAVEFORM_OUTPUT : [])];
  const result = await opts.runner.run(args, runOptions(opts, wave ? { onStdout: (c) => wave.push(c) } : {}));
  if (wave) {
    checkDecoded(result, wave, opts.info, 'converting the audio');
    keepWave!(decodedWave(wave));
  } else if (result.exitCode !== 0) {
    throw failure(result, 'converting the audio');
  }
  const file = await readFile(encoded);
  if (opts.profile === 'ogg_opus_ptt') return unpackable(() => repackAsPtt(file), 'a WhatsApp voice note');
  // ffmpeg's headers replaced by ours: no `encoder=` tag, no vendor version.
  return unpackable(() => withoutTags(file, OUR_VENDOR), 'a Telegram voice note');
}

/**
 * ffmpeg only decodes: the audio downmixed and resampled as the ffmpeg encode would have it, as
 * 16-bit PCM at the encoder's rate on pipe:1 and the waveform's 8 kHz PCM on pipe:3, both from the
 * one decode, run, encoded and written as a note by an encoder process (encoder-process.ts). The
 * encode runs inside the conversion, so it counts under the same limit of concurrent conversions.
 */
async function encodeWithLibopus(opts: ConvertOptions, encoders: EncoderProcesses, kbps: number, withWave: boolean, keepWave: (wave: DecodedWave) => void): Promise<number> {
  const profile = opts.profile === 'ogg_opus_ptt' ? 'ogg_opus_ptt' : 'ogg_opus';
  const rate = profile === 'ogg_opus_ptt' ? PTT_INPUT_RATE : 48000;
  const args = [
    ...baseInputArgs(opts.sourcePath, opts.info.demuxer), ...AUDIO_ONLY, ...MONO_WITHOUT_CLIPPING, '-ar', String(rate),
    '-c:a', 'pcm_s16le', '-flush_packets', '0', '-f', 's16le', 'pipe:1', ...(withWave ? waveformOutput('pipe:3') : []),
  ];
  const reply = await encoders.encode({
    ffmpegPath: opts.runner.ffmpegPath, args, withWave, timeoutMs: opts.timeoutMs, profile, kbps, outputPath: opts.outputPath,
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  if (reply.spawnError !== undefined) throw new Error(`ffmpeg could not be started: ${reply.spawnError}`);
  // An encoder that fails stops ffmpeg; the note fails with what the encoder said.
  if (reply.encodeError !== undefined) throw encoderFailure(reply.encodeError);
  if (withWave && reply.wave) {
    const { samples, bars, telegramBars } = reply.wave;
    const wave = { samples, seconds: samples / WAVEFORM_SAMPLE_RATE, bars, telegramBars };
    checkDecoded(reply, wave, opts.info, 'converting the audio');
    keepWave(wave);
  } else if (reply.exitCode !== 0) {
    throw failure(reply, 'converting the audio');
  }
  if (reply.notPtt) throw new NotPttFrames(new Map(reply.notPtt.offending), reply.notPtt.frames);
  if (reply.bytes === undefined) throw encoderFailure('the encoder wrote no note');
  return reply.bytes;
}

/** The in-process encoder failed on this audio: the same error kind as an ffmpeg encode that fails. */
function encoderFailure(why: string): AudioError {
  return new AudioError('audio_unsupported', `encoding the audio failed: ${why}`);
}
