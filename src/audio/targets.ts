export type AudioPlatform = 'linkedin' | 'telegram' | 'whatsapp';
export type AudioFormat = 'ogg_opus' | 'm4a_aac';

export interface AudioTarget {
  format: AudioFormat;
  mimeType: string;
  fileName: string;
  maxBytes: number;
  maxDurationSeconds: number | null;
}

// Sizes are binary megabytes (MiB): PRODUCT.md says "MB" and the platforms' own
// documentation is loose about it; 1 MiB = 1,048,576 bytes is the larger reading,
// except where a platform would refuse it, which none of the three documents.
const MiB = 1024 * 1024;

const TARGETS: Readonly<Record<AudioPlatform, Readonly<AudioTarget>>> = {
  whatsapp: {
    format: 'ogg_opus',
    mimeType: 'audio/ogg; codecs=opus',
    fileName: 'voice.ogg',
    maxBytes: 16 * MiB,
    maxDurationSeconds: null,
  },
  telegram: {
    format: 'ogg_opus',
    mimeType: 'audio/ogg; codecs=opus',
    fileName: 'voice.ogg',
    maxBytes: 50 * MiB,
    maxDurationSeconds: null,
  },
  linkedin: {
    format: 'm4a_aac',
    mimeType: 'audio/mp4',
    fileName: 'voice.m4a',
    maxBytes: 10 * MiB,
    maxDurationSeconds: 60,
  },
};

export function audioTargetFor(platform: AudioPlatform): AudioTarget {
  const target = TARGETS[platform];
  if (!target) throw new TypeError(`unknown audio platform: ${String(platform)}`);
  return { ...target };
}

/** Default cap on the downloaded source (PRODUCT.md: "Source at most 50 MB", read as MiB). */
export const DEFAULT_MAX_SOURCE_BYTES = 50 * MiB;
