import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { getPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { createAudioPipeline } from '../src/audio/index.js';
import { conversionSlotsFor } from '../src/delivery/claim.js';
import { audioTargetFor } from '../src/platforms/registry.js';
import { startAudioServer } from './fakes/audio-server.js';
import { sharedFixtures, testFfmpegPath, type FixtureName } from './fixtures/audio-fixtures.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';

/**
 * Conversions do not starve deliveries: notes whose audio needs converting hold only a few of a
 * worker's slots (the rest are claimed by notes whose audio is ready), and ffmpeg runs at a lower
 * priority than the worker, so that on a busy machine deliveries get the CPU first.
 */

after(async () => {
  await closeSharedAudio();
});

const DISTINCT: FixtureName[] = ['tone.mp3', 'tone.m4a', 'tone.aac', 'tone.wav', 'tone.flac', 'tone-vorbis.ogg'];

/** An ffmpeg that waits while `hold` exists, then runs the real one. */
async function heldFfmpeg(dir: string, hold: string): Promise<string> {
  const path = join(dir, 'held-ffmpeg.sh');
  await writeFile(path, `#!/bin/sh\nwhile [ -e '${hold}' ]; do sleep 0.05; done\nexec '${await testFfmpegPath()}' "$@"\n`);
  await chmod(path, 0o755);
  return path;
}

describe('conversion slots (unit)', () => {
  it('gives conversions twice the transcoder bound, at least a quarter of the slots, never more than all', () => {
    assert.equal(conversionSlotsFor(32, 2), 8);
    assert.equal(conversionSlotsFor(32, 8), 16);
    assert.equal(conversionSlotsFor(4, 1), 2);
    assert.equal(conversionSlotsFor(32, 32), 32);
    assert.equal(conversionSlotsFor(1, 1), 1);
  });
});

/** An app whose transcoder the test holds, one account, and its note for `t.voiceUrl` already converted. */
interface HeldTranscoder {
  t: TestApp;
  key: string;
  send(url: string): Promise<string>;
  status(id: string): Promise<string>;
  /** Holds the transcoder, sends one note per source, and waits until the two conversion slots fetched theirs. */
  convertHeld(names: readonly FixtureName[]): Promise<string[]>;
  /** Sources of those notes fetched so far. */
  fetched(): number;
  /** Lets the transcoder go on. */
  release(): Promise<void>;
}

/**
 * 4 ordinary slots, one conversion at once (2 conversion slots), `env` besides; one account sends
 * everything, and may hold every slot of both kinds (the share an account holds of each is
 * fairness.test.ts's subject).
 */
async function withHeldTranscoder(env: Record<string, string>, body: (scene: HeldTranscoder) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'voicenote-conversion-slots-'));
  const hold = join(dir, 'hold');
  const fixtures = await sharedFixtures(await testFfmpegPath());
  const t = await startTestApp({ env: { WORKER_CONCURRENCY: '4', MAX_CONCURRENT_CONVERSIONS: '1', WORKER_ACCOUNT_SHARE: '100', FFMPEG_PATH: await heldFfmpeg(dir, hold), SHUTDOWN_GRACE_MS: '0', ...env } });
  try {
    const key = (await t.createAccount()).testKey;
    const send = async (url: string): Promise<string> => {
      const res = await t.send(key, defaultSendBody('telegram', url));
      assert.equal(res.statusCode, 202, res.body);
      return res.json().id as string;
    };
    const fetched = () => t.audio.requests.filter((r) => r.path.startsWith('/distinct/')).length;
    // The worker has this note's audio ready from now on.
    assert.equal((await t.waitForStatus(key, await send(t.voiceUrl), ['delivered', 'failed'], 30_000)).status, 'delivered');
    await body({
      t,
      key,
      send,
      fetched,
      status: async (id) => (await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key })).json().status as string,
      async convertHeld(names) {
        await writeFile(hold, '');
        const ids: string[] = [];
        for (const name of names) t.audio.route(`/distinct/${name}`, { kind: 'file', path: fixtures[name] });
        for (const name of names) ids.push(await send(t.audio.url(`/distinct/${name}`)));
        for (const deadline = Date.now() + 20_000; fetched() < 2; await new Promise((r) => setTimeout(r, 20))) {
          assert.ok(Date.now() < deadline, `${fetched()} of 2 fetches`);
        }
        return ids;
      },
      release: () => rm(hold),
    });
  } finally {
    await rm(hold, { force: true });
    await t.close();
    await rm(dir, { recursive: true, force: true });
  }
}

