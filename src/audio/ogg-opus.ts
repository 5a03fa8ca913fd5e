/**
 * A small Ogg/Opus reader and writer: enough to repack an encoder's one-frame packets into the
 * three-frame packets WhatsApp's own apps record (docs/how-it-works.md, "Audio"; docs/platforms.md, "Audio").
 *
 * Ogg pages: RFC 3533. Opus packets and their framing codes: RFC 6716 §3. OpusHead, OpusTags and
 * granule positions: RFC 7845. One logical stream only (a voice note is never chained or multiplexed).
 */

import { OggOpusError, packetSamples } from './opus-packet.js';

// Opus packets (their framing, one packet's length) live in opus-packet.ts; re-exported for the callers of this module.
export { code3Packet, OggOpusError, packetSamples, parseOpusPacket, samplesPerFrame, type OpusPacket } from './opus-packet.js';

/** The vendor string of every Ogg Opus file we write (never ffmpeg's `Lavf…`). */
export const OUR_VENDOR = 'voicenote';

// ---------------------------------------------------------------------------------------------
// Ogg pages (RFC 3533)
// ---------------------------------------------------------------------------------------------

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let r = i << 24;
    for (let k = 0; k < 8; k++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
    table[i] = r >>> 0;
  }
  return table;
})();

/** Ogg's CRC-32: polynomial 0x04c11db7, not reflected, initial value 0, no final XOR. */
export function oggCrc(bytes: Uint8Array): number {
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) ^ (CRC_TABLE[((crc >>> 24) ^ b) & 0xff] as number)) >>> 0;
  return crc >>> 0;
}

const HEADER_CONTINUED = 0x01;
const HEADER_BOS = 0x02;
const HEADER_EOS = 0x04;

export interface OggPage {
  headerType: number;
  granule: bigint;
  serial: number;
  sequence: number;
  /** Lacing values of the segment table. */
  lacing: number[];
  body: Buffer;
}

/** Every page of the file, CRC-checked, in order. */
export function readOggPages(file: Buffer): OggPage[] {
  const pages: OggPage[] = [];
  let at = 0;
  while (at < file.length) {
    if (file.length - at < 27 || file.toString('latin1', at, at + 4) !== 'OggS') throw new OggOpusError(`no Ogg page at byte ${at}`);
    if (file[at + 4] !== 0) throw new OggOpusError(`Ogg page at byte ${at} has an unknown version`);
    const segments = file[at + 26] as number;
    const headerLength = 27 + segments;
    if (file.length - at < headerLength) throw new OggOpusError(`Ogg page at byte ${at} is cut short`);
    const lacing = [...file.subarray(at + 27, at + headerLength)];
    const bodyLength = lacing.reduce((a, b) => a + b, 0);
    if (file.length - at < headerLength + bodyLength) throw new OggOpusError(`Ogg page at byte ${at} is cut short`);
    const whole = Buffer.from(file.subarray(at, at + headerLength + bodyLength));
    const stored = whole.readUInt32LE(22);
    whole.writeUInt32LE(0, 22);
    if (oggCrc(whole) !== stored) throw new OggOpusError(`Ogg page at byte ${at} fails its CRC`);
    pages.push({
      headerType: file[at + 5] as number,
      granule: file.readBigInt64LE(at + 6),
      serial: file.readUInt32LE(at + 14),
      sequence: file.readUInt32LE(at + 18),
      lacing,
      body: file.subarray(at + headerLength, at + headerLength + bodyLength),
    });
    at += headerLength + bodyLength;
  }
  return pages;
}

export interface OggPacket {
  data: Buffer;
  /** Granule position of the page this packet ends on, when it is the last packet to end there; else -1. */
  granule: bigint;
  /** Index of the page the packet ends on. */
  page: number;
}

