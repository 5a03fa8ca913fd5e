export type AudioFormat = 'ogg_opus' | 'm4a_aac';

/** What a platform takes as a voice note; each platform declares its own (src/platforms/<name>/). */
export interface AudioTarget {
  format: AudioFormat;
  mimeType: string;
  fileName: string;
  maxBytes: number;
  maxDurationSeconds: number | null;
}

// Sizes are binary megabytes (MiB): the product says "MB" and the platforms' own documentation is
// loose about it; 1 MiB = 1,048,576 bytes is the larger reading, except where a platform would refuse
// it, which none documents.
export const MiB = 1024 * 1024;

/** Default cap on the downloaded source ("source at most 50 MB", read as MiB). */
export const DEFAULT_MAX_SOURCE_BYTES = 50 * MiB;

export const OGG_OPUS_VOICE = { format: 'ogg_opus', mimeType: 'audio/ogg; codecs=opus', fileName: 'voice.ogg' } as const;
export const M4A_AAC_VOICE = { format: 'm4a_aac', mimeType: 'audio/mp4', fileName: 'voice.m4a' } as const;
