export const WAVEFORM_BARS = 64;
/** Rate the waveform decode runs at: plenty for a 64-bar envelope, cheap to pipe. */
export const WAVEFORM_SAMPLE_RATE = 8000;
const BLOCK = 80; // 10 ms at 8 kHz

/**
 * Folds mono s16le PCM into 10 ms energy blocks as it streams, so memory stays small for
 * long files and the 64 bars can be laid out once the true length is known.
 */
export class WaveformAccumulator {
  private sums = new Float64Array(1024);
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
    for (; i < end; i += 2) this.add(chunk.readInt16LE(i));
    if (end < chunk.length) this.carry = chunk[end] as number;
  }

  private add(sample: number): void {
    this.blockSum += sample * sample;
    this.samples++;
    if (++this.inBlock === BLOCK) this.closeBlock();
  }

  private closeBlock(): void {
    if (this.blocks === this.sums.length) {
      const grown = new Float64Array(this.sums.length * 2);
      grown.set(this.sums);
      this.sums = grown;
    }
    this.sums[this.blocks++] = this.blockSum;
    this.blockSum = 0;
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
}
