import { createHash, randomBytes } from 'node:crypto';
import type { VoiceNoteContent } from '../../src/platforms/whatsapp/socket.js';
import { describeOggOpus } from '../fixtures/ogg-opus-reader.js';

/** What the fake WhatsApp (whatsapp-socket.ts) checks and makes of a voice note, as Baileys 7 and a phone do. */

/** Key types Baileys 7 writes besides the signal ones, with the ids the fake uses. */
export const BAILEYS7_KEY_IDS: Record<string, string[]> = {
  'lid-mapping': ['14155550123', '14155550123_reverse'],
  'device-list': ['14155550123'],
  tctoken: ['14155550123@s.whatsapp.net'],
};

/** What Baileys' sendMessage makes of a voice note once the audio is uploaded: an audioMessage pointing at the encrypted file. */
export function uploadedVoiceNote(content: VoiceNoteContent): Record<string, any> {
  const path = `/v/t62.7117-24/${randomBytes(12).toString('hex')}.enc?ccb=11-4&oh=${randomBytes(16).toString('hex')}&oe=69A1B2C3&_nc_sid=5e03e0`;
  return {
    audioMessage: {
      url: `https://mmg.whatsapp.net${path}&mms3=true`,
      mimetype: content.mimetype,
      fileSha256: createHash('sha256').update(content.audio).digest(),
      fileLength: content.audio.length,
      seconds: content.seconds,
      ptt: true,
      mediaKey: randomBytes(32),
      fileEncSha256: randomBytes(32),
      directPath: path,
      mediaKeyTimestamp: Math.floor(Date.now() / 1000),
      waveform: Buffer.from(content.waveform),
    },
    messageContextInfo: { messageSecret: randomBytes(32) },
  };
}

/** A message as the protobuf bytes Baileys encrypts and relays (`proto.Message.encode`). */
export async function encodedMessage(message: unknown): Promise<Buffer> {
  const { proto } = await import('@whiskeysockets/baileys');
  return Buffer.from(proto.Message.encode(proto.Message.fromObject(message as Record<string, unknown>)).finish());
}

/** What an iPhone refuses ("this audio is no longer available"): anything but the native push-to-talk profile. */
function pushToTalkProblem(audio: Buffer, seconds: number): string | null {
  let d;
  try {
    d = describeOggOpus(audio);
  } catch (err) {
    return `audio is not a valid Ogg Opus stream (${(err as Error).message})`;
  }
  if (d.channels !== 1 || d.inputRate !== 16000) return `audio is ${d.channels} channel(s) at an input rate of ${d.inputRate}, not mono 16 kHz`;
  if (/^Lav[fc]/.test(d.vendor) || d.comments.some((c) => /^encoder=/i.test(c))) return "audio carries ffmpeg's vendor string or encoder tag";
  const bad = d.packets.findIndex((p, i) => p.config !== 9 || p.code !== 3 || (i < d.packets.length - 1 && p.frameSizes.length !== 3));
  if (bad !== -1) return `audio packet ${bad} is not three SILK wideband 20 ms frames in a code 3 packet`;
  const length = Number(d.lastGranule - BigInt(d.preSkip)) / 48000;
  if (Math.abs(length - seconds) > 1) return `seconds ${seconds} for ${length.toFixed(2)} s of audio`;
  return null;
}

/** Why a real client would not have sent this voice note (a violation the fake records), or null. */
export function voiceNoteProblem(content: VoiceNoteContent, options: { messageId?: string } | undefined): string | null {
  if (content.ptt !== true) return 'ptt is not true';
  if (content.mimetype !== 'audio/ogg; codecs=opus') return `mimetype ${content.mimetype}`;
  if (!Buffer.isBuffer(content.audio) || content.audio.subarray(0, 4).toString('latin1') !== 'OggS') return 'audio is not an Ogg stream';
  if (!Number.isInteger(content.seconds) || content.seconds < 1) return `seconds ${content.seconds} is not a whole number of at least 1`;
  const profile = pushToTalkProblem(content.audio, content.seconds);
  if (profile) return profile;
  const waveform = content.waveform as unknown;
  if (!(waveform instanceof Uint8Array) || waveform.length !== 64 || [...waveform].some((v) => v > 100)) return 'waveform is not 64 values 0-100';
  if (typeof options?.messageId !== 'string' || options.messageId === '') return 'no message id chosen by the sender';
  return null;
}
