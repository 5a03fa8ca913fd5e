import { raw, type Html } from './html.js';

const BAR = 4;
const GAP = 2;
const HEIGHT = 48;

/**
 * The 64-bar waveform a WhatsApp voice note carries (values 0–100), drawn as inline SVG bars centred
 * on a line, as the recipient's app shows it.
 */
export function waveformSvg(bars: number[], label: string): Html {
  const width = bars.length * (BAR + GAP);
  const rects = bars
    .map((value, i) => {
      const h = Math.max(2, (Math.min(100, Math.max(0, value)) / 100) * HEIGHT);
      return `<rect x="${i * (BAR + GAP)}" y="${((HEIGHT - h) / 2).toFixed(1)}" width="${BAR}" height="${h.toFixed(1)}" rx="1"/>`;
    })
    .join('');
  const safe = label.replace(/[<>&"]/g, '');
  return raw(
    `<svg class="waveform" viewBox="0 0 ${width} ${HEIGHT}" width="${width}" height="${HEIGHT}" role="img" aria-label="${safe}" xmlns="http://www.w3.org/2000/svg"><title>${safe}</title>${rects}</svg>`,
  );
}

/** The stored waveform (a JSON array), or null when absent or not what it should be. */
export function parseWaveform(text: string | null): number[] | null {
  if (text === null) return null;
  try {
    const value: unknown = JSON.parse(text);
    return Array.isArray(value) && value.every((v) => typeof v === 'number') ? (value as number[]) : null;
  } catch {
    return null;
  }
}
