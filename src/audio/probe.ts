import { open } from 'node:fs/promises';
import { AudioError } from './errors.js';

/** The ffmpeg demuxer matching what the bytes are; forced so ffmpeg never guesses (HLS/concat tricks). */
export type Demuxer = 'mp3' | 'mov' | 'aac' | 'ogg' | 'wav' | 'matroska' | 'flac' | 'amr';

export interface SourceInfo {
  demuxer: Demuxer;
  container: string;
  codec: string | null;
  channels: number | null;
  sampleRate: number | null;
  /** As declared by the container; null when the format does not say (AMR). */
  durationSeconds: number | null;
}

// The parser is loaded at the first probe rather than at start-up: only the delivery worker probes
// audio, so a `serve --no-worker` process never needs it.
let musicMetadata: Promise<typeof import('music-metadata')> | undefined;
const loadParser = (): Promise<typeof import('music-metadata')> => (musicMetadata ??= import('music-metadata'));

async function readHead(path: string, length: number): Promise<Buffer> {
  const fh = await open(path, 'r');
  try {
    const buf = Buffer.alloc(length);
    const { bytesRead } = await fh.read(buf, 0, length, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

function demuxerFor(container: string, head: Buffer): Demuxer | null {
  // music-metadata names MP4 containers after their ftyp brands ("M4A/isom/iso2", "isom/avc1/…"),
  // so the ISO-BMFF magic is the reliable tell.
  if (head.subarray(4, 8).toString('latin1') === 'ftyp') return 'mov';
  if (container === 'MPEG') return 'mp3';
  if (container.startsWith('ADTS')) return 'aac';
  if (container === 'Ogg') return 'ogg';
  if (container === 'WAVE') return 'wav';
  if (container === 'FLAC') return 'flac';
  if (container.startsWith('EBML/')) return 'matroska';
  return null;
}

/**
 * Container, codec and duration from the bytes alone (never the URL or Content-Type).
 * Only the accepted inputs (docs/api.md, "POST /send") get through; anything else is audio_unsupported.
 */
export async function detectSource(path: string, sizeBytes: number): Promise<SourceInfo> {
  if (sizeBytes === 0) throw new AudioError('audio_unsupported', 'audio source is empty (0 bytes)');
  const head = await readHead(path, 16);
  // music-metadata recognises AMR but has no parser for it.
  if (head.toString('latin1').startsWith('#!AMR')) {
    const wide = head.toString('latin1').startsWith('#!AMR-WB');
    return { demuxer: 'amr', container: 'AMR', codec: wide ? 'AMR-WB' : 'AMR-NB', channels: 1, sampleRate: wide ? 16000 : 8000, durationSeconds: null };
  }
  const { parseFile } = await loadParser();
  let format;
  try {
    ({ format } = await parseFile(path, { duration: true, skipCovers: true }));
  } catch (err) {
    // The parser quotes the temp file's path; that is nobody's business outside this process.
    const why = (err instanceof Error ? err.message : String(err)).replaceAll(path, 'the file').replace(/: the file$/, '');
    throw new AudioError('audio_unsupported', `audio source is not a readable audio file (${why})`, { cause: err });
  }
  const container = format.container ?? 'unknown';
  const demuxer = demuxerFor(container, head);
  if (demuxer === null) {
    throw new AudioError('audio_unsupported', `audio container ${container} is not an accepted input`);
  }
  const codec = format.codec ?? null;
  if (demuxer === 'ogg' && !/opus|vorbis/i.test(codec ?? '')) {
    throw new AudioError('audio_unsupported', `Ogg with codec ${codec ?? 'unknown'} is not an accepted input (Opus or Vorbis only)`);
  }
  const duration = format.duration;
  return {
    demuxer,
    container,
    codec,
    channels: format.numberOfChannels ?? null,
    sampleRate: format.sampleRate ?? null,
    durationSeconds: typeof duration === 'number' && Number.isFinite(duration) && duration > 0 ? duration : null,
  };
}

export interface StreamLayout {
  audio: { codec: string; profile: string | null; sampleRate: number; channels: number | null } | null;
  hasVideo: boolean;
}

const AUDIO_STREAM = /^\s*Stream #0:\d+(?:\[[^\]]*\])?(?:\([^)]*\))?: Audio: ([a-z0-9_]+)(?: \(([^)]*)\))?[^,]*, (\d+) Hz, ([^,]+)/m;
const VIDEO_STREAM = /^\s*Stream #0:\d+(?:\[[^\]]*\])?(?:\([^)]*\))?: Video: (?![^\n]*attached pic)/m;

function channelCount(layout: string): number | null {
  const l = layout.trim();
  if (l === 'mono') return 1;
  if (l === 'stereo') return 2;
  const n = /^(\d+) channels?/.exec(l);
  return n ? Number(n[1]) : null;
}

/** Reads the input stream layout ffmpeg prints at -loglevel info (the bundled build has no ffprobe). */
export function parseInputStreams(stderr: string): StreamLayout {
  const cut = stderr.search(/^(Output #0|Stream mapping:)/m);
  const inputPart = cut === -1 ? stderr : stderr.slice(0, cut);
  const a = AUDIO_STREAM.exec(inputPart);
  return {
    audio: a
      ? { codec: a[1] as string, profile: a[2] ?? null, sampleRate: Number(a[3]), channels: channelCount(a[4] as string) }
      : null,
    hasVideo: VIDEO_STREAM.test(inputPart),
  };
}

/** The last line ffmpeg wrote, which is where it says what went wrong. */
export function lastFfmpegLine(stderr: string): string {
  const lines = stderr.trim().split('\n').map((l) => l.trim()).filter((l) => l !== '');
  return (lines.at(-1) ?? 'no output').slice(0, 300);
}
