import { AudioError } from './errors.js';
import { baseInputArgs, type FfmpegResult, type FfmpegRunner } from './ffmpeg.js';
import { lastFfmpegLine, parseInputStreams, type SourceInfo, type StreamLayout } from './probe.js';
import type { AudioFormat } from './targets.js';
import { WAVEFORM_SAMPLE_RATE, WaveformAccumulator } from './waveform.js';

/** Encoder settings per target (README, "How it works"). */
export function encodeArgs(format: AudioFormat): string[] {
  if (format === 'ogg_opus') {
    return ['-c:a', 'libopus', '-b:a', '32k', '-ac', '1', '-ar', '48000', '-application', 'voip', '-f', 'ogg'];
  }
  // 44.1 kHz so a 96 kHz or 8 kHz source does not yield an odd-rate AAC stream; ipod = the M4A brand.
  return ['-c:a', 'aac', '-b:a', '64k', '-ac', '1', '-ar', '44100', '-movflags', '+faststart', '-f', 'ipod'];
}

// A crude resampler (filter_size=1) is plenty for a 64-bar energy envelope and costs a sixth of the
// default one; without -flush_packets 0 ffmpeg writes every tiny PCM packet to the pipe separately.
const WAVEFORM_OUTPUT = [
  '-map', '0:a:0', '-ac', '1', '-af', `aresample=${WAVEFORM_SAMPLE_RATE}:filter_size=1:phase_shift=0`,
  '-c:a', 'pcm_s16le', '-flush_packets', '0', '-f', 's16le', 'pipe:1',
];

/** Cheap first look (metadata only): could this already be the target? Confirmed by ffmpeg afterwards. */
function mayPassThrough(info: SourceInfo, format: AudioFormat): boolean {
  if (format === 'ogg_opus') {
    return info.demuxer === 'ogg' && /opus/i.test(info.codec ?? '') && info.channels === 1 && info.sampleRate === 48000;
  }
  // MP4 headers often claim 2 channels for mono AAC, so channels are left to ffmpeg's look.
  return info.demuxer === 'mov' && /aac/i.test(info.codec ?? '');
}

function isTargetLayout(layout: StreamLayout, format: AudioFormat): boolean {
  const a = layout.audio;
  if (a === null || layout.hasVideo || a.channels !== 1) return false;
  if (format === 'ogg_opus') return a.codec === 'opus' && a.sampleRate === 48000;
  return a.codec === 'aac' && a.profile === 'LC';
}

export interface ConversionOutcome {
  passThrough: boolean;
  /** Length of the decoded source. */
  decodedSeconds: number;
  waveform: Uint8Array;
}

export interface ConvertOptions {
  runner: FfmpegRunner;
  sourcePath: string;
  info: SourceInfo;
  format: AudioFormat;
  /** Where a converted file is written; untouched when the source passes through. */
  outputPath: string;
  timeoutMs: number;
  /** Kills ffmpeg when aborted. */
  signal?: AbortSignal;
}

function failure(result: FfmpegResult, what: string): Error {
  if (result.killed) return new Error('ffmpeg was stopped (the attempt was aborted or the pipeline closed)');
  if (result.timedOut) return new AudioError('audio_unsupported', `${what} took too long and was stopped`);
  return new AudioError('audio_unsupported', `${what} failed: ${lastFfmpegLine(result.stderr)}`);
}

function checkDecoded(result: FfmpegResult, wave: WaveformAccumulator, info: SourceInfo, what: string): StreamLayout {
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

/**
 * One ffmpeg run per job: decode once, encode the target and emit 8 kHz PCM for the waveform
 * side by side. A likely pass-through gets a decode-only run first, which also proves the file is
 * sound before its bytes go out unchanged.
 */
export async function convertAudio(opts: ConvertOptions): Promise<ConversionOutcome> {
  const input = baseInputArgs(opts.sourcePath, opts.info.demuxer);
  if (mayPassThrough(opts.info, opts.format)) {
    const wave = new WaveformAccumulator();
    const result = await opts.runner.run([...input, ...WAVEFORM_OUTPUT], { timeoutMs: opts.timeoutMs, onStdout: (c) => wave.push(c), ...(opts.signal ? { signal: opts.signal } : {}) });
    const layout = checkDecoded(result, wave, opts.info, 'decoding the audio');
    if (isTargetLayout(layout, opts.format)) {
      return { passThrough: true, decodedSeconds: wave.seconds, waveform: wave.finish() };
    }
  }
  const wave = new WaveformAccumulator();
  const args = [
    ...input,
    '-map', '0:a:0', '-vn', '-sn', '-dn', '-map_metadata', '-1',
    ...encodeArgs(opts.format),
    `file:${opts.outputPath}`,
    ...WAVEFORM_OUTPUT,
  ];
  const result = await opts.runner.run(args, { timeoutMs: opts.timeoutMs, onStdout: (c) => wave.push(c), ...(opts.signal ? { signal: opts.signal } : {}) });
  checkDecoded(result, wave, opts.info, 'converting the audio');
  return { passThrough: false, decodedSeconds: wave.seconds, waveform: wave.finish() };
}
