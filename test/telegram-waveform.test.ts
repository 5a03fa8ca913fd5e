import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { it } from './fixtures/timed.js';
import fc from 'fast-check';
import { packWaveform5bit, telegramBarsFrom64 } from '../src/audio/telegram-waveform.js';
import { WaveformAccumulator } from '../src/audio/waveform.js';

/** Written apart from the encoder: the bytes as one little-endian bit string, value i from bits 5i..5i+4. */
function unpack5bit(bytes: Buffer, count: number): number[] {
  let bits = '';
  for (const byte of bytes) bits += byte.toString(2).padStart(8, '0').split('').reverse().join('');
  return Array.from({ length: count }, (_, i) => parseInt(bits.slice(i * 5, i * 5 + 5).split('').reverse().join(''), 2));
}

/** 8 kHz mono s16le: `seconds` of a tone at `amplitude`, then `silence` seconds of nothing. */
function pcm(seconds: number, amplitude: number, silence = 0): Buffer {
  const tone = Math.round(seconds * 8000);
  const out = Buffer.alloc((tone + Math.round(silence * 8000)) * 2);
  for (let i = 0; i < tone; i++) out.writeInt16LE(Math.round(amplitude * Math.sin((2 * Math.PI * 440 * i) / 8000)), i * 2);
  return out;
}

describe('the Telegram voice-note waveform', () => {
  it('packs 100 values of 5 bits into 63 bytes, least significant bit first, as Telegram Desktop and tdlib do', () => {
    const values = new Uint8Array(100);
    values[0] = 31;
    values[1] = 1;
    values[2] = 0b10101;
    const packed = packWaveform5bit(values);
    assert.equal(packed.length, 63);
    // value 0 in bits 0–4, value 1 from bit 5 (0x20), value 2 from bit 10 (byte 1, bit 2): 0b10101 << 2 = 0x54.
    assert.equal(packed[0], 0x3f);
    assert.equal(packed[1], 0x54);
    assert.ok(packed.subarray(2).every((b) => b === 0));
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 100, maxLength: 100, max: 31 }), (bars) => {
        assert.deepEqual(unpack5bit(packWaveform5bit(bars), 100), [...bars]);
      }),
    );
  });

  it('draws 100 bars from the same decode as the 64: a steady tone at 31 / 1.8, silence at 0, quiet audio not blown up', () => {
    const wave = new WaveformAccumulator();
    wave.push(pcm(2, 16_000, 2));
    const bars64 = wave.finish();
    const bars = wave.telegramLevels();
    assert.equal(bars.length, 100);
    assert.equal(bars64.length, 64, 'the 64 bars are still there');
    // Peak 16000 → level 62 → 15872; scale max(1.8 × mean, 2500) = 1.8 × 7936 = 14284: loud bars cap at 31.
    assert.ok(bars.subarray(0, 49).every((v) => v === 31), [...bars].join(','));
    assert.ok(bars.subarray(51).every((v) => v === 0), [...bars].join(','));

    const steady = new WaveformAccumulator();
    steady.push(pcm(3, 16_000));
    assert.ok(steady.telegramLevels().every((v) => v === 17), 'floor(15872 × 31 / floor(1.8 × 15872)) = 17');

    const quiet = new WaveformAccumulator();
    quiet.push(pcm(3, 600));
    // Level 2 (600 / 256) → 512, against the floor of 2500: 512 × 31 / 2500 = 6.
    assert.ok(quiet.telegramLevels().every((v) => v === 6), [...quiet.telegramLevels()].join(','));
    assert.ok(new WaveformAccumulator().telegramLevels().every((v) => v === 0));
  });

  it('a file cached before the Telegram bars gets them from its 64 bars, scaled to 0–31', () => {
    const bars = telegramBarsFrom64(Uint8Array.from({ length: 64 }, (_, i) => (i < 32 ? 100 : 0)));
    assert.equal(bars.length, 100);
    assert.equal(bars[0], 31);
    assert.equal(bars[99], 0);
  });
});
