export type AudioFormat = 'ogg_opus' | 'm4a_aac';

/**
 * How a platform's file is made (docs/how-it-works.md, "Audio"): the container format alone does not say it,
 * since Telegram and WhatsApp both take Ogg Opus but not the same Ogg Opus. Converted files are
 * cached per profile.
 * - `ogg_opus`: Telegram, 48 kHz Opus, bitrate chosen from the length to fit 1,000,000 bytes.
 * - `ogg_opus_ptt`: WhatsApp's native push-to-talk profile (16 kHz SILK, three frames a packet).
 * - `m4a_aac`: LinkedIn, AAC-LC in M4A.
 */
export type AudioProfile = 'ogg_opus' | 'ogg_opus_ptt' | 'm4a_aac';

/** What a platform takes as a voice note; each platform declares its own (src/platforms/<name>/). */
export interface AudioTarget {
  format: AudioFormat;
  profile: AudioProfile;
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

export const OGG_OPUS_VOICE = { format: 'ogg_opus', profile: 'ogg_opus', mimeType: 'audio/ogg; codecs=opus', fileName: 'voice.ogg' } as const;
export const WHATSAPP_PTT_VOICE = { ...OGG_OPUS_VOICE, profile: 'ogg_opus_ptt' } as const;
export const M4A_AAC_VOICE = { format: 'm4a_aac', profile: 'm4a_aac', mimeType: 'audio/mp4', fileName: 'voice.m4a' } as const;

export const AUDIO_PROFILES: readonly AudioProfile[] = ['ogg_opus', 'ogg_opus_ptt', 'm4a_aac'];

export function formatOfProfile(profile: AudioProfile): AudioFormat {
  return profile === 'm4a_aac' ? 'm4a_aac' : 'ogg_opus';
}

/**
 * The profile a message's converted file was made in, from what the message log keeps (its
 * platform and format): WhatsApp's Ogg Opus is the push-to-talk profile.
 */
export function profileOfSent(platform: string, format: AudioFormat): AudioProfile {
  return format === 'ogg_opus' && platform === 'whatsapp' ? 'ogg_opus_ptt' : format;
}
