/**
 * Telegram draws a voice note's waveform only for files of at most 1 MB (tdlib/telegram-bot-api
 * #354); a larger one shows a flat bar. The bitrate is chosen from the length so that every note
 * up to 5 minutes fits (README, "Audio"; docs/platforms.md, "Audio").
 */
export const TELEGRAM_WAVEFORM_MAX_BYTES = 1_000_000;
export const TELEGRAM_MAX_KBPS = 32;
export const TELEGRAM_MIN_KBPS = 12;
// Ogg pages of about a second of 20 ms packets cost ~80 bytes a second; VBR may overshoot its
// average a little, hence 7 % left spare (a 5-minute note measured 24 kb/s → 0.92 MB).
const OGG_OVERHEAD_BPS = 80 * 8;
const SPARE = 0.93;

/** Whole kb/s: 32 while a note of this length fits in 1,000,000 bytes, less for longer ones, never below 12. */
export function telegramBitrateKbps(seconds: number | null): number {
  if (seconds === null || !Number.isFinite(seconds) || seconds <= 0) return TELEGRAM_MAX_KBPS;
  const fits = ((TELEGRAM_WAVEFORM_MAX_BYTES * 8 * SPARE) / seconds - OGG_OVERHEAD_BPS) / 1000;
  return Math.max(TELEGRAM_MIN_KBPS, Math.min(TELEGRAM_MAX_KBPS, Math.floor(fits)));
}
