import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { EncoderProcesses } from '../src/audio/encoder-processes.js';
import { OPUS_BINDING } from '../src/audio/opus-encoder.js';
import { SPEECH_LIKE_FILTER } from '../src/audio/speech-like.js';
import { ffmpeg, testFfmpegPath } from './fixtures/audio-fixtures.js';
import { makeDataDir, removeDir } from './fixtures/audio-harness.js';
import { describeOggOpus } from './fixtures/ogg-opus-reader.js';
import { descendants } from './fixtures/processes.js';
import { it } from './fixtures/timed.js';
import { deliveriesWaitOnCpu } from '../src/delivery/worker.js';

/**
 * Opus encoder processes beside deliveries: while the process says deliveries wait on its CPU, the
 * encoders and their ffmpeg are stopped most of the time (`ps` shows them `T`), and still finish the
 * note; otherwise they never stop; closing continues and ends them.
 */

describe('when conversions give way (unit)', () => {
  it('once a quarter of the slots hold notes whose audio is ready, rounded up', () => {
    const table: ReadonlyArray<[slots: number, ready: number, busy: boolean]> = [
      [8, 0, false],
      [8, 1, false],
      [8, 2, true],
      [8, 4, true],
      [64, 15, false],
      [64, 16, true],
      [6, 1, false],
      [6, 2, true],
      [1, 0, false],
      [1, 1, true],
    ];
    for (const [slots, ready, busy] of table) assert.equal(deliveriesWaitOnCpu(ready, slots), busy, `${ready} ready of ${slots} slots`);
  });
});

describe('Opus encoder processes giving way to deliveries', { skip: process.platform !== 'linux' }, () => {
  let dir: string;
  let ffmpegPath: string;
  let source: string;

  before(async () => {
    ffmpegPath = await testFfmpegPath();
    dir = await makeDataDir('give-way');
    source = join(dir, 'speech.wav');
    await ffmpeg(ffmpegPath, ['-f', 'lavfi', '-i', SPEECH_LIKE_FILTER(20, 48000), '-ac', '1', source]);
  });

  after(async () => {
    await removeDir(dir);
  });

  const encodeWhile = async (busy: () => boolean, out: string) => {
    const encoders = new EncoderProcesses({ module: OPUS_BINDING, name: 'test', processes: 1, niceness: 10, busy });
    const states = new Set<string>();
    let watching = true;
    const watch = (async () => {
      while (watching) {
        for (const p of await descendants()) if (p.comm.startsWith('voicenote-enc') || p.comm.startsWith('ffmpeg')) states.add(p.state);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    try {
      const args = ['-nostdin', '-v', 'error', '-i', source, '-ac', '1', '-ar', '48000', '-c:a', 'pcm_s16le', '-f', 's16le', 'pipe:1'];
      const reply = await encoders.encode({ ffmpegPath, args, withWave: false, timeoutMs: 120_000, profile: 'ogg_opus', kbps: 32, outputPath: out });
      return { reply, states };
    } finally {
      watching = false;
      await watch;
      await encoders.close();
    }
  };

  it('never stops them while no deliveries wait', { timeout: 60_000 }, async () => {
    const { reply, states } = await encodeWhile(() => false, join(dir, 'free.ogg'));
    assert.equal(reply.exitCode, 0, reply.stderr);
    assert.ok(!states.has('T'), `states seen: ${[...states].join(' ')}`);
    const note = describeOggOpus(await readFile(join(dir, 'free.ogg')));
    assert.ok(Math.abs(Number(note.lastGranule - BigInt(note.preSkip)) / 48000 - 20) < 0.01, 'plays 20 s');
  });

  it('stops them most of the time while deliveries wait, and the note still comes out whole', { timeout: 120_000 }, async () => {
    await encodeWhile(() => false, join(dir, 'free-again.ogg'));
    const { reply, states } = await encodeWhile(() => true, join(dir, 'held.ogg'));
    assert.equal(reply.exitCode, 0, reply.stderr);
    assert.ok(states.has('T'), `states seen: ${[...states].join(' ')}`);
    const held = await readFile(join(dir, 'held.ogg'));
    assert.deepEqual(held, await readFile(join(dir, 'free-again.ogg')), 'the same note, byte for byte');
    // Closed: nothing of ours is left, stopped or not.
    assert.deepEqual((await descendants()).filter((p) => p.comm.startsWith('voicenote-enc') || p.comm.startsWith('ffmpeg')), []);
  });
});