describe(`conversions beside deliveries (${STORAGE_LABEL})`, () => {
  it('delivers a note whose audio is ready while notes that need converting wait for the transcoder, and claims no more of those than its conversion slots', { timeout: 90_000 }, async () => {
    await withHeldTranscoder({}, async ({ t, key, send, status, convertHeld, fetched, release }) => {
      const converting = await convertHeld(DISTINCT);
      // With the transcoder held, the ready note still goes out (before: the converting notes held the
      // account's three slots and it waited behind them).
      const ready = await t.waitForStatus(key, await send(t.voiceUrl), ['delivered', 'failed'], 15_000);
      assert.equal(ready.status, 'delivered');
      assert.equal(fetched(), 2, 'the other notes that need converting were left in the queue');
      const statuses = await Promise.all(converting.map(status));
      assert.equal(statuses.filter((s) => s === 'queued').length, DISTINCT.length - 2, statuses.join());
      assert.equal(statuses.filter((s) => s === 'processing').length, 2, statuses.join());

      await release();
      for (const id of converting) assert.equal((await t.waitForStatus(key, id, ['delivered', 'failed'], 30_000)).status, 'delivered');
    });
  });

  it('leaves every ordinary slot to notes whose audio is ready while converting notes hold their own', { timeout: 90_000 }, async () => {
    // Each delivery takes 5 s.
    await withHeldTranscoder({ SANDBOX_LATENCY_MS: '5000' }, async ({ t, key, send, status, convertHeld, release }) => {
      // Two notes wait for the held transcoder, in the two conversion slots.
      await convertHeld(DISTINCT.slice(0, 2));
      // Ready notes take three of the four ordinary slots at once, all in their 5 s platform call.
      // Before, the converting notes held two of the four slots: one of these waited for the others.
      const ready = await Promise.all([1, 2, 3].map(() => send(t.voiceUrl)));
      let seen: string[] = [];
      for (const deadline = Date.now() + 4_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
        seen = await Promise.all(ready.map(status));
        if (seen.every((s) => s === 'processing') || seen.some((s) => s === 'delivered')) break;
      }
      assert.deepEqual(seen, ['processing', 'processing', 'processing']);
      await release();
      for (const id of ready) assert.equal((await t.waitForStatus(key, id, ['delivered', 'failed'], 30_000)).status, 'delivered');
    });
  });

  it('runs ffmpeg 10 below the priority of the process that converts', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'voicenote-ffmpeg-nice-'));
    const seen = join(dir, 'niceness');
    const wrapper = join(dir, 'nice-ffmpeg.sh');
    // The wrapper looks once the worker has had time to lower it (right after the spawn).
    await writeFile(wrapper, `#!/bin/sh\nsleep 0.3\nnice > '${seen}'\nexec '${await testFfmpegPath()}' "$@"\n`);
    await chmod(wrapper, 0o755);
    const fixtures = await sharedFixtures(await testFfmpegPath());
    const server = await startAudioServer();
    server.route('/tone.mp3', { kind: 'file', path: fixtures['tone.mp3'] });
    const pipeline = createAudioPipeline({ dataDir: dir, ffmpegPath: wrapper, allowPrivateUrls: true });
    try {
      (await pipeline.prepare({ url: server.url('/tone.mp3'), target: audioTargetFor('telegram') })).release();
      assert.equal(Number((await readFile(seen, 'utf8')).trim()), Math.min(19, getPriority() + 10));
    } finally {
      await pipeline.close();
      await server.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
