import { createHash } from 'node:crypto';
import { NATIVE_OPUS_COMPLEXITY } from './encoder-settings.js';
import { OUR_VENDOR, writeOggOpus } from './ogg-opus.js';
import type { OpusEncoderSettings, OpusFrameEncoder, OpusRate } from './opus-encoder.js';
import { PTT_INPUT_RATE, PttPacker } from './whatsapp-ptt.js';

/**
 * A voice note encoded by the libopus binding (in an encoder process, encoder-process.ts: ffmpeg
 * decodes to mono s16le PCM, cut here into frames as it streams, each encoded at once), laid out as
 * Ogg Opus by our own writer: pre-skip = the encoder's look-ahead, granule positions counting every
 * sample, the last page's trimmed to the real length, our vendor string and no tags. WhatsApp's frames are packed three to a packet (whatsapp-ptt.ts),
 * Telegram's stay one a packet.
 */

export type NativeProfile = 'ogg_opus' | 'ogg_opus_ptt';

/** The encoder's settings for a profile: WhatsApp's push-to-talk notes at 16 kHz, Telegram's at 48 kHz. */
export function nativeSettings(profile: NativeProfile, kbps: number, complexity: number = NATIVE_OPUS_COMPLEXITY[profile]): OpusEncoderSettings {
  const sampleRate: OpusRate = profile === 'ogg_opus_ptt' ? PTT_INPUT_RATE : 48000;
  return { sampleRate, kbps, complexity };
}

/** Cuts PCM into frames for one encoder; `end()` pads the last frame and flushes the look-ahead. */
export class PcmFramer {
  private readonly frame: Buffer;
  private filled = 0;
  private bytes = 0;
  private frames = 0;

  constructor(private readonly encoder: OpusFrameEncoder, private readonly onPacket: (packet: Buffer) => void) {
    this.frame = Buffer.alloc(encoder.frameSamples * 2);
  }

  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    const size = this.frame.length;
    let at = 0;
    while (at < chunk.length) {
      // A whole frame straight from the pipe's chunk when it is 16-bit aligned (it usually is)...
      if (this.filled === 0 && at + size <= chunk.length && ((chunk.byteOffset + at) & 1) === 0) {
        this.onPacket(this.encoder.encode(chunk.subarray(at, at + size)));
        this.frames++;
        at += size;
        continue;
      }
      // ...else through the frame buffer, which keeps a frame whole across chunk boundaries.
      const n = Math.min(size - this.filled, chunk.length - at);
      chunk.copy(this.frame, this.filled, at, at + n);
      this.filled += n;
      at += n;
      if (this.filled === size) this.encodeFrame();
    }
  }

  private encodeFrame(): void {
    this.onPacket(this.encoder.encode(this.frame));
    this.filled = 0;
    this.frames++;
  }

  /**
   * Encodes what is left, padded with silence, and as many silent frames as the look-ahead needs for
   * the last real sample to come out of a decoder. Returns the samples that were pushed.
   */
  end(): number {
    const samples = Math.floor(this.bytes / 2);
    const needed = Math.ceil((samples + this.encoder.lookahead) / this.encoder.frameSamples);
    while (this.frames < needed) {
      this.frame.fill(0, this.filled);
      this.encodeFrame();
    }
    return samples;
  }
}

/** What an encode made: its packets, one per 20 ms frame (the last ones flushing the look-ahead). */
export interface EncodedFrames {
  sampleRate: OpusRate;
  /** The encoder's look-ahead in its own samples. */
  lookahead: number;
  packets: Buffer[];
  /** PCM samples that went in. */
  samples: number;
}

/** Samples at 48 kHz (what Ogg Opus granule positions and pre-skip count) per sample at `rate`. */
const per48k = (rate: OpusRate): number => 48000 / rate;

/**
 * The file of an encode's packets; throws NotPttFrames for a WhatsApp note with a frame that is not
 * SILK wideband.
 */
export function nativeNoteFile(profile: NativeProfile, encoded: EncodedFrames): Buffer {
  const { sampleRate, lookahead, samples } = encoded;
  if (samples === 0) throw new Error('no PCM reached the encoder');
  let packets = encoded.packets;
  if (profile === 'ogg_opus_ptt') {
    const ptt = new PttPacker();
    for (const p of packets) ptt.add(p);
    packets = ptt.finish();
  }
  const preSkip = lookahead * per48k(sampleRate);
  // A serial number derived from the audio keeps the file reproducible for the same encode.
  const hash = createHash('sha256');
  for (const p of packets) hash.update(p);
  return writeOggOpus({
    head: { channels: 1, preSkip, inputSampleRate: sampleRate, outputGain: 0, mappingFamily: 0 },
    tags: { vendor: OUR_VENDOR, comments: [] },
    packets,
    finalGranule: BigInt(preSkip + samples * per48k(sampleRate)),
    serial: hash.digest().readUInt32LE(0),
  });
}
