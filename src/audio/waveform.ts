import { endianness } from 'node:os';

export const WAVEFORM_BARS = 64;
/** Bars in the waveform Telegram's apps send with a voice note, each 0–31 (5 bits). */
export const TELEGRAM_WAVEFORM_BARS = 100;
/** Rate the waveform decode runs at: plenty for a 64-bar envelope, cheap to pipe. */
export const WAVEFORM_SAMPLE_RATE = 8000;
const BLOCK = 80; // 10 ms at 8 kHz
const LITTLE_ENDIAN = endianness() === 'LE';

/**
 * Folds mono s16le PCM into 10 ms energy blocks as it streams, so memory stays small for
 * long files and the 64 bars can be laid out once the true length is known.
 */
export class WaveformAccumulator {
  private sums = new Float64Array(1024);
  /** The loudest sample of each block (Telegram's waveform is drawn from peaks, ours from energy). */
  private peaks = new Uint16Array(1024);
  private blockPeak = 0;
  private blocks = 0;
  private inBlock = 0;
  private blockSum = 0;
  private carry: number | null = null;
  samples = 0;

  push(chunk: Buffer): void {
    let i = 0;
    if (this.carry !== null && chunk.length > 0) {
      const lo = this.carry;
      this.carry = null;
      const v = ((chunk[0] as number) << 8) | lo;
      this.add(v >= 0x8000 ? v - 0x10000 : v);
      i = 1;
    }
    const end = chunk.length - ((chunk.length - i) % 2);
    const count = (end - i) / 2;
    // The hot loop of the waveform: samples read through a typed view where the bytes allow it (a
    // pipe's chunk is most often aligned), block state in locals rather than fields.
    const view = LITTLE_ENDIAN && (chunk.byteOffset + i) % 2 === 0 ? new Int16Array(chunk.buffer, chunk.byteOffset + i, count) : null;
    let sum = this.blockSum;
    let peak = this.blockPeak;
    let inBlock = this.inBlock;
    for (let k = 0; k < count; k++) {
      const sample = view ? (view[k] as number) : chunk.readInt16LE(i + 2 * k);
      sum += sample * sample;
      const magnitude = sample < 0 ? -sample : sample;
      if (magnitude > peak) peak = magnitude;
      if (++inBlock === BLOCK) {
        this.blockSum = sum;
        this.blockPeak = peak;
        this.closeBlock();
        sum = 0;
        peak = 0;
        inBlock = 0;
      }
    }
    this.blockSum = sum;
    this.blockPeak = peak;
    this.inBlock = inBlock;
    this.samples += count;
    if (end < chunk.length) this.carry = chunk[end] as number;
  }

  private add(sample: number): void {
    this.blockSum += sample * sample;
    const magnitude = sample < 0 ? -sample : sample;
    if (magnitude > this.blockPeak) this.blockPeak = magnitude;
    this.samples++;
    if (++this.inBlock === BLOCK) this.closeBlock();
  }

  private closeBlock(): void {
    if (this.blocks === this.sums.length) {
      const grown = new Float64Array(this.sums.length * 2);
      grown.set(this.sums);
      this.sums = grown;
      const grownPeaks = new Uint16Array(this.peaks.length * 2);
      grownPeaks.set(this.peaks);
      this.peaks = grownPeaks;
    }
    this.peaks[this.blocks] = Math.min(this.blockPeak, 0xffff);
    this.sums[this.blocks++] = this.blockSum;
    this.blockSum = 0;
    this.blockPeak = 0;
    this.inBlock = 0;
  }

  get seconds(): number {
    return this.samples / WAVEFORM_SAMPLE_RATE;
  }

  /** 64 bars, 0..100, RMS per bar relative to the loudest bar (all zero for silence). */
  finish(): Uint8Array {
    if (this.inBlock > 0) this.closeBlock();
    const out = new Uint8Array(WAVEFORM_BARS);
    const n = this.blocks;
    if (n === 0) return out;
    const rms = new Float64Array(WAVEFORM_BARS);
    for (let bar = 0; bar < WAVEFORM_BARS; bar++) {
      const start = Math.floor((bar * n) / WAVEFORM_BARS);
      const stop = Math.max(start + 1, Math.floor(((bar + 1) * n) / WAVEFORM_BARS));
      let sum = 0;
      for (let b = start; b < stop && b < n; b++) sum += this.sums[b] as number;
      rms[bar] = Math.sqrt(sum / ((stop - start) * BLOCK));
    }
    let max = 0;
    for (const v of rms) if (v > max) max = v;
    if (max === 0) return out;
    for (let bar = 0; bar < WAVEFORM_BARS; bar++) out[bar] = Math.round(((rms[bar] as number) / max) * 100);
    return out;
  }

  /**
   * The 100 bars Telegram Desktop computes when it records a voice note, from the same decode as the
   * 64 bars: a level per 10 ms block (its peak / 256), the loudest level of each bar times 256,
   * scaled against 1.8 × the bars' mean (at least 2500) and capped at 31, so speech fills the bubble.
   */
  telegramLevels(): Uint8Array {
    if (this.inBlock > 0) this.closeBlock();
    const out = new Uint8Array(TELEGRAM_WAVEFORM_BARS);
    const n = this.blocks;
    if (n === 0) return out;
    const bars = new Float64Array(TELEGRAM_WAVEFORM_BARS);
    for (let bar = 0; bar < TELEGRAM_WAVEFORM_BARS; bar++) {
      const start = Math.floor((bar * n) / TELEGRAM_WAVEFORM_BARS);
      const stop = Math.max(start + 1, Math.floor(((bar + 1) * n) / TELEGRAM_WAVEFORM_BARS));
      let peak = 0;
      for (let b = start; b < stop && b < n; b++) peak = Math.max(peak, ((this.peaks[b] as number) >> 8) << 8);
      bars[bar] = peak;
    }
    let sum = 0;
    for (const v of bars) sum += v;
    const norm = Math.max(Math.floor((sum * 1.8) / TELEGRAM_WAVEFORM_BARS), 2500);
    for (let bar = 0; bar < TELEGRAM_WAVEFORM_BARS; bar++) out[bar] = Math.min(31, Math.floor((Math.min(bars[bar] as number, norm) * 31) / norm));
    return out;
  }
}
