import { writeFileSync } from 'node:fs';
import { FfmpegRunner, type FfmpegResult } from './ffmpeg.js';
import { nativeNoteFile, nativeSettings, PcmFramer, type NativeProfile } from './native-note.js';
import { loadNativeOpus, type NativeOpus, type OpusFrameEncoder } from './opus-encoder.js';
import { WaveformAccumulator } from './waveform.js';
import { NotPttFrames } from './whatsapp-ptt.js';

/**
 * The encoder process's program (started by encoder-processes.ts, which also defines the messages):
 * for each request it starts the decoding ffmpeg, encodes the PCM ffmpeg writes as it streams, folds
 * the waveform's PCM, writes the finished note to the path it was given, and answers with how ffmpeg
 * ended, the note's size and the waveform. It runs at a lower priority than the process that started
 * it, and so does every ffmpeg it starts (a child starts with its parent's nice value).
 */

export interface EncodeRequest {
  op: 'encode';
  id: number;
  /** Where the binding is loaded from (opus-encoder.ts, OPUS_BINDING). */
  module: string;
  ffmpegPath: string;
  /** ffmpeg's arguments: mono s16le PCM at the profile's rate on pipe:1, with `withWave` the waveform's on pipe:3. */
  args: string[];
  withWave: boolean;
  timeoutMs: number;
  profile: NativeProfile;
  kbps: number;
  /** libopus complexity; default the profile's (encoder-settings.ts). */
  complexity?: number;
  /** Where the finished note is written (only when ffmpeg and the encoder both succeeded). */
  outputPath: string;
}

export interface KillRequest {
  op: 'kill';
  id: number;
}

/** How ffmpeg ended (as FfmpegRunner reports it), and what came of the note. */
export interface EncodeReply extends FfmpegResult {
  id: number;
  /** The note's size in bytes, once written. */
  bytes?: number;
  /** With `withWave`: what the waveform decode gave. */
  wave?: { samples: number; bars: Uint8Array; telegramBars: Uint8Array };
  /** ffmpeg could not be started. */
  spawnError?: string;
  /** The encoder failed (ffmpeg was stopped). */
  encodeError?: string;
  /** WhatsApp: frames that are not SILK wideband (NotPttFrames). */
  notPtt?: { offending: Array<[string, number]>; frames: number };
}

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

const bindings = new Map<string, NativeOpus>();
/** One runner per ffmpeg binary; the process that sends the requests bounds how many run. */
const runners = new Map<string, FfmpegRunner>();
/** What stops each request's ffmpeg. */
const running = new Map<number, AbortController>();

async function encode(request: EncodeRequest): Promise<EncodeReply> {
  const base = { id: request.id, exitCode: null, signal: null, timedOut: false, killed: false, stderr: '' };
  const packets: Buffer[] = [];
  let encoder: OpusFrameEncoder;
  let framer: PcmFramer;
  try {
    let native = bindings.get(request.module);
    if (!native) bindings.set(request.module, (native = loadNativeOpus(request.module)));
    encoder = native.encoder(nativeSettings(request.profile, request.kbps, request.complexity));
    framer = new PcmFramer(encoder, (p) => packets.push(p));
  } catch (err) {
    return { ...base, encodeError: message(err) };
  }
  const wave = request.withWave ? new WaveformAccumulator() : null;
  let runner = runners.get(request.ffmpegPath);
  if (!runner) runners.set(request.ffmpegPath, (runner = new FfmpegRunner(request.ffmpegPath)));
  const stop = new AbortController();
  running.set(request.id, stop);
  // An encoder that throws stops ffmpeg (the run rejects with its error); any other rejection is the spawn's.
  let encodeError: string | undefined;
  let result: FfmpegResult;
  try {
    result = await runner.run(request.args, {
      timeoutMs: request.timeoutMs,
      signal: stop.signal,
      onStdout: (chunk) => {
        try {
          framer.push(chunk);
        } catch (err) {
          encodeError = message(err);
          throw err;
        }
      },
      ...(wave ? { onPipe3: (chunk: Buffer) => wave.push(chunk) } : {}),
    });
  } catch (err) {
    return encodeError !== undefined ? { ...base, encodeError } : { ...base, spawnError: message(err) };
  } finally {
    running.delete(request.id);
  }
  const reply: EncodeReply = { ...base, ...result, ...(wave ? { wave: { samples: wave.samples, bars: wave.finish(), telegramBars: wave.telegramLevels() } } : {}) };
  if (result.exitCode !== 0) return reply;
  try {
    const samples = framer.end();
    const file = nativeNoteFile(request.profile, { sampleRate: encoder.sampleRate, lookahead: encoder.lookahead, packets, samples });
    writeFileSync(request.outputPath, file);
    return { ...reply, bytes: file.length };
  } catch (err) {
    if (err instanceof NotPttFrames) return { ...reply, notPtt: { offending: [...err.offending], frames: err.frames } };
    return { ...reply, encodeError: message(err) };
  }
}

process.title = 'voicenote-encoder';
process.on('message', (m: EncodeRequest | KillRequest) => {
  if (m.op === 'encode') void encode(m).then((reply) => process.send?.(reply));
  else running.get(m.id)?.abort();
});
// The process that started this one is gone: stop what runs (ffmpeg too) and end.
process.on('disconnect', () => {
  for (const stop of running.values()) stop.abort();
  process.exit(0);
});
