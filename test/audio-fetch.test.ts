import assert from 'node:assert/strict';
import { audioTargetFor } from '../src/platforms/registry.js';
import { readFile } from 'node:fs/promises';
import { after, afterEach, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { createAudioPipeline, type AudioPipeline } from '../src/audio/index.js';
import { startAudioServer, type AudioServer } from './fakes/audio-server.js';
import { sharedFixtures, testFfmpegPath, type FixtureName } from './fixtures/audio-fixtures.js';
import { isAudioError, leftovers, makeDataDir, removeDir } from './fixtures/audio-harness.js';

const MiB = 1024 * 1024;

describe('fetching audio', () => {
  let server: AudioServer;
  let dataDir: string;
  let pipeline: AudioPipeline;
  let fixtures: Record<FixtureName, string>;

  before(async () => {
    const ffmpegPath = await testFfmpegPath();
    fixtures = await sharedFixtures(ffmpegPath);
    server = await startAudioServer();
    dataDir = await makeDataDir('fetch');
    pipeline = createAudioPipeline({ dataDir, ffmpegPath, allowPrivateUrls: true, fetchTimeoutMs: 800 });
    server.route('/tone.mp3', { kind: 'file', path: fixtures['tone.mp3'], contentType: 'audio/mpeg' });
    for (let i = 1; i <= 6; i++) server.route(`/hop/${i}`, { kind: 'redirect', location: i === 6 ? '/tone.mp3' : `/hop/${i + 1}` });
  });

  afterEach(async () => {
    // Every path, success or failure, must leave the temp area empty.
    assert.deepEqual(await leftovers(dataDir), []);
  });

  after(async () => {
    await pipeline.close();
    await server.close();
    await removeDir(dataDir);
  });

  it('judges the bytes, not the Content-Type: audio served as text/html converts', async () => {
    server.route('/lying.bin', { kind: 'file', path: fixtures['tone.mp3'], contentType: 'text/html; charset=utf-8', omitLength: true });
    const a = await pipeline.prepare({ url: server.url('/lying.bin'), target: audioTargetFor('whatsapp') });
    assert.equal(a.format, 'ogg_opus');
    a.release();
  });

  it('...and an HTML page served as audio/mpeg is audio_unsupported (permanent)', async () => {
    server.route('/page.mp3', { kind: 'file', path: fixtures['page.html'], contentType: 'audio/mpeg' });
    await assert.rejects(pipeline.prepare({ url: server.url('/page.mp3'), target: audioTargetFor('whatsapp') }), isAudioError('audio_unsupported', { transient: false }));
  });

  it('follows up to 5 redirects, relative or absolute, and re-checks each hop', async () => {
    server.route('/abs', { kind: 'redirect', location: server.url('/hop/3'), status: 301 });
    const a = await pipeline.prepare({ url: server.url('/abs'), target: audioTargetFor('linkedin') }); // /abs, /hop/3..6: 5 redirects
    assert.equal(a.format, 'm4a_aac');
    a.release();
  });

  it('gives up after a sixth redirect and on loops (audio_fetch_failed, permanent)', async () => {
    await assert.rejects(pipeline.prepare({ url: server.url('/hop/1'), target: audioTargetFor('whatsapp') }), isAudioError('audio_fetch_failed', { transient: false, message: /more than 5/ }));
    server.route('/loop-a', { kind: 'redirect', location: '/loop-b', status: 307 });
    server.route('/loop-b', { kind: 'redirect', location: '/loop-a', status: 308 });
    const before = server.requests.length;
    await assert.rejects(pipeline.prepare({ url: server.url('/loop-a'), target: audioTargetFor('whatsapp') }), isAudioError('audio_fetch_failed', { transient: false }));
    assert.equal(server.requests.length - before, 6, 'the first request plus 5 followed redirects');
  });

  it('refuses redirects without a Location or to other schemes', async () => {
    server.route('/no-location', { kind: 'status', status: 302 });
    server.route('/to-file', { kind: 'redirect', location: 'file:///etc/passwd' });
    server.route('/to-ftp', { kind: 'redirect', location: 'ftp://example.com/a.mp3' });
    await assert.rejects(pipeline.prepare({ url: server.url('/no-location'), target: audioTargetFor('whatsapp') }), isAudioError('audio_fetch_failed', { message: /302/ }));
    await assert.rejects(pipeline.prepare({ url: server.url('/to-file'), target: audioTargetFor('whatsapp') }), isAudioError('audio_fetch_failed', { transient: false }));
    await assert.rejects(pipeline.prepare({ url: server.url('/to-ftp'), target: audioTargetFor('whatsapp') }), isAudioError('audio_fetch_failed', { transient: false }));
  });

  for (const [status, transient] of [[400, false], [401, false], [403, false], [404, false], [410, false], [429, true], [500, true], [502, true], [503, true], [504, true]] as const) {
    it(`HTTP ${status} is audio_fetch_failed with the status in the message, transient=${transient}`, async () => {
      server.route(`/status/${status}`, { kind: 'status', status, body: 'nope' });
      await assert.rejects(
        pipeline.prepare({ url: server.url(`/status/${status}`), target: audioTargetFor('telegram') }),
        isAudioError('audio_fetch_failed', { transient, message: new RegExp(`HTTP ${status}`) }),
      );
    });
  }

  it('an unreachable host is audio_fetch_failed and transient', async () => {
    const gone = await startAudioServer();
    const url = gone.url('/x.mp3');
    await gone.close();
    await assert.rejects(pipeline.prepare({ url, target: audioTargetFor('whatsapp') }), isAudioError('audio_fetch_failed', { transient: true, message: /ECONNREFUSED/ }));
  });

  it('a host that stalls before or during the body times out (transient), within the total timeout', async () => {
    server.route('/stall-headers', { kind: 'stall', beforeHeaders: true });
    server.route('/stall-body', { kind: 'stall', afterBytes: 4096 });
    for (const path of ['/stall-headers', '/stall-body']) {
      const started = performance.now();
      await assert.rejects(pipeline.prepare({ url: server.url(path), target: audioTargetFor('whatsapp') }), isAudioError('audio_fetch_failed', { transient: true, message: /timed out/ }));
      const took = performance.now() - started;
      assert.ok(took >= 700 && took < 3000, `${path} gave up after ${took} ms`);
    }
  });

  it('the timeout covers the whole chain, not each hop', async () => {
    server.route('/slow-chain', { kind: 'redirect', location: '/stall-body' });
    const started = performance.now();
    await assert.rejects(pipeline.prepare({ url: server.url('/slow-chain'), target: audioTargetFor('whatsapp') }), isAudioError('audio_fetch_failed', { transient: true }));
    assert.ok(performance.now() - started < 3000);
  });

  it('stops a body over 50 MiB at the limit, declared or not (audio_too_large, permanent)', async () => {
    const big = createAudioPipeline({ dataDir, ffmpegPath: await testFfmpegPath(), allowPrivateUrls: true });
    try {
      server.route('/huge-declared', { kind: 'stream', totalBytes: 51 * MiB, declareLength: true });
      server.route('/huge-chunked', { kind: 'stream', totalBytes: 200 * MiB, declareLength: false });
      server.route('/huge-lying-length', { kind: 'stream', totalBytes: 50 * MiB + 1, declareLength: false });
      for (const path of ['/huge-declared', '/huge-chunked', '/huge-lying-length']) {
        await assert.rejects(big.prepare({ url: server.url(path), target: audioTargetFor('telegram') }), isAudioError('audio_too_large', { transient: false }), path);
      }
    } finally {
      await big.close();
    }
  });

  it('accepts a body of exactly the limit (it is judged on its bytes afterwards)', async () => {
    const small = createAudioPipeline({ dataDir, ffmpegPath: await testFfmpegPath(), allowPrivateUrls: true, maxSourceBytes: (await readFile(fixtures['tone.wav'])).length });
    try {
      server.route('/tone.wav', { kind: 'file', path: fixtures['tone.wav'], omitLength: true });
      const ok = await small.prepare({ url: server.url('/tone.wav'), target: audioTargetFor('whatsapp') });
      ok.release();
      server.route('/one-more', { kind: 'stream', totalBytes: (await readFile(fixtures['tone.wav'])).length + 1, declareLength: false });
      await assert.rejects(small.prepare({ url: server.url('/one-more'), target: audioTargetFor('whatsapp') }), isAudioError('audio_too_large'));
    } finally {
      await small.close();
    }
  });

  it('an empty body is audio_unsupported', async () => {
    server.route('/empty', { kind: 'bytes', body: '', contentType: 'audio/mpeg' });
    await assert.rejects(pipeline.prepare({ url: server.url('/empty'), target: audioTargetFor('whatsapp') }), isAudioError('audio_unsupported', { message: /empty/ }));
  });
});
