import assert from 'node:assert/strict';
import { audioTargetFor } from '../src/platforms/registry.js';
import { chmod, readdir, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { AudioError, createAudioPipeline, type AudioPipeline, type PreparedAudio } from '../src/audio/index.js';
import { startAudioServer, type AudioServer } from './fakes/audio-server.js';
import { sharedFixtures, testFfmpegPath, type FixtureName } from './fixtures/audio-fixtures.js';
import { countingFfmpeg, isAudioError, leftovers, makeDataDir, removeDir } from './fixtures/audio-harness.js';

const exists = async (path: string): Promise<boolean> => (await stat(path).catch(() => null)) !== null;

describe('audio cache and concurrency', () => {
  let server: AudioServer;
  let ffmpegPath: string;
  let fixtures: Record<FixtureName, string>;
  const dirs: string[] = [];
  const pipelines: AudioPipeline[] = [];

  async function freshDir(label: string): Promise<string> {
    const d = await makeDataDir(label);
    dirs.push(d);
    return d;
  }

  function track(p: AudioPipeline): AudioPipeline {
    pipelines.push(p);
    return p;
  }

  before(async () => {
    ffmpegPath = await testFfmpegPath();
    fixtures = await sharedFixtures(ffmpegPath);
    server = await startAudioServer();
    for (const [name, path] of Object.entries(fixtures)) server.route(`/${name}`, { kind: 'file', path });
    server.route('/same-bytes-other-url.mp3', { kind: 'file', path: fixtures['tone.mp3'] });
  });

  after(async () => {
    for (const p of pipelines) await p.close();
    await server.close();
    for (const d of dirs) await removeDir(d);
  });

  it('a second prepare of the same audio is a cache hit that runs no ffmpeg at all', async () => {
    const dataDir = await freshDir('hit');
    const ff = await countingFfmpeg(ffmpegPath, dataDir);
    const p = track(createAudioPipeline({ dataDir, ffmpegPath: ff.path, allowPrivateUrls: true }));
    const first = await p.prepare({ url: server.url('/tone.flac'), target: audioTargetFor('whatsapp') });
    assert.equal(first.cacheHit, false);
    const callsAfterFirst = (await ff.calls()).length;
    assert.equal(await ff.encodes(), 1);
    const before = await stat(first.path);
    first.release();

    const second = await p.prepare({ url: server.url('/tone.flac'), target: audioTargetFor('whatsapp') });
    assert.equal(second.cacheHit, true);
    assert.equal(second.path, first.path);
    assert.equal(second.durationSeconds, first.durationSeconds);
    assert.deepEqual(second.waveform, first.waveform);
    assert.equal(second.sourceSha256, first.sourceSha256);
    const afterHit = await stat(second.path);
    assert.equal(afterHit.ino, before.ino, 'same file, not replaced');
    assert.ok(Math.abs(afterHit.mtimeMs - before.mtimeMs) < 1, 'file not rewritten');
    assert.equal((await ff.calls()).length, callsAfterFirst, 'no ffmpeg process started');
    second.release();

    // The cache is keyed by content, not URL: the same bytes elsewhere are a hit too.
    const mp3 = await p.prepare({ url: server.url('/tone.mp3'), target: audioTargetFor('whatsapp') });
    mp3.release();
    const sameBytes = await p.prepare({ url: server.url('/same-bytes-other-url.mp3'), target: audioTargetFor('whatsapp') });
    assert.equal(sameBytes.cacheHit, true);
    sameBytes.release();
    // ...and per platform profile: LinkedIn needs its own conversion, and so does Telegram, whose
    // Ogg Opus is not WhatsApp's.
    const li = await p.prepare({ url: server.url('/tone.flac'), target: audioTargetFor('linkedin') });
    assert.equal(li.cacheHit, false);
    li.release();
    const tg = await p.prepare({ url: server.url('/tone.flac'), target: audioTargetFor('telegram') });
    assert.equal(tg.cacheHit, false);
    assert.notEqual(tg.path, first.path);
    tg.release();
    assert.equal(await ff.encodes(), 4);
  });

  it('stores the converted file next to a JSON record, written atomically', async () => {
    const dataDir = await freshDir('layout');
    const p = track(createAudioPipeline({ dataDir, ffmpegPath, allowPrivateUrls: true }));
    const a = await p.prepare({ url: server.url('/tone.wav'), target: audioTargetFor('whatsapp') });
    a.release();
    const names = (await readdir(join(dataDir, 'audio-cache'))).sort();
    assert.deepEqual(names, [`${a.sourceSha256}.ogg_opus_ptt.json`, `${a.sourceSha256}.ogg_opus_ptt.ogg`]);
    const meta = JSON.parse(await readFile(join(dataDir, 'audio-cache', `${a.sourceSha256}.ogg_opus_ptt.json`), 'utf8')) as Record<string, unknown>;
    assert.equal(meta.version, 2);
    assert.equal(meta.profile, 'ogg_opus_ptt');
    assert.equal(meta.format, 'ogg_opus');
    assert.equal(meta.sizeBytes, a.sizeBytes);
    assert.equal(meta.durationSeconds, a.durationSeconds);
    assert.deepEqual(meta.waveform, [...a.waveform]);
    assert.deepEqual(await leftovers(dataDir), []);
  });

  it('concurrent prepares of the same audio share one conversion', async () => {
    const dataDir = await freshDir('concurrent');
    const ff = await countingFfmpeg(ffmpegPath, dataDir);
    const p = track(createAudioPipeline({ dataDir, ffmpegPath: ff.path, allowPrivateUrls: true }));
    const jobs: Array<Promise<PreparedAudio>> = [];
    for (let i = 0; i < 40; i++) {
      const url = server.url(i % 2 === 0 ? '/tone.mp3' : '/same-bytes-other-url.mp3');
      jobs.push(p.prepare({ url, target: audioTargetFor(i % 3 === 0 ? 'telegram' : 'whatsapp') }));
    }
    for (let i = 0; i < 10; i++) jobs.push(p.prepare({ url: server.url('/tone.mp3'), target: audioTargetFor('linkedin') }));
    const done = await Promise.all(jobs);
    assert.equal(await ff.encodes(), 3, 'one conversion per platform profile');
    assert.equal((await ff.calls()).length, 3, 'and no other ffmpeg run');
    assert.equal(new Set(done.slice(0, 40).map((d) => d.path)).size, 2);
    assert.equal(new Set(done.slice(40).map((d) => d.path)).size, 1);
    for (const d of done) d.release();
    assert.deepEqual(await leftovers(dataDir), []);
  });

  it('concurrent prepares that fail all get the failure, and clean up', async () => {
    const dataDir = await freshDir('concurrent-fail');
    const p = track(createAudioPipeline({ dataDir, ffmpegPath, allowPrivateUrls: true }));
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => p.prepare({ url: server.url('/truncated.mp3'), target: audioTargetFor('whatsapp') })));
    for (const r of results) {
      assert.equal(r.status, 'rejected');
      assert.ok(isAudioError('audio_unsupported')(r.reason));
    }
    // LinkedIn requests for a 75 s file fail their own limit; WhatsApp ones still get the conversion.
    const mixed = await Promise.allSettled([
      p.prepare({ url: server.url('/long-75s.mp3'), target: audioTargetFor('linkedin') }),
      p.prepare({ url: server.url('/long-75s.mp3'), target: audioTargetFor('linkedin') }),
    ]);
    assert.ok(mixed.every((r) => r.status === 'rejected' && isAudioError('audio_too_long')(r.reason)));
    assert.deepEqual(await leftovers(dataDir), []);
  });

  it('evicts the least recently used entries beyond cacheMaxBytes, never a pinned one', async () => {
    const dataDir = await freshDir('lru');
    // Each 3 s Telegram voice note is ~12-13 KB (libopus at complexity 5): room for two, not three.
    const p = track(createAudioPipeline({ dataDir, ffmpegPath, allowPrivateUrls: true, cacheMaxBytes: 30_000 }));
    const get = async (name: string): Promise<PreparedAudio> => p.prepare({ url: server.url(`/${name}`), target: audioTargetFor('telegram') });
    const a = await get('tone.mp3');
    a.release();
    const b = await get('tone.wav');
    b.release();
    const aAgain = await get('tone.mp3'); // A is now more recent than B
    assert.equal(aAgain.cacheHit, true);
    aAgain.release();
    const c = await get('tone.flac');
    c.release();
    await sleep(50);
    assert.equal(await exists(b.path), false, 'B, least recently used, was evicted');
    assert.equal(await exists(a.path), true);
    assert.equal(await exists(c.path), true);
    const bAgain = await get('tone.wav');
    assert.equal(bAgain.cacheHit, false, 'an evicted entry is converted again');
    bAgain.release();

    // Pinned: held while far more than the limit passes through.
    const tiny = track(createAudioPipeline({ dataDir: await freshDir('lru-pin'), ffmpegPath, allowPrivateUrls: true, cacheMaxBytes: 20_000 }));
    const tget = async (name: string): Promise<PreparedAudio> => tiny.prepare({ url: server.url(`/${name}`), target: audioTargetFor('telegram') });
    const held = await tget('tone.m4a');
    for (const name of ['tone.aac', 'tone-vorbis.ogg', 'tone.webm']) (await tget(name)).release();
    await sleep(50);
    assert.equal(await exists(held.path), true, 'pinned entry survived');
    assert.deepEqual(await readFile(held.path).then((b) => b.length), held.sizeBytes);
    held.release();
    held.release(); // idempotent
    const next = await tget('tone.flac');
    next.release();
    await sleep(50);
    assert.equal(await exists(held.path), false, 'released entry became evictable');
    const files = await readdir(join(dirs.at(-1) as string, 'audio-cache'));
    assert.deepEqual(files.filter((f) => f.endsWith('.ogg')).length, 1);
  });

  it('records of the older cache version are never used, and are swept', async () => {
    const dataDir = await freshDir('version');
    const first = createAudioPipeline({ dataDir, ffmpegPath, allowPrivateUrls: true });
    const a = await first.prepare({ url: server.url('/tone.mp3'), target: audioTargetFor('telegram') });
    a.release();
    const b = await first.prepare({ url: server.url('/tone.wav'), target: audioTargetFor('telegram') });
    b.release();
    await first.close();
    // Rewrite both records as version 1 wrote them (no profile; one Ogg Opus for Telegram and WhatsApp).
    const cacheDir = join(dataDir, 'audio-cache');
    const old = new Date(Date.now() - 60 * 60 * 1000);
    for (const sha of [a.sourceSha256, b.sourceSha256]) {
      const metaPath = join(cacheDir, `${sha}.ogg_opus.json`);
      const { profile: _profile, ...meta } = JSON.parse(await readFile(metaPath, 'utf8')) as Record<string, unknown>;
      await writeFile(metaPath, JSON.stringify({ ...meta, version: 1 }));
      await utimes(metaPath, old, old);
      await utimes(join(cacheDir, `${sha}.ogg_opus.ogg`), old, old);
    }
    const second = track(createAudioPipeline({ dataDir, ffmpegPath, allowPrivateUrls: true }));
    const again = await second.prepare({ url: server.url('/tone.mp3'), target: audioTargetFor('telegram') });
    assert.equal(again.cacheHit, false, 'a version 1 record is converted again');
    again.release();
    assert.equal(await exists(join(cacheDir, `${b.sourceSha256}.ogg_opus.json`)), false, 'swept at start-up');
    assert.equal(await exists(join(cacheDir, `${b.sourceSha256}.ogg_opus.ogg`)), false);
  });

  it('survives a restart: the cache is rescanned, stale debris removed, bad records ignored', async () => {
    const dataDir = await freshDir('restart');
    const first = createAudioPipeline({ dataDir, ffmpegPath, allowPrivateUrls: true });
    const a = await first.prepare({ url: server.url('/tone.mp3'), target: audioTargetFor('linkedin') });
    a.release();
    const b = await first.prepare({ url: server.url('/tone.wav'), target: audioTargetFor('linkedin') });
    b.release();
    await first.close();

    const cacheDir = join(dataDir, 'audio-cache');
    await writeFile(join(cacheDir, `${b.sourceSha256}.m4a_aac.json`), '{"not":"valid"');
    const old = new Date(Date.now() - 60 * 60 * 1000);
    await writeFile(join(cacheDir, '.tmp-crashed-write'), 'x');
    await utimes(join(cacheDir, '.tmp-crashed-write'), old, old);
    await writeFile(join(dataDir, 'tmp', 'audio', 'dl-crashed-download'), 'x');
    await utimes(join(dataDir, 'tmp', 'audio', 'dl-crashed-download'), old, old);

    const ff = await countingFfmpeg(ffmpegPath, dataDir);
    const second = track(createAudioPipeline({ dataDir, ffmpegPath: ff.path, allowPrivateUrls: true }));
    const again = await second.prepare({ url: server.url('/tone.mp3'), target: audioTargetFor('linkedin') });
    assert.equal(again.cacheHit, true);
    assert.equal(again.path, a.path);
    again.release();
    assert.equal((await ff.calls()).length, 0);
    const rebuilt = await second.prepare({ url: server.url('/tone.wav'), target: audioTargetFor('linkedin') });
    assert.equal(rebuilt.cacheHit, false, 'a damaged record is not trusted');
    rebuilt.release();
    assert.deepEqual(await leftovers(dataDir), []);
  });

  it('one URL asked for by 200 recipients at once is downloaded once and converted once', async () => {
    const dataDir = await freshDir('url-once');
    const ff = await countingFfmpeg(ffmpegPath, dataDir);
    server.route('/broadcast.mp3', { kind: 'file', path: fixtures['tone.mp3'] });
    const p = track(createAudioPipeline({ dataDir, ffmpegPath: ff.path, allowPrivateUrls: true }));
    const downloads = () => server.requests.filter((r) => r.path === '/broadcast.mp3').length;
    const prepared = await Promise.all(Array.from({ length: 200 }, () => p.prepare({ url: server.url('/broadcast.mp3'), target: audioTargetFor('whatsapp') })));
    assert.equal(downloads(), 1);
    assert.equal(await ff.encodes(), 1);
    assert.equal(new Set(prepared.map((a) => a.path)).size, 1);
    for (const a of prepared) a.release();
    // Later requests within the freshness window are served from the cache too.
    (await p.prepare({ url: server.url('/broadcast.mp3'), target: audioTargetFor('whatsapp') })).release();
    assert.equal(downloads(), 1);
    // Another platform's format is a conversion of its own, from a new download.
    (await p.prepare({ url: server.url('/broadcast.mp3'), target: audioTargetFor('linkedin') })).release();
    assert.equal(downloads(), 2);
    assert.deepEqual(await leftovers(dataDir), []);
  });

  it('with urlFreshMs 0 every request downloads the URL again (and still converts once)', async () => {
    const dataDir = await freshDir('url-fresh-0');
    server.route('/every-time.mp3', { kind: 'file', path: fixtures['tone.mp3'] });
    const p = track(createAudioPipeline({ dataDir, ffmpegPath, allowPrivateUrls: true, urlFreshMs: 0 }));
    for (let i = 0; i < 3; i++) (await p.prepare({ url: server.url('/every-time.mp3'), target: audioTargetFor('whatsapp') })).release();
    assert.equal(server.requests.filter((r) => r.path === '/every-time.mp3').length, 3);
  });

  it('kills ffmpeg after its timeout (audio_unsupported) and leaves nothing behind', async () => {
    const dataDir = await freshDir('ff-timeout');
    const sleeper = join(dataDir, 'sleepy-ffmpeg.sh');
    await writeFile(sleeper, '#!/bin/sh\nexec sleep 30\n');
    await chmod(sleeper, 0o755);
    const p = track(createAudioPipeline({ dataDir, ffmpegPath: sleeper, allowPrivateUrls: true }, { ffmpegTimeoutMs: 300 }));
    const started = performance.now();
    await assert.rejects(p.prepare({ url: server.url('/tone.mp3'), target: audioTargetFor('whatsapp') }), isAudioError('audio_unsupported', { message: /too long/ }));
    assert.ok(performance.now() - started < 5000);
    assert.deepEqual(await leftovers(dataDir), []);
  });

  it('close() kills running ffmpeg and fails the jobs still in progress', async () => {
    const dataDir = await freshDir('close');
    const marker = join(dataDir, 'started');
    const sleeper = join(dataDir, 'sleepy-ffmpeg.sh');
    await writeFile(sleeper, `#!/bin/sh\ntouch '${marker}'\nexec sleep 30\n`);
    await chmod(sleeper, 0o755);
    const p = createAudioPipeline({ dataDir, ffmpegPath: sleeper, allowPrivateUrls: true });
    const job = p.prepare({ url: server.url('/tone.mp3'), target: audioTargetFor('whatsapp') });
    job.catch(() => undefined);
    while (!(await exists(marker))) await sleep(20);
    const started = performance.now();
    await p.close();
    assert.ok(performance.now() - started < 3000, 'close did not wait 30 s for ffmpeg');
    await assert.rejects(job, (err: unknown) => err instanceof Error && !(err instanceof AudioError) && /closed/.test(err.message));
    await assert.rejects(p.prepare({ url: server.url('/tone.mp3'), target: audioTargetFor('whatsapp') }), /closed/);
    assert.deepEqual(await leftovers(dataDir), []);
  });

  it('runs at most maxConcurrentConversions ffmpeg processes at once', async () => {
    const dataDir = await freshDir('semaphore');
    const log = join(dataDir, 'runs.log');
    const wrapper = join(dataDir, 'logging-ffmpeg.sh');
    await writeFile(wrapper, `#!/bin/sh\necho start >> '${log}'\n'${ffmpegPath}' "$@"\nrc=$?\necho end >> '${log}'\nexit $rc\n`);
    await chmod(wrapper, 0o755);
    await writeFile(log, '');
    const names = ['tone.mp3', 'tone.m4a', 'tone.aac', 'tone.wav', 'tone.flac', 'tone-vorbis.ogg'];
    const maxRunning = async (limit: number): Promise<number> => {
      await writeFile(log, '');
      const p = track(createAudioPipeline({ dataDir: await freshDir(`sem-${limit}`), ffmpegPath: wrapper, allowPrivateUrls: true, maxConcurrentConversions: limit }));
      const done = await Promise.all(names.map((n) => p.prepare({ url: server.url(`/${n}`), target: audioTargetFor('linkedin') })));
      for (const d of done) d.release();
      let running = 0;
      let peak = 0;
      for (const line of (await readFile(log, 'utf8')).split('\n')) {
        if (line === 'start') peak = Math.max(peak, ++running);
        if (line === 'end') running--;
      }
      return peak;
    };
    assert.equal(await maxRunning(1), 1);
    const two = await maxRunning(2);
    assert.ok(two <= 2 && two >= 1, `peak ${two}`);
  });
});
