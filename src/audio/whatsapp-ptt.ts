import { createHash } from 'node:crypto';
import { MONO_WITHOUT_CLIPPING, OPUS_ENCODER } from './encoder-settings.js';
import { code3Packet, OggOpusError, OUR_VENDOR, parseOpusPacket, readOggOpus, writeOggOpus } from './ogg-opus.js';

/**
 * WhatsApp's native push-to-talk profile, as its own apps record it (docs/platforms.md, "Audio"):
 * Ogg Opus, mono, OpusHead input rate 16 kHz, SILK wideband 20 ms frames (TOC config 9) packed
 * three to a code 3 packet (60 ms a packet; the last may hold fewer).
 */
export const PTT_CONFIG = 9;
export const PTT_FRAMES_PER_PACKET = 3;
export const PTT_INPUT_RATE = 16000;
/**
 * libopus's look-ahead at 16 kHz (2.5 ms + 4 ms of delay compensation = 104 input samples),
 * in the 48 kHz samples OpusHead's pre-skip counts (RFC 7845 §5.1): 312.
 */
export const PTT_PRE_SKIP = 312;
/** Our own vendor string: never ffmpeg's `Lavf…`/`Lavc…`. */
export const PTT_VENDOR = OUR_VENDOR;

/**
 * Bitrates tried in turn (kb/s): at 10–20 kb/s libopus 1.x stayed in SILK wideband for every
 * source measured (scripts/measure-silk-bitrates.ts); 8 kb/s drops to narrowband and a pure tone
 * switches to CELT from 24 kb/s. A lower one is tried only if a frame left config 9.
 */
export const PTT_BITRATES_KBPS = [16, 12, 10] as const;

/** ffmpeg output options for the encode that is then repacked. */
export function pttEncodeArgs(kbps: number): string[] {
  return [
    ...OPUS_ENCODER, '-b:a', `${kbps}k`, ...MONO_WITHOUT_CLIPPING, '-ar', String(PTT_INPUT_RATE),
    '-application', 'voip', '-frame_duration', '20', '-f', 'ogg',
  ];
}

/** Some frame of the encode is not SILK wideband 20 ms mono: the stream cannot be packed as native. */
export class NotPttFrames extends Error {
  constructor(readonly offending: ReadonlyMap<string, number>, readonly frames: number) {
    const list = [...offending].map(([what, n]) => `${n} × ${what}`).join(', ');
    super(`${list} of ${frames} frames are not SILK wideband 20 ms mono (TOC config ${PTT_CONFIG})`);
  }
}

function frameKind(config: number, stereo: boolean): string {
  return `config ${config}${stereo ? ' stereo' : ''}`;
}

/**
 * Packs an encoder's packets into the profile's packets as they come: every frame must be config 9
 * mono; frames go three to a code 3 packet. Both encode paths use it (ffmpeg's file in
 * repackAsPtt, the in-process encoder's packets in pcm-encode.ts).
 */
export class PttPacker {
  private readonly packets: Buffer[] = [];
  private pending: Buffer[] = [];
  private readonly offending = new Map<string, number>();
  private frames = 0;

  add(packet: Buffer): void {
    const p = parseOpusPacket(packet);
    for (const frame of p.frames) {
      this.frames++;
      if (p.config !== PTT_CONFIG || p.stereo) {
        const kind = frameKind(p.config, p.stereo);
        this.offending.set(kind, (this.offending.get(kind) ?? 0) + 1);
      }
      // Nothing mixed is ever written: once a frame is off, the rest are only counted.
      if (this.offending.size > 0) continue;
      this.pending.push(frame);
      if (this.pending.length === PTT_FRAMES_PER_PACKET) {
        this.packets.push(code3Packet(PTT_CONFIG, false, this.pending));
        this.pending = [];
      }
    }
  }

  /** The code 3 packets; throws NotPttFrames if any frame was not config 9 mono. */
  finish(): Buffer[] {
    if (this.offending.size > 0) throw new NotPttFrames(this.offending, this.frames);
    if (this.pending.length > 0) this.packets.push(code3Packet(PTT_CONFIG, false, this.pending));
    this.pending = [];
    return this.packets;
  }
}