/** The packets of a single-stream Ogg file. */
export function readOggPackets(file: Buffer): { pages: OggPage[]; packets: OggPacket[] } {
  const pages = readOggPages(file);
  if (pages.length === 0) throw new OggOpusError('no Ogg pages');
  const serial = pages[0]!.serial;
  const packets: OggPacket[] = [];
  let pending: Buffer[] = [];
  pages.forEach((page, index) => {
    if (page.serial !== serial) throw new OggOpusError('more than one logical stream (chained or multiplexed Ogg)');
    if (page.sequence !== index) throw new OggOpusError(`Ogg page ${index} is numbered ${page.sequence} (pages lost or reordered)`);
    if (Boolean(page.headerType & HEADER_CONTINUED) !== pending.length > 0) throw new OggOpusError(`Ogg page ${index} breaks packet continuation`);
    let offset = 0;
    let lastEnding = -1;
    for (const value of page.lacing) {
      pending.push(page.body.subarray(offset, offset + value));
      offset += value;
      if (value < 255) {
        packets.push({ data: Buffer.concat(pending), granule: -1n, page: index });
        pending = [];
        lastEnding = packets.length - 1;
      }
    }
    if (lastEnding >= 0) packets[lastEnding]!.granule = page.granule;
  });
  if (pending.length > 0) throw new OggOpusError('the last Ogg packet is unfinished');
  return { pages, packets };
}

function pageBytes(page: Omit<OggPage, 'lacing'> & { lacing: number[] }): Buffer {
  const header = Buffer.alloc(27 + page.lacing.length);
  header.write('OggS', 0, 'latin1');
  header[4] = 0;
  header[5] = page.headerType;
  header.writeBigInt64LE(page.granule, 6);
  header.writeUInt32LE(page.serial, 14);
  header.writeUInt32LE(page.sequence, 18);
  header[26] = page.lacing.length;
  page.lacing.forEach((v, i) => (header[27 + i] = v));
  const whole = Buffer.concat([header, page.body]);
  whole.writeUInt32LE(oggCrc(whole), 22);
  return whole;
}

function lacingOf(length: number): number[] {
  const out = new Array<number>(Math.floor(length / 255)).fill(255);
  out.push(length % 255);
  return out;
}

// ---------------------------------------------------------------------------------------------
// OpusHead and OpusTags (RFC 7845 §5)
// ---------------------------------------------------------------------------------------------

export interface OpusHead {
  channels: number;
  /** In 48 kHz samples. */
  preSkip: number;
  inputSampleRate: number;
  outputGain: number;
  mappingFamily: number;
}

export function parseOpusHead(packet: Buffer): OpusHead {
  if (packet.length < 19 || packet.toString('latin1', 0, 8) !== 'OpusHead') throw new OggOpusError('the first packet is not an OpusHead');
  if ((packet[8] as number) >> 4 !== 0) throw new OggOpusError(`unsupported OpusHead version ${packet[8]}`);
  return {
    channels: packet[9] as number,
    preSkip: packet.readUInt16LE(10),
    inputSampleRate: packet.readUInt32LE(12),
    outputGain: packet.readInt16LE(16),
    mappingFamily: packet[18] as number,
  };
}

function opusHeadBytes(head: OpusHead): Buffer {
  if (head.mappingFamily !== 0 || head.channels < 1 || head.channels > 2) throw new OggOpusError('only mono or stereo with channel mapping 0 is written');
  const out = Buffer.alloc(19);
  out.write('OpusHead', 0, 'latin1');
  out[8] = 1;
  out[9] = head.channels;
  out.writeUInt16LE(head.preSkip, 10);
  out.writeUInt32LE(head.inputSampleRate, 12);
  out.writeInt16LE(head.outputGain, 16);
  out[18] = 0;
  return out;
}

export interface OpusTags {
  vendor: string;
  comments: string[];
}

export function parseOpusTags(packet: Buffer): OpusTags {
  if (packet.length < 16 || packet.toString('latin1', 0, 8) !== 'OpusTags') throw new OggOpusError('the second packet is not an OpusTags');
  let at = 8;
  const take = (): string => {
    if (at + 4 > packet.length) throw new OggOpusError('OpusTags is cut short');
    const length = packet.readUInt32LE(at);
    at += 4;
    if (at + length > packet.length) throw new OggOpusError('OpusTags is cut short');
    const text = packet.toString('utf8', at, at + length);
    at += length;
    return text;
  };
  const vendor = take();
  if (at + 4 > packet.length) throw new OggOpusError('OpusTags is cut short');
  const count = packet.readUInt32LE(at);
  at += 4;
  const comments: string[] = [];
  for (let i = 0; i < count; i++) comments.push(take());
  return { vendor, comments };
}

