/**
 * Telegram draws a voice note's waveform only for files of at most 1 MB (tdlib/telegram-bot-api
 * #354); a larger one shows a flat bar. The bitrate is chosen from the length so that every note
 * up to 10 minutes fits with a tenth of the limit to spare (docs/how-it-works.md, "Audio"; docs/platforms.md, "Audio").
 */
export const TELEGRAM_WAVEFORM_MAX_BYTES = 1_000_000;
export const TELEGRAM_MAX_KBPS = 32;
export const TELEGRAM_MIN_KBPS = 12;
/**
 * What a file may come to above its nominal bitrate: libopus's VBR plus Ogg pages, measured on speech
 * (espeak-ng voices, BENCHMARKS.md "Telegram file sizes"): up to 2.3 kb/s over at 14–20 kb/s, where
 * libopus moves to wideband (13 kb/s → 12.5 kb/s in the file, 14 kb/s → 16.3 kb/s), 0.5 kb/s at 32.
 */
export const TELEGRAM_OVERSHOOT_BPS = 3000;
/** A tenth of the 1 MB kept free on top of the measured overshoot: a voice we did not measure may overshoot more. */
const SPARE = 0.9;

/** Whole kb/s: 32 while a note of this length fits in 1,000,000 bytes, less for longer ones, never below 12. */
export function telegramBitrateKbps(seconds: number | null): number {
  if (seconds === null || !Number.isFinite(seconds) || seconds <= 0) return TELEGRAM_MAX_KBPS;
  const fits = ((TELEGRAM_WAVEFORM_MAX_BYTES * 8 * SPARE) / seconds - TELEGRAM_OVERSHOOT_BPS) / 1000;
  return Math.max(TELEGRAM_MIN_KBPS, Math.min(TELEGRAM_MAX_KBPS, Math.floor(fits)));
}