/**
 * Repacks an Ogg Opus file of one-frame SILK wideband packets (ffmpeg's output) into the native
 * profile: code 3 packets of three frames, our vendor string and no tags, the same pre-skip and
 * final granule position (so the same playable length), fresh pages and CRCs.
 * Throws NotPttFrames if any frame is not config 9 mono (nothing mixed is ever written).
 */
export function repackAsPtt(file: Buffer): Buffer {
  const stream = readOggOpus(file);
  if (stream.head.channels !== 1) throw new OggOpusError(`the encode has ${stream.head.channels} channels, not 1`);
  if (stream.head.inputSampleRate !== PTT_INPUT_RATE) throw new OggOpusError(`the encode's input rate is ${stream.head.inputSampleRate}, not ${PTT_INPUT_RATE}`);
  // ffmpeg before 4.4 wrote the look-ahead in input samples (104 at 16 kHz) where RFC 7845 wants
  // 48 kHz samples; its granule positions already count 312. Any other value is not libopus at 16 kHz.
  if (stream.head.preSkip !== PTT_PRE_SKIP && stream.head.preSkip * 3 !== PTT_PRE_SKIP) {
    throw new OggOpusError(`the encode's pre-skip is ${stream.head.preSkip}, expected ${PTT_PRE_SKIP} (or ${PTT_PRE_SKIP / 3} in 16 kHz samples)`);
  }
  const packer = new PttPacker();
  for (const packet of stream.packets) packer.add(packet);
  const packets = packer.finish();
  // A serial number derived from the audio keeps the output reproducible for the same encode.
  const serial = createHash('sha256').update(file).digest().readUInt32LE(0);
  return writeOggOpus({
    head: { ...stream.head, preSkip: PTT_PRE_SKIP, outputGain: 0 },
    tags: { vendor: PTT_VENDOR, comments: [] },
    packets,
    finalGranule: stream.finalGranule,
    serial,
  });
}

/**
 * Why a file is not already in the native profile, or null when it is (then it goes out as is).
 * Stricter than what we write in one way only: any vendor string but ffmpeg's is accepted.
 */
export function whyNotPtt(file: Buffer): string | null {
  let stream;
  try {
    stream = readOggOpus(file);
  } catch (err) {
    return `not a readable Ogg Opus stream (${(err as Error).message})`;
  }
  const { head, tags, packets } = stream;
  if (head.channels !== 1) return `${head.channels} channels`;
  if (head.mappingFamily !== 0) return `channel mapping family ${head.mappingFamily}`;
  if (head.inputSampleRate !== PTT_INPUT_RATE) return `OpusHead input rate ${head.inputSampleRate}`;
  if (/^Lav[fc]/.test(tags.vendor)) return `ffmpeg's vendor string ${tags.vendor}`;
  if (tags.comments.some((c) => /^encoder=/i.test(c))) return 'an encoder= tag';
  if (packets.length === 0) return 'no audio packets';
  let total = 0;
  for (const [i, packet] of packets.entries()) {
    let p;
    try {
      p = parseOpusPacket(packet);
    } catch (err) {
      return `packet ${i}: ${(err as Error).message}`;
    }
    if (p.config !== PTT_CONFIG || p.stereo) return `packet ${i} is ${frameKind(p.config, p.stereo)}`;
    if (p.code !== 3) return `packet ${i} uses framing code ${p.code}`;
    const last = i === packets.length - 1;
    if (last ? p.frames.length > PTT_FRAMES_PER_PACKET : p.frames.length !== PTT_FRAMES_PER_PACKET) return `packet ${i} holds ${p.frames.length} frames`;
    total += p.frames.length * 960;
  }
  const end = stream.finalGranule;
  if (end <= BigInt(head.preSkip) || end > BigInt(total)) return `final granule position ${end} does not fit ${total} samples after a pre-skip of ${head.preSkip}`;
  return null;
}
