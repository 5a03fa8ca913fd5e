import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { checkAudioUrl, resolveFfmpegPath } from '../src/audio/index.js';
import { forbiddenAddressReason } from '../src/audio/ip-ranges.js';
import { WaveformAccumulator } from '../src/audio/waveform.js';
import { parseInputStreams } from '../src/audio/probe.js';
import { audioTargetFor } from '../src/platforms/registry.js';

const MiB = 1024 * 1024;

describe('audioTargetFor', () => {
  it('gives each platform its voice-note format and limits', () => {
    assert.deepEqual(audioTargetFor('whatsapp'), { format: 'ogg_opus', profile: 'ogg_opus_ptt', mimeType: 'audio/ogg; codecs=opus', fileName: 'voice.ogg', maxBytes: 16 * MiB, maxDurationSeconds: null });
    assert.deepEqual(audioTargetFor('telegram'), { format: 'ogg_opus', profile: 'ogg_opus', mimeType: 'audio/ogg; codecs=opus', fileName: 'voice.ogg', maxBytes: 50 * MiB, maxDurationSeconds: null });
    assert.deepEqual(audioTargetFor('linkedin'), { format: 'm4a_aac', profile: 'm4a_aac', mimeType: 'audio/mp4', fileName: 'voice.m4a', maxBytes: 10 * MiB, maxDurationSeconds: 60 });
  });
  it('returns a copy callers cannot use to change the table', () => {
    audioTargetFor('linkedin').maxBytes = 1;
    assert.equal(audioTargetFor('linkedin').maxBytes, 10 * MiB);
  });
});

describe('checkAudioUrl', () => {
  const strict = { allowPrivate: false };
  const lax = { allowPrivate: true };

  it('accepts public http and https URLs', () => {
    assert.equal(checkAudioUrl('https://cdn.example.com/a/voice.mp3?sig=1', strict), null);
    assert.equal(checkAudioUrl('http://8.8.8.8/x.ogg', strict), null);
    assert.equal(checkAudioUrl('http://[2606:4700:4700::1111]/x.ogg', strict), null);
  });

  it('refuses other schemes, garbage, missing hosts and over-long URLs even when private is allowed', () => {
    for (const url of ['ftp://example.com/a.mp3', 'file:///etc/passwd', 'data:audio/mp3;base64,AAAA', 'gopher://x/', 'not a url', '', 'http://', 'javascript:alert(1)']) {
      assert.notEqual(checkAudioUrl(url, lax), null, url);
    }
    const long = `https://example.com/${'a'.repeat(2049 - 'https://example.com/'.length)}`;
    assert.equal(long.length, 2049);
    assert.match(checkAudioUrl(long, lax) ?? '', /2048/);
    assert.equal(checkAudioUrl(long.slice(0, 2048), lax), null);
  });

  const tricks = [
    'http://127.0.0.1/', 'http://127.1/', 'http://0x7f.1/', 'http://0x7f000001/', 'http://2130706433/', 'http://017700000001/',
    'http://0177.0.0.1/', 'http://[::1]/', 'http://[0:0:0:0:0:0:0:1]/', 'http://[::ffff:127.0.0.1]/', 'http://[::ffff:7f00:1]/',
    'http://[::127.0.0.1]/', 'http://0.0.0.0/', 'http://0/', 'http://[::]/', 'http://10.1.2.3/', 'http://172.16.0.1/', 'http://172.31.255.255/',
    'http://192.168.1.1/', 'http://169.254.169.254/latest/meta-data/', 'http://100.64.0.1/', 'http://100.127.255.254/', 'http://224.0.0.1/',
    'http://239.255.255.250/', 'http://255.255.255.255/', 'http://240.0.0.1/', 'http://198.18.0.1/', 'http://[fc00::1]/', 'http://[fd12:3456::1]/',
    'http://[fe80::1]/', 'http://[ff02::1]/', 'http://[64:ff9b::10.0.0.1]/', 'http://[64:ff9b::127.0.0.1]/', 'http://[2002:7f00:1::]/',
    'http://[::ffff:169.254.169.254]/', 'http://[::ffff:8.8.8.8]/', 'http://localhost/', 'http://LOCALHOST./', 'http://foo.localhost/',
    'http://%31%32%37.0.0.1/', 'https://127.0.0.1:8443/x.mp3',
  ];
  for (const url of tricks) {
    it(`refuses ${url} unless private URLs are allowed`, () => {
      assert.notEqual(checkAudioUrl(url, strict), null);
      assert.equal(checkAudioUrl(url, lax), null);
    });
  }
});