function opusTagsBytes(tags: OpusTags): Buffer {
  const parts: Buffer[] = [Buffer.from('OpusTags', 'latin1')];
  const str = (s: string): void => {
    const b = Buffer.from(s, 'utf8');
    const n = Buffer.alloc(4);
    n.writeUInt32LE(b.length);
    parts.push(n, b);
  };
  str(tags.vendor);
  const count = Buffer.alloc(4);
  count.writeUInt32LE(tags.comments.length);
  parts.push(count);
  for (const c of tags.comments) str(c);
  return Buffer.concat(parts);
}

// ---------------------------------------------------------------------------------------------
// Whole streams
// ---------------------------------------------------------------------------------------------

export interface OggOpusStream {
  head: OpusHead;
  tags: OpusTags;
  /** Audio packets, in order. */
  packets: Buffer[];
  /** Granule position of the last page: pre-skip plus the playable length, in 48 kHz samples. */
  finalGranule: bigint;
  serial: number;
}

/** Reads a single-stream Ogg Opus file (header pages, audio packets, final granule). */
export function readOggOpus(file: Buffer): OggOpusStream {
  const { pages, packets } = readOggPackets(file);
  if (packets.length < 2) throw new OggOpusError('Ogg Opus stream without its two header packets');
  if (!(pages[0]!.headerType & HEADER_BOS)) throw new OggOpusError('first Ogg page is not marked as the beginning of the stream');
  const head = parseOpusHead(packets[0]!.data);
  const tags = parseOpusTags(packets[1]!.data);
  const last = pages.at(-1)!;
  return { head, tags, packets: packets.slice(2).map((p) => p.data), finalGranule: last.granule, serial: pages[0]!.serial };
}

export interface WriteOptions {
  head: OpusHead;
  tags: OpusTags;
  packets: readonly Buffer[];
  finalGranule: bigint;
  serial: number;
  /** Audio a page holds at most, in 48 kHz samples (the last packet that fits decides). */
  pageSamples?: number;
}

/**
 * Lays packets out in pages: OpusHead alone on the first page (beginning of stream), OpusTags on
 * the next, then audio pages whose granule position counts every sample of the packets that end
 * on them; the last page carries `finalGranule` (end trimming) and the end-of-stream flag.
 */
export function writeOggOpus(opts: WriteOptions): Buffer {
  const out: Buffer[] = [];
  let sequence = 0;
  const push = (headerType: number, granule: bigint, packets: Buffer[]): void => {
    const lacing = packets.flatMap((p) => lacingOf(p.length));
    if (lacing.length > 255) throw new OggOpusError('an Ogg page holds at most 255 lacing values');
    out.push(pageBytes({ headerType, granule, serial: opts.serial, sequence: sequence++, lacing, body: Buffer.concat(packets) }));
  };
  push(HEADER_BOS, 0n, [opusHeadBytes(opts.head)]);
  const tags = opusTagsBytes(opts.tags);
  if (lacingOf(tags.length).length > 255) throw new OggOpusError('OpusTags too large for one page');
  push(0, 0n, [tags]);
  const pageSamples = opts.pageSamples ?? 48000;
  let granule = 0n;
  let page: Buffer[] = [];
  let pageLacing = 0;
  let inPage = 0;
  opts.packets.forEach((packet, i) => {
    const samples = packetSamples(packet);
    const lacing = lacingOf(packet.length).length;
    if (page.length > 0 && (pageLacing + lacing > 255 || inPage + samples > pageSamples)) {
      push(0, granule, page);
      page = [];
      pageLacing = 0;
      inPage = 0;
    }
    page.push(packet);
    pageLacing += lacing;
    inPage += samples;
    granule += BigInt(samples);
    if (i === opts.packets.length - 1) {
      if (opts.finalGranule > granule) throw new OggOpusError('final granule position is beyond the audio');
      if (opts.finalGranule <= granule - BigInt(samples)) throw new OggOpusError('final granule position trims more than the last packet');
      push(HEADER_EOS, opts.finalGranule, page);
    }
  });
  if (opts.packets.length === 0) throw new OggOpusError('no audio packets to write');
  return Buffer.concat(out);
}

/**
 * The same audio packets under fresh headers: `vendor` as the vendor string and no comments at all
 * (no title or artist, no cover art, no `encoder=` tag).
 */
export function withoutTags(file: Buffer, vendor: string): Buffer {
  const stream = readOggOpus(file);
  return writeOggOpus({ ...stream, tags: { vendor, comments: [] } });
}
