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
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp } from './fixtures/app-harness.js';

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

describe(`conversions beside deliveries (${STORAGE_LABEL})`, () => {
  it('delivers a note whose audio is ready while notes that need converting wait for the transcoder, and claims no more of those than its conversion slots', { timeout: 90_000 }, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'voicenote-conversion-slots-'));
    const hold = join(dir, 'hold');
    const fixtures = await sharedFixtures(await testFfmpegPath());
    // 4 slots, one conversion at once: 2 conversion slots. One account sends everything (its share: 3 slots).
    const t = await startTestApp({ env: { WORKER_CONCURRENCY: '4', MAX_CONCURRENT_CONVERSIONS: '1', FFMPEG_PATH: await heldFfmpeg(dir, hold), SHUTDOWN_GRACE_MS: '0' } });
    try {
      const a = await t.createAccount();
      const send = async (url: string): Promise<string> => {
        const res = await t.send(a.testKey, defaultSendBody('telegram', url));
        assert.equal(res.statusCode, 202, res.body);
        return res.json().id as string;
      };
      // The worker has this note's audio ready from now on.
      assert.equal((await t.waitForStatus(a.testKey, await send(t.voiceUrl), ['delivered', 'failed'])).status, 'delivered');

      await writeFile(hold, '');
      for (const name of DISTINCT) t.audio.route(`/distinct/${name}`, { kind: 'file', path: fixtures[name] });
      const converting: string[] = [];
      for (const name of DISTINCT) converting.push(await send(t.audio.url(`/distinct/${name}`)));
      const fetched = () => t.audio.requests.filter((r) => r.path.startsWith('/distinct/')).length;
      const deadline = Date.now() + 20_000;
      while (fetched() < 2) {
        assert.ok(Date.now() < deadline, `${fetched()} of 2 fetches`);
        await new Promise((r) => setTimeout(r, 20));
      }

      // With the transcoder held, the ready note still goes out (before: the converting notes held the
      // account's three slots and it waited behind them).
      const ready = await t.waitForStatus(a.testKey, await send(t.voiceUrl), ['delivered', 'failed'], 15_000);
      assert.equal(ready.status, 'delivered');
      assert.equal(fetched(), 2, 'the other notes that need converting were left in the queue');
      const statuses = await Promise.all(converting.map(async (id) => (await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: a.testKey })).json().status as string));
      assert.equal(statuses.filter((s) => s === 'queued').length, DISTINCT.length - 2, statuses.join());
      assert.equal(statuses.filter((s) => s === 'processing').length, 2, statuses.join());

      await rm(hold);
      for (const id of converting) assert.equal((await t.waitForStatus(a.testKey, id, ['delivered', 'failed'], 30_000)).status, 'delivered');
    } finally {
      await rm(hold, { force: true });
      await t.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('leaves every ordinary slot to notes whose audio is ready while converting notes hold their own', { timeout: 90_000 }, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'voicenote-conversion-slots-'));
    const hold = join(dir, 'hold');
    const fixtures = await sharedFixtures(await testFfmpegPath());
    // 4 ordinary slots, one conversion at once: 2 conversion slots beside them. Each delivery takes 5 s.
    // One account sends everything.
    const t = await startTestApp({ env: { WORKER_CONCURRENCY: '4', MAX_CONCURRENT_CONVERSIONS: '1', SANDBOX_LATENCY_MS: '5000', FFMPEG_PATH: await heldFfmpeg(dir, hold), SHUTDOWN_GRACE_MS: '0' } });
    try {
      const a = await t.createAccount();
      const send = async (url: string): Promise<string> => {
        const res = await t.send(a.testKey, defaultSendBody('telegram', url));
        assert.equal(res.statusCode, 202, res.body);
        return res.json().id as string;
      };
      const status = async (id: string): Promise<string> => (await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: a.testKey })).json().status as string;
      // The worker has this note's audio ready from now on.
      assert.equal((await t.waitForStatus(a.testKey, await send(t.voiceUrl), ['delivered', 'failed'], 30_000)).status, 'delivered');

      // Two notes wait for the held transcoder, in the two conversion slots.
      await writeFile(hold, '');
      for (const name of DISTINCT.slice(0, 2)) t.audio.route(`/distinct/${name}`, { kind: 'file', path: fixtures[name] });
      for (const name of DISTINCT.slice(0, 2)) await send(t.audio.url(`/distinct/${name}`));
      const fetched = () => t.audio.requests.filter((r) => r.path.startsWith('/distinct/')).length;
      for (const deadline = Date.now() + 20_000; fetched() < 2; await new Promise((r) => setTimeout(r, 20))) {
        assert.ok(Date.now() < deadline, `${fetched()} of 2 fetches`);
      }

      // Ready notes take the account's whole share of the ordinary slots (3 of 4) at once, all in their
      // 5 s platform call. Before, the converting notes held two of the four slots and counted in that
      // share: one of these went at a time.
      const ready = await Promise.all([1, 2, 3].map(() => send(t.voiceUrl)));
      let seen: string[] = [];
      for (const deadline = Date.now() + 4_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
        seen = await Promise.all(ready.map(status));
        if (seen.every((s) => s === 'processing') || seen.some((s) => s === 'delivered')) break;
      }
      assert.deepEqual(seen, ['processing', 'processing', 'processing']);
      await rm(hold);
      for (const id of ready) assert.equal((await t.waitForStatus(a.testKey, id, ['delivered', 'failed'], 30_000)).status, 'delivered');
    } finally {
      await rm(hold, { force: true });
      await t.close();
      await rm(dir, { recursive: true, force: true });
    }
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