describe('forbiddenAddressReason', () => {
  it('lets public unicast through', () => {
    for (const ip of ['8.8.8.8', '1.1.1.1', '93.184.216.34', '100.63.255.255', '100.128.0.0', '172.15.255.255', '172.32.0.0', '2606:4700:4700::1111', '2a00:1450:4001::200e', '64:ff9b::8.8.8.8', '2002:808:808::1']) {
      assert.equal(forbiddenAddressReason(ip), null, ip);
    }
  });
  it('refuses every non-public form, including IPv6 wrappers around private IPv4', () => {
    for (const ip of ['127.0.0.1', '127.255.255.254', '10.0.0.1', '172.20.1.1', '192.168.0.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.251', '255.255.255.255',
      '::', '::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', '::ffff:8.8.8.8', '::7f00:1', 'fc00::1', 'fdff::1', 'fe80::1', 'febf::1', 'ff02::1', '64:ff9b::a00:1', '64:ff9b::a9fe:a9fe',
      '2002:a00:1::1', '2002:c0a8:101::1', '[::1]', 'fe80::1%eth0', 'not-an-ip', '']) {
      assert.notEqual(forbiddenAddressReason(ip), null, ip);
    }
  });
});

describe('resolveFfmpegPath', () => {
  it('prefers FFMPEG_PATH, else PATH, else the bundled binary', () => {
    assert.equal(resolveFfmpegPath('/opt/ff/ffmpeg'), '/opt/ff/ffmpeg');
    const saved = process.env.PATH;
    try {
      process.env.PATH = '/nonexistent-dir';
      const bundled = resolveFfmpegPath(undefined);
      assert.match(bundled, /@ffmpeg-installer/);
      assert.ok(existsSync(bundled));
      assert.equal(resolveFfmpegPath(''), bundled);
    } finally {
      process.env.PATH = saved;
    }
  });
});

describe('WaveformAccumulator', () => {
  function pcm(samples: number[]): Buffer {
    const b = Buffer.alloc(samples.length * 2);
    samples.forEach((s, i) => b.writeInt16LE(s, i * 2));
    return b;
  }

  it('gives 64 bars normalised to the loudest, whatever the chunking', () => {
    const loud = Array.from({ length: 8000 }, (_, i) => Math.round(Math.sin(i / 3) * 20000));
    const quiet = Array.from({ length: 8000 }, (_, i) => Math.round(Math.sin(i / 3) * 5000));
    const whole = pcm([...loud, ...quiet]);
    const a = new WaveformAccumulator();
    a.push(whole);
    const b = new WaveformAccumulator();
    for (let i = 0; i < whole.length; i += 333) b.push(whole.subarray(i, i + 333)); // odd sizes split samples
    const wa = a.finish();
    assert.deepEqual(b.finish(), wa);
    assert.equal(wa.length, 64);
    assert.equal(Math.max(...wa), 100);
    assert.ok(wa.slice(0, 32).every((v) => v >= 95), String(wa));
    assert.ok(wa.slice(33).every((v) => v >= 20 && v <= 30), String(wa));
    assert.equal(a.seconds, 2);
  });

  it('is all zeros for silence and for nothing, and still 64 long for very short input', () => {
    const s = new WaveformAccumulator();
    s.push(Buffer.alloc(16000));
    assert.deepEqual([...s.finish()], new Array(64).fill(0));
    assert.deepEqual([...new WaveformAccumulator().finish()], new Array(64).fill(0));
    const short = new WaveformAccumulator();
    short.push(pcm([1000, -1000, 1000]));
    assert.equal(short.finish().length, 64);
  });
});

describe('parseInputStreams', () => {
  it('reads codec, profile, rate, channels and video from ffmpeg -i output, ignoring outputs', () => {
    const stderr = [
      "Input #0, mov,mp4,m4a,3gp,3g2,mj2, from 'file:/x':",
      '  Duration: 00:00:03.02, start: 0.000000, bitrate: 87 kb/s',
      '    Stream #0:0(und): Video: h264 (High 4:4:4 Predictive) (avc1 / 0x31637661), yuv444p, 160x120, 10 fps',
      '    Stream #0:1(und): Audio: aac (LC) (mp4a / 0x6134706D), 44100 Hz, stereo, fltp, 128 kb/s (default)',
      'Stream mapping:',
      "Output #0, ogg, to 'file:/y':",
      '    Stream #0:0: Audio: opus, 48000 Hz, mono, s16, 32 kb/s',
    ].join('\n');
    assert.deepEqual(parseInputStreams(stderr), { audio: { codec: 'aac', profile: 'LC', sampleRate: 44100, channels: 2 }, hasVideo: true });
    assert.deepEqual(parseInputStreams('    Stream #0:0: Audio: opus, 48000 Hz, mono, fltp\n'), {
      audio: { codec: 'opus', profile: null, sampleRate: 48000, channels: 1 },
      hasVideo: false,
    });
    assert.equal(parseInputStreams('    Stream #0:1: Video: mjpeg, yuvj420p, 300x300 (attached pic)\n').hasVideo, false);
  });
});
