import assert from 'node:assert/strict';
import { audioTargetFor } from '../src/platforms/registry.js';
import type { LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { createAudioPipeline, type AudioPipeline } from '../src/audio/index.js';
import { createAudioAgent, fetchAudio } from '../src/audio/fetch.js';
import { forbiddenAddressReason } from '../src/audio/ip-ranges.js';
import { startAudioServer, type AudioServer } from './fakes/audio-server.js';
import { sharedFixtures, testFfmpegPath } from './fixtures/audio-fixtures.js';
import { isAudioError, leftovers, makeDataDir, removeDir } from './fixtures/audio-harness.js';

/** Made-up names for the resolver override; each maps to what a hostile DNS answer could say. */
const FAKE_DNS: Record<string, LookupAddress[]> = {
  'canary.test': [{ address: '127.0.0.1', family: 4 }],
  'canary6.test': [{ address: '::1', family: 6 }],
  'mapped.test': [{ address: '::ffff:127.0.0.1', family: 6 }],
  'metadata.test': [{ address: '169.254.169.254', family: 4 }],
  'intranet.test': [{ address: '10.0.0.7', family: 4 }],
  'cgnat.test': [{ address: '100.64.1.1', family: 4 }],
  'ula.test': [{ address: 'fd00::7', family: 6 }],
  'nat64.test': [{ address: '64:ff9b::7f00:1', family: 6 }],
  // One good answer does not launder a bad one: happy-eyeballs could pick either.
  'mixed.test': [{ address: '93.184.216.34', family: 4 }, { address: '127.0.0.1', family: 4 }],
  'public.test': [{ address: '127.0.0.2', family: 4 }],
};

const fakeLookup: LookupFunction = (hostname, options, callback) => {
  const answers = FAKE_DNS[hostname];
  if (!answers) return callback(Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
  if (options.all) return callback(null, answers);
  const first = answers[0] as LookupAddress;
  callback(null, first.address, first.family);
};

/** Stands 127.0.0.2 in for a host on the public internet; every other address gets the real verdict. */
const PUBLIC_STAND_IN = '127.0.0.2';
const policyWithStandIn = (address: string): string | null => (address === PUBLIC_STAND_IN ? null : forbiddenAddressReason(address));

describe('SSRF: private addresses forbidden', () => {
  let canary: AudioServer;
  let canary6: AudioServer | null = null;
  let publicHost: AudioServer;
  let dataDir: string;
  let pipeline: AudioPipeline;
  let ffmpegPath: string;
  let voiceOgg: string;

  before(async () => {
    ffmpegPath = await testFfmpegPath();
    voiceOgg = (await sharedFixtures(ffmpegPath))['voice.ogg'];
    canary = await startAudioServer({ host: '127.0.0.1' });
    canary.route('/x.ogg', { kind: 'file', path: voiceOgg, contentType: 'audio/ogg' });
    canary6 = await startAudioServer({ host: '::1' }).catch(() => null);
    publicHost = await startAudioServer({ host: PUBLIC_STAND_IN });
    dataDir = await makeDataDir('ssrf');
    pipeline = createAudioPipeline(
      { dataDir, ffmpegPath, allowPrivateUrls: false, fetchTimeoutMs: 5_000 },
      { lookup: fakeLookup, addressPolicy: policyWithStandIn },
    );
  });

  after(async () => {
    await pipeline.close();
    await canary.close();
    await canary6?.close();
    await publicHost.close();
    await removeDir(dataDir);
  });

  const tricks = (port: number, port6: number): string[] => [
    `http://127.0.0.1:${port}/x.ogg`,
    `http://127.1:${port}/x.ogg`,
    `http://0x7f.1:${port}/x.ogg`,
    `http://0x7f.0.0.1:${port}/x.ogg`,
    `http://2130706433:${port}/x.ogg`,
    `http://0177.0.0.1:${port}/x.ogg`,
    `http://017700000001:${port}/x.ogg`,
    `http://%31%32%37.0.0.1:${port}/x.ogg`,
    `http://0.0.0.0:${port}/x.ogg`,
    `http://0:${port}/x.ogg`,
    `http://[::ffff:127.0.0.1]:${port}/x.ogg`,
    `http://[::ffff:7f00:1]:${port}/x.ogg`,
    `http://[::127.0.0.1]:${port}/x.ogg`,
    `http://[64:ff9b::127.0.0.1]:${port}/x.ogg`,
    `http://[::1]:${port6}/x.ogg`,
    `http://[0:0:0:0:0:0:0:1]:${port6}/x.ogg`,
    `http://[::]:${port6}/x.ogg`,
    `http://localhost:${port}/x.ogg`,
    `http://LocalHost.:${port}/x.ogg`,
    `http://anything.localhost:${port}/x.ogg`,
    `http://canary.test:${port}/x.ogg`,
    `http://canary6.test:${port6}/x.ogg`,
    `http://mapped.test:${port}/x.ogg`,
    `http://nat64.test:${port}/x.ogg`,
    `http://mixed.test:${port}/x.ogg`,
    `http://metadata.test/latest/meta-data/`,
    `http://169.254.169.254/latest/meta-data/iam/security-credentials/`,
    `http://intranet.test/x.ogg`,
    `http://cgnat.test/x.ogg`,
    `http://ula.test/x.ogg`,
    `https://canary.test:${port}/x.ogg`,
  ];

  it('refuses every trick with audio_fetch_blocked (permanent) and the canary sees no request', async () => {
    const port6 = canary6?.port ?? canary.port;
    for (const url of tricks(canary.port, port6)) {
      await assert.rejects(pipeline.prepare({ url, target: audioTargetFor('whatsapp') }), isAudioError('audio_fetch_blocked', { transient: false }), url);
    }
    assert.deepEqual(canary.requests, []);
    assert.deepEqual(canary6?.requests ?? [], []);
  });

  it('refuses a public host that redirects to a private one, at every hop', async () => {
    const p = canary.port;
    const redirects: Record<string, string> = {
      '/to-literal': `http://127.0.0.1:${p}/x.ogg`,
      '/to-decimal': `http://2130706433:${p}/x.ogg`,
      '/to-hex': `http://0x7f.1:${p}/x.ogg`,
      '/to-mapped': `http://[::ffff:127.0.0.1]:${p}/x.ogg`,
      '/to-v6-loopback': `http://[::1]:${canary6?.port ?? p}/x.ogg`,
      '/to-name': `http://canary.test:${p}/x.ogg`,
      '/to-localhost': `http://localhost:${p}/x.ogg`,
      '/to-metadata': 'http://169.254.169.254/latest/meta-data/',
      '/to-metadata-name': 'http://metadata.test/latest/meta-data/',
      '/to-intranet': 'http://intranet.test/admin',
      '/to-ten': 'http://10.20.30.40/x.ogg',
    };
    for (const [path, location] of Object.entries(redirects)) {
      for (const status of [301, 302, 303, 307, 308]) publicHost.route(`${path}-${status}`, { kind: 'redirect', location, status });
    }
    // A longer chain that stays public for two hops before turning inwards.
    publicHost.route('/chain-1', { kind: 'redirect', location: '/chain-2' });
    publicHost.route('/chain-2', { kind: 'redirect', location: `http://public.test:${publicHost.port}/to-name-302` });

    // The caller sees the fixed words, never the inside address, name or port the redirect named.
    const fixedWords = /^(redirect refused: )?the audio host is not a public address$/;
    for (const path of Object.keys(redirects)) {
      for (const status of [301, 302, 303, 307, 308]) {
        const url = `http://public.test:${publicHost.port}${path}-${status}`;
        await assert.rejects(pipeline.prepare({ url, target: audioTargetFor('telegram') }), isAudioError('audio_fetch_blocked', { transient: false, message: fixedWords }), url);
      }
    }
    await assert.rejects(
      pipeline.prepare({ url: `http://public.test:${publicHost.port}/chain-1`, target: audioTargetFor('linkedin') }),
      isAudioError('audio_fetch_blocked'),
    );
    // The public stand-in was really contacted, so the refusals happened at the private hop.
    assert.equal(publicHost.requests.length, Object.keys(redirects).length * 5 + 3);
    assert.deepEqual(canary.requests, []);
    assert.deepEqual(canary6?.requests ?? [], []);
  });

  it('vets the connected socket too, for addresses that never went through DNS', async () => {
    // URL-level vetting is switched off here so only the agent's connect hook stands in the way.
    const agent = createAudioAgent({ allowPrivate: false });
    try {
      await assert.rejects(
        fetchAudio({
          url: `http://127.0.0.1:${canary.port}/x.ogg`,
          destPath: `${dataDir}/never-written`,
          maxBytes: 1_000_000,
          timeoutMs: 5_000,
          allowPrivate: false,
          addressPolicy: () => null,
          dispatcher: agent,
        }),
        isAudioError('audio_fetch_blocked'),
      );
    } finally {
      await agent.close();
    }
    assert.deepEqual(canary.requests, []);
  });

  it('leaves no temporary files behind after all those refusals', async () => {
    assert.deepEqual(await leftovers(dataDir), []);
  });

  it('fetches the very same canary URLs once private addresses are allowed (the canary can see requests)', async () => {
    const openDir = await makeDataDir('ssrf-open');
    const open = createAudioPipeline({ dataDir: openDir, ffmpegPath, allowPrivateUrls: true }, { lookup: fakeLookup });
    try {
      const ok = await open.prepare({ url: `http://0x7f.1:${canary.port}/x.ogg`, target: audioTargetFor('whatsapp') });
      ok.release();
      const viaName = await open.prepare({ url: `http://canary.test:${canary.port}/x.ogg`, target: audioTargetFor('whatsapp') });
      assert.equal(viaName.cacheHit, true);
      viaName.release();
      assert.equal(canary.requests.length, 2);
    } finally {
      await open.close();
      await removeDir(openDir);
    }
  });
});

// One address inside each refused range (not its first address: a range cut short would still
// refuse that one), and public addresses just outside some of them.
const REFUSED_BY_RANGE: Record<string, string> = {
  '0.0.0.0/8': '0.1.2.3',
  '10.0.0.0/8': '10.200.3.4',
  '100.64.0.0/10': '100.127.255.254',
  '127.0.0.0/8': '127.5.6.7',
  '169.254.0.0/16': '169.254.169.254',
  '172.16.0.0/12': '172.31.255.1',
  '192.0.0.0/24': '192.0.0.170',
  '192.0.2.0/24': '192.0.2.55',
  '192.88.99.0/24': '192.88.99.1',
  '192.168.0.0/16': '192.168.44.2',
  '198.18.0.0/15': '198.19.200.1',
  '198.51.100.0/24': '198.51.100.77',
  '203.0.113.0/24': '203.0.113.200',
  '224.0.0.0/4': '239.255.255.250',
  '240.0.0.0/4': '255.255.255.255',
  '::/96': '::1',
  '64:ff9b:1::/48': '64:ff9b:1:abcd::1',
  '100::/64': '100::dead:beef',
  '2001::/32': '2001:0:4136:e378:8000:63bf:3fff:fdd2',
  '2001:db8::/32': '2001:db8:85a3::8a2e:370:7334',
  '2001:2::/48': '2001:2:0:1::1',
  '3fff::/20': '3fff:fff::1',
  'fc00::/7': 'fd12:3456:789a::1',
  'fe80::/10': 'febf::1',
  'fec0::/10': 'feff::1',
  'ff00::/8': 'ff02::1',
};

describe('SSRF: one refused address in every refused range', () => {
  it('each of the ranges has a test address inside it, and that address is refused', async () => {
    const { BlockList } = await import('node:net');
    const { FORBIDDEN_RANGES } = await import('../src/audio/ip-ranges.js');
    assert.deepEqual([...FORBIDDEN_RANGES].sort(), Object.keys(REFUSED_BY_RANGE).sort(), 'a test address for every range, and a range for every test address');
    for (const [range, address] of Object.entries(REFUSED_BY_RANGE)) {
      const [network, prefix] = range.split('/') as [string, string];
      const family = network.includes(':') ? 'ipv6' : 'ipv4';
      const only = new BlockList();
      only.addSubnet(network, Number(prefix), family);
      assert.ok(only.check(address, family), `${address} lies in ${range}`);
      assert.notEqual(forbiddenAddressReason(address), null, `${address} (${range}) is refused`);
    }
  });

  it('public addresses just outside some of them are not', () => {
    for (const address of ['8.8.8.8', '100.128.0.1', '172.32.0.1', '198.20.0.1', '223.255.255.254', '2001:1::1', '2001:db9::1', '64:ff9b:2::1', '2001:4860:4860::8888', '4000::1']) {
      assert.equal(forbiddenAddressReason(address), null, address);
    }
  });
});
