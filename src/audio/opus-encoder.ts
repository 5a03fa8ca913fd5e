import { createRequire } from 'node:module';
import type { AudioLogger } from './cache.js';

/**
 * libopus in this process, through the `@discordjs/opus` binding (it builds its bundled libopus
 * 1.3.1 from source at install): ffmpeg then only decodes, and the encode costs less than half of
 * what the bundled 2018 ffmpeg's libopus costs for the same frames (BENCHMARKS.md, "Audio quality and
 * encoder cost by libopus complexity"). When the binding does not load (no compiler at install, an
 * unsupported platform), ffmpeg encodes as before: the choice is made once, at the first Opus note.
 */

/** The part of the binding used here (its own typings declare the same class). */
interface OpusBinding {
  OpusEncoder: new (rate: number, channels: number) => {
    encode(pcm: Buffer): Buffer;
    applyEncoderCTL(ctl: number, value: number): void;
    setBitrate(bitsPerSecond: number): void;
  };
}

// Request numbers and values of libopus's opus_defines.h. The binding passes a CTL's value as an
// int, so only the SET requests can go through it (a GET would need a pointer).
const OPUS_SET_APPLICATION = 4000;
const OPUS_APPLICATION_VOIP = 2048;
const OPUS_SET_VBR = 4006;
const OPUS_SET_COMPLEXITY = 4010;
const OPUS_SET_VBR_CONSTRAINT = 4020;

/** 20 ms frames, as ffmpeg's libopus wrapper encodes by default and WhatsApp's profile requires. */
export const FRAME_MS = 20;

export type OpusRate = 16000 | 48000;

export interface OpusEncoderSettings {
  sampleRate: OpusRate;
  kbps: number;
  complexity: number;
}

/** One note's encoder: mono s16le PCM in, one Opus packet per 20 ms frame out. */
export interface OpusFrameEncoder {
  readonly sampleRate: OpusRate;
  /** Samples of one frame at `sampleRate`. */
  readonly frameSamples: number;
  /** The encoder's look-ahead in its own samples: the decoder's output starts this late. */
  readonly lookahead: number;
  /** Encodes exactly one frame (frameSamples × 2 bytes); the buffer may be reused once this returns. */
  encode(frame: Buffer): Buffer;
}

export interface NativeOpus {
  /** Which binding, for the log. */
  readonly name: string;
  encoder(settings: OpusEncoderSettings): OpusFrameEncoder;
}

/**
 * libopus's OPUS_GET_LOOKAHEAD for every application but restricted-low-delay: 2.5 ms of analysis
 * plus 4 ms of delay compensation (opus_encoder.c: `Fs/400 + delay_compensation`, which is `Fs/250`).
 * The binding cannot ask for it (see above), so it is computed; 104 at 16 kHz and 312 at 48 kHz, the
 * 312 samples at 48 kHz an OpusHead's pre-skip counts either way. test/audio-native-opus.test.ts
 * checks it against where the decoded audio actually starts.
 */
export function opusLookahead(sampleRate: OpusRate): number {
  return sampleRate / 400 + sampleRate / 250;
}

function isBinding(value: unknown): value is OpusBinding {
  return typeof value === 'object' && value !== null && typeof (value as { OpusEncoder?: unknown }).OpusEncoder === 'function';
}

const requireHere = createRequire(import.meta.url);

/** The package of the libopus binding. */
export const OPUS_BINDING = '@discordjs/opus';

/**
 * Loads the binding from `module` (a package name or a file; a different one only in tests); throws
 * when it is missing, was not built, or cannot encode.
 */
export function loadNativeOpus(module: string = OPUS_BINDING): NativeOpus {
  const binding: unknown = requireHere(module);
  if (!isBinding(binding)) throw new Error('the module has no OpusEncoder class');
  let version = '';
  try {
    if (module === OPUS_BINDING) version = ` ${(requireHere(`${OPUS_BINDING}/package.json`) as { version?: string }).version ?? ''}`;
  } catch {
    // only the log line loses its version
  }
  const native: NativeOpus = {
    name: `${module}${version.trimEnd()}`,
    encoder({ sampleRate, kbps, complexity }) {
      const enc = new binding.OpusEncoder(sampleRate, 1);
      // The same settings as ffmpeg's libopus wrapper with the arguments the ffmpeg path passes
      // (`-application voip`, VBR on and unconstrained, `-compression_level`, `-b:a`); the signal
      // type stays automatic there too. The application can only be set before the first frame.
      enc.applyEncoderCTL(OPUS_SET_APPLICATION, OPUS_APPLICATION_VOIP);
      enc.applyEncoderCTL(OPUS_SET_VBR, 1);
      enc.applyEncoderCTL(OPUS_SET_VBR_CONSTRAINT, 0);
      enc.applyEncoderCTL(OPUS_SET_COMPLEXITY, complexity);
      enc.setBitrate(kbps * 1000);
      const frameSamples = (sampleRate * FRAME_MS) / 1000;
      const frameBytes = frameSamples * 2;
      return {
        sampleRate,
        frameSamples,
        lookahead: opusLookahead(sampleRate),
        encode(frame) {
          // The binding takes the frame length from the buffer; any other length than a valid frame
          // size makes libopus fail, which the binding does not report cleanly.
          if (frame.length !== frameBytes) throw new Error(`an Opus frame is ${frameBytes} bytes, not ${frame.length}`);
          const packet = enc.encode(frame);
          if (packet.length === 0) throw new Error('libopus returned an empty packet');
          return packet;
        },
      };
    },
  };
  // One frame of silence proves the library runs (a binary built for another Node fails at load,
  // one that loads but cannot encode fails here rather than in the middle of a note).
  const probe = native.encoder({ sampleRate: 16000, kbps: 16, complexity: 0 });
  probe.encode(Buffer.alloc(probe.frameSamples * 2));
  return native;
}

/**
 * Loads the binding at the first call (proving it runs here) and logs once which encoder Opus notes
 * get: `encoders` makes what encodes them once it loaded (a pipeline's encoder threads); null: the
 * binding did not load, ffmpeg encodes.
 */
export function chooseOpusEncoder<T extends { name: string }>(log: AudioLogger | undefined, module: string, encoders: (native: NativeOpus) => T): () => T | null {
  let chosen: T | null | undefined;
  return () => {
    if (chosen !== undefined) return chosen;
    try {
      chosen = encoders(loadNativeOpus(module));
      const line = { opus_encoder: chosen.name };
      const message = 'Opus voice notes are encoded in-process by libopus, on threads below normal priority (ffmpeg decodes)';
      if (log?.info) log.info(line, message);
      else log?.debug(line, message);
    } catch (err) {
      chosen = null;
      log?.warn(
        { opus_encoder: 'ffmpeg', reason: err instanceof Error ? err.message : String(err) },
        'the libopus binding (@discordjs/opus) did not load: ffmpeg encodes Opus voice notes, at about twice the CPU',
      );
    }
    return chosen;
  };
}
