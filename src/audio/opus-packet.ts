/**
 * Opus packets and their framing codes (RFC 6716 §3): reading a packet's frames, writing a code 3
 * packet of several frames, a packet's length in samples. The Ogg side is ogg-opus.ts.
 */

export class OggOpusError extends Error {}

/** Frame length in 48 kHz samples for each TOC configuration (RFC 6716 §3.1, Table 2). */
export function samplesPerFrame(config: number): number {
  if (config < 12) return [480, 960, 1920, 2880][config % 4] as number; // SILK-only: 10/20/40/60 ms
  if (config < 16) return [480, 960][config % 2] as number; // Hybrid: 10/20 ms
  return [120, 240, 480, 960][config % 4] as number; // CELT-only: 2.5/5/10/20 ms
}

export interface OpusPacket {
  config: number;
  stereo: boolean;
  /** The framing code of the TOC byte (0–3). */
  code: number;
  frames: Buffer[];
}

/** Reads a frame length (RFC 6716 §3.2.1); returns [length, bytes used]. */
function readFrameLength(packet: Buffer, at: number): [number, number] {
  if (at >= packet.length) throw new OggOpusError('Opus frame length is cut short');
  const first = packet[at] as number;
  if (first < 252) return [first, 1];
  if (at + 1 >= packet.length) throw new OggOpusError('Opus frame length is cut short');
  return [(packet[at + 1] as number) * 4 + first, 2];
}

function frameLengthBytes(length: number): number[] {
  if (length > 1275) throw new OggOpusError(`Opus frame of ${length} bytes is over 1275`);
  if (length < 252) return [length];
  const first = 252 + ((length - 252) % 4);
  return [first, (length - first) / 4];
}

/** Splits an Opus packet into its frames, for any of the four framing codes (RFC 6716 §3.2). */
export function parseOpusPacket(packet: Buffer): OpusPacket {
  if (packet.length < 1) throw new OggOpusError('empty Opus packet');
  const toc = packet[0] as number;
  const config = toc >> 3;
  const stereo = (toc & 0x04) !== 0;
  const code = toc & 0x03;
  const body = packet.subarray(1);
  let frames: Buffer[];
  if (code === 0) {
    frames = [body];
  } else if (code === 1) {
    if (body.length % 2 !== 0) throw new OggOpusError('code 1 Opus packet with an odd payload');
    frames = [body.subarray(0, body.length / 2), body.subarray(body.length / 2)];
  } else if (code === 2) {
    const [first, used] = readFrameLength(packet, 1);
    if (1 + used + first > packet.length) throw new OggOpusError('code 2 Opus packet: first frame runs past the packet');
    frames = [packet.subarray(1 + used, 1 + used + first), packet.subarray(1 + used + first)];
  } else {
    if (packet.length < 2) throw new OggOpusError('code 3 Opus packet without a frame count');
    const countByte = packet[1] as number;
    const vbr = (countByte & 0x80) !== 0;
    const padded = (countByte & 0x40) !== 0;
    const count = countByte & 0x3f;
    if (count === 0) throw new OggOpusError('code 3 Opus packet with no frames');
    if (count * samplesPerFrame(config) > 5760) throw new OggOpusError('code 3 Opus packet longer than 120 ms');
    let at = 2;
    let padding = 0;
    if (padded) {
      for (;;) {
        if (at >= packet.length) throw new OggOpusError('code 3 Opus packet: padding length is cut short');
        const p = packet[at++] as number;
        padding += p === 255 ? 254 : p;
        if (p !== 255) break;
      }
    }
    const end = packet.length - padding;
    const lengths: number[] = [];
    if (vbr) {
      for (let i = 0; i < count - 1; i++) {
        const [length, used] = readFrameLength(packet, at);
        lengths.push(length);
        at += used;
      }
      const rest = end - at - lengths.reduce((a, b) => a + b, 0);
      if (rest < 0) throw new OggOpusError('code 3 Opus packet: frames run past the packet');
      lengths.push(rest);
    } else {
      const total = end - at;
      if (total < 0 || total % count !== 0) throw new OggOpusError('code 3 CBR Opus packet whose frames are not of one length');
      for (let i = 0; i < count; i++) lengths.push(total / count);
    }
    frames = [];
    for (const length of lengths) {
      frames.push(packet.subarray(at, at + length));
      at += length;
    }
  }
  for (const f of frames) if (f.length > 1275) throw new OggOpusError(`Opus frame of ${f.length} bytes is over 1275`);
  return { config, stereo, code, frames };
}

/**
 * One code 3 packet holding `frames` (RFC 6716 §3.2.5): constant-bitrate when every frame has the
 * same length (no length fields needed), else variable with each frame's length but the last.
 */
export function code3Packet(config: number, stereo: boolean, frames: readonly Buffer[]): Buffer {
  if (frames.length < 1 || frames.length * samplesPerFrame(config) > 5760) throw new OggOpusError('a code 3 packet holds 1 to 120 ms of frames');
  const toc = (config << 3) | (stereo ? 0x04 : 0) | 0x03;
  const cbr = frames.every((f) => f.length === frames[0]!.length);
  const head = [toc, (cbr ? 0 : 0x80) | frames.length];
  if (!cbr) for (const f of frames.slice(0, -1)) head.push(...frameLengthBytes(f.length));
  for (const f of frames) if (f.length > 1275) throw new OggOpusError(`Opus frame of ${f.length} bytes is over 1275`);
  return Buffer.concat([Buffer.from(head), ...frames]);
}

/** Duration of a packet in 48 kHz samples. */
export function packetSamples(packet: Buffer): number {
  const p = parseOpusPacket(packet);
  return p.frames.length * samplesPerFrame(p.config);
}
