import { TELEGRAM_WAVEFORM_BARS } from './waveform.js';

/**
 * The waveform of a Telegram voice note as `DocumentAttributeAudio.waveform` carries it: 100 values of
 * 5 bits each, packed from the least significant bit of the first byte on (value i starts at bit 5·i),
 * 63 bytes for 100 values, as Telegram Desktop (`documentWaveformEncode5bit`) and tdlib write it.
 */
export function packWaveform5bit(values: Uint8Array): Buffer {
  const out = Buffer.alloc(Math.ceil((values.length * 5) / 8));
  values.forEach((raw, i) => {
    const value = raw & 0x1f;
    const bit = i * 5;
    const byte = bit >> 3;
    const shift = bit & 7;
    out[byte] = (out[byte] as number) | ((value << shift) & 0xff);
    if (shift > 3) out[byte + 1] = (out[byte + 1] as number) | (value >> (8 - shift));
  });
  return out;
}

/**
 * The 100 bars from our 64 (0–100) when a cached file predates the Telegram bars: each of the 100
 * takes the bar under it, scaled to 0–31. Coarser than the real ones, never empty.
 */
export function telegramBarsFrom64(bars: Uint8Array): Uint8Array {
  const out = new Uint8Array(TELEGRAM_WAVEFORM_BARS);
  if (bars.length === 0) return out;
  for (let i = 0; i < TELEGRAM_WAVEFORM_BARS; i++) out[i] = Math.round(((bars[Math.floor((i * bars.length) / TELEGRAM_WAVEFORM_BARS)] as number) * 31) / 100);
  return out;
}
