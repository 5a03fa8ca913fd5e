import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { nativeNoteFile, nativeSettings, PcmFramer, type NativeProfile } from './native-note.js';
import { loadNativeOpus, type NativeOpus } from './opus-encoder.js';
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

export interface EncodeReply {
  id: number;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  killed: boolean;
  /** The last part of ffmpeg's stderr (stream layout and errors). */
  stderr: string;
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

const STDERR_KEEP = 64 * 1024;
const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

const bindings = new Map<string, NativeOpus>();
const running = new Map<number, () => void>();

function send(reply: EncodeReply): void {
  running.delete(reply.id);
  process.send?.(reply);
}

function encode(request: EncodeRequest): void {
  const reply: EncodeReply = { id: request.id, exitCode: null, signal: null, timedOut: false, killed: false, stderr: '' };
  let framer: PcmFramer;
  const packets: Buffer[] = [];
  let encoder;
  try {
    let native = bindings.get(request.module);
    if (!native) bindings.set(request.module, (native = loadNativeOpus(request.module)));
    encoder = native.encoder(nativeSettings(request.profile, request.kbps, request.complexity));
    framer = new PcmFramer(encoder, (p) => packets.push(p));
  } catch (err) {
    send({ ...reply, encodeError: message(err) });
    return;
  }
  const wave = request.withWave ? new WaveformAccumulator() : null;
  let child: ChildProcess;
  try {
    child = spawn(request.ffmpegPath, request.args, { stdio: ['ignore', 'pipe', 'pipe', ...(wave ? ['pipe' as const] : [])], shell: false });
  } catch (err) {
    send({ ...reply, spawnError: message(err) });
    return;
  }
  let encodeError: string | undefined;
  running.set(request.id, () => {
    reply.killed = true;
    child.kill('SIGKILL');
  });
  const timer = setTimeout(() => {
    reply.timedOut = true;
    child.kill('SIGKILL');
  }, request.timeoutMs);
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (s: string) => {
    stderr += s;
    if (stderr.length > 2 * STDERR_KEEP) stderr = stderr.slice(-STDERR_KEEP);
  });
  child.stdout?.on('data', (chunk: Buffer) => {
    if (encodeError !== undefined) return;
    try {
      framer.push(chunk);
    } catch (err) {
      encodeError = message(err);
      child.kill('SIGKILL');
    }
  });
  if (wave) (child.stdio[3] as NodeJS.ReadableStream | null)?.on('data', (chunk: Buffer) => wave.push(chunk));
  child.once('error', (err) => {
    clearTimeout(timer);
    send({ ...reply, spawnError: message(err) });
  });
  child.once('close', (exitCode, signal) => {
    clearTimeout(timer);
    if (!running.has(request.id)) return; // answered already (spawn error)
    Object.assign(reply, { exitCode, signal, stderr: stderr.slice(-STDERR_KEEP) });
    if (wave) reply.wave = { samples: wave.samples, bars: wave.finish(), telegramBars: wave.telegramLevels() };
    if (encodeError !== undefined) return send({ ...reply, encodeError });
    if (exitCode !== 0) return send(reply);
    try {
      const samples = framer.end();
      const file = nativeNoteFile(request.profile, { sampleRate: encoder.sampleRate, lookahead: encoder.lookahead, packets, samples });
      writeFileSync(request.outputPath, file);
      send({ ...reply, bytes: file.length });
    } catch (err) {
      if (err instanceof NotPttFrames) send({ ...reply, notPtt: { offending: [...err.offending], frames: err.frames } });
      else send({ ...reply, encodeError: message(err) });
    }
  });
}

process.title = 'voicenote-encoder';
process.on('message', (m: EncodeRequest | KillRequest) => {
  if (m.op === 'encode') encode(m);
  else running.get(m.id)?.();
});
// The process that started this one is gone: stop what runs (ffmpeg too) and end.
process.on('disconnect', () => {
  for (const kill of running.values()) kill();
  process.exit(0);
});
