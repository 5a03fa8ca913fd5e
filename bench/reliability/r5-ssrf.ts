/**
 * R5: the SSRF corpus against real processes (1 API + 1 worker, AUDIO_ALLOW_PRIVATE_URLS=false):
 * every IPv4/IPv6 spelling of internal addresses, host names that resolve to them (entries this
 * script adds to /etc/hosts, and removes), and redirects to them. Canaries listen on 127.0.0.1 and
 * ::1 and count connections. Shows: 100 % refused (422 at the door, or failed audio_fetch_blocked),
 * the canaries never reached. Needs root (for /etc/hosts).
 *   npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r5-ssrf.ts
 */
import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ssrfTricks, startCanary } from '../../test/reliability/ssrf-corpus.js';
import { createAccount, sleep } from './cluster.js';
import { writeReliabilitySection } from './report.js';
import { withCluster } from './run.js';

const HOSTS = '/etc/hosts';
const MARK = '# voicenote r5-ssrf (temporary)';
const canary = (await startCanary('127.0.0.1'))!;
const canary6 = await startCanary('::1');
const port6 = canary6?.port ?? canary.port;
// A redirector on loopback: the first hop is itself internal, so this shows the redirect is never followed there.
const redirector = createServer((req, res) => {
  const to = new URL(req.url ?? '/', 'http://x').searchParams.get('to') ?? '';
  res.writeHead(302, { location: to }).end();
});
await new Promise<void>((r) => redirector.listen(0, '127.0.0.1', r));
const redirectPort = (redirector.address() as AddressInfo).port;

const originalHosts = await readFile(HOSTS, 'utf8');
const hostNames: [string, string][] = [
  ['127.0.0.1', 'voicenote-canary.test'],
  ['::1', 'voicenote-canary6.test'],
  ['169.254.169.254', 'voicenote-metadata.test'],
  ['10.0.0.7', 'voicenote-intranet.test'],
  ['::ffff:127.0.0.1', 'voicenote-mapped.test'],
  ['0.0.0.0', 'voicenote-zero.test'],
];
await writeFile(HOSTS, `${originalHosts.trimEnd()}\n${hostNames.map(([ip, name]) => `${ip} ${name} ${MARK}`).join('\n')}\n`);
const restoreHosts = async () => {
  const now = await readFile(HOSTS, 'utf8');
  await writeFile(HOSTS, now.split('\n').filter((l) => !l.includes(MARK)).join('\n'));
};

const options = {
  extraEnv: { AUDIO_ALLOW_PRIVATE_URLS: 'false', SANDBOX_LATENCY_MS: '0' },
  beforeStop: restoreHosts,
  afterStop: async () => {
    await canary.close();
    await canary6?.close();
    redirector.close();
  },
};
await withCluster(options, async ({ cluster }) => {
  await cluster.start('api-1', 'api');
  await cluster.start('worker-1', 'worker');
  const base = cluster.apis()[0]!;
  const { testKey } = createAccount(cluster);
  const tricks = [
    ...ssrfTricks(canary.port, port6),
    `http://voicenote-canary.test:${canary.port}/x.ogg`,
    `http://voicenote-canary6.test:${port6}/x.ogg`,
    `http://VOICENOTE-Canary.TEST:${canary.port}/x.ogg`,
    `http://voicenote-mapped.test:${canary.port}/x.ogg`,
    `http://voicenote-zero.test:${canary.port}/x.ogg`,
    'http://voicenote-metadata.test/latest/meta-data/',
    'http://voicenote-intranet.test/x.ogg',
    `http://127.0.0.1:${redirectPort}/r?to=${encodeURIComponent(`http://127.0.0.1:${canary.port}/x.ogg`)}`,
    `http://voicenote-canary.test:${redirectPort}/r?to=${encodeURIComponent('http://169.254.169.254/latest/meta-data/')}`,
    `http://[::ffff:127.0.0.1]:${redirectPort}/r?to=${encodeURIComponent(`http://[::1]:${port6}/x.ogg`)}`,
  ];
  const atDoor: string[] = [];
  const accepted: { url: string; id: string }[] = [];
  const notRefused: string[] = [];
  for (const url of tricks) {
    const res = await fetch(`${base}/api/v1/send`, {
      method: 'POST',
      headers: { authorization: `Bearer ${testKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ platform: 'telegram', recipient: '123456789', audio_url: url, session: { bot_token: '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ' } }),
    });
    const body = (await res.json()) as { id?: string; error?: { code: string } };
    if (res.status === 422 && body.error?.code === 'invalid_parameter') atDoor.push(url);
    else if (res.status === 202 && body.id) accepted.push({ url, id: body.id });
    else notRefused.push(`${url}: ${res.status} ${JSON.stringify(body)}`);
  }
  let blocked = 0;
  const deadline = Date.now() + 120_000;
  for (const { url, id } of accepted) {
    let final: { status: string; error: { code: string } | null } | undefined;
    while (Date.now() < deadline) {
      final = (await (await fetch(`${base}/api/v1/status/${id}`, { headers: { authorization: `Bearer ${testKey}` } })).json()) as typeof final;
      if (final && (final.status === 'delivered' || final.status === 'failed')) break;
      await sleep(250);
    }
    if (final?.status === 'failed' && final.error?.code === 'audio_fetch_blocked') blocked++;
    else notRefused.push(`${url}: ${final?.status} ${JSON.stringify(final?.error)}`);
  }
  const refused = atDoor.length + blocked;
  const md = `| figure | value |
|---|---|
| tricks | ${tricks.length}: IPv4 spellings (dotted, short, octal, hex, decimal, percent-encoded), IPv6 and IPv4-mapped/NAT64/6to4 forms, unspecified addresses, \`localhost\` names, cloud metadata, private and CGNAT ranges, multicast/broadcast, userinfo, https; ${hostNames.length} names this script put in /etc/hosts (loopback, ::1, metadata, private, mapped, 0.0.0.0); redirects to internal addresses |
| refused at the door (422 invalid_parameter) | ${atDoor.length} |
| accepted, then failed \`audio_fetch_blocked\` (checked at resolution/connection) | ${blocked} |
| refused in all | **${refused} / ${tricks.length} (${((100 * refused) / tricks.length).toFixed(1)} %)** |
| connections the canaries on 127.0.0.1 and ::1 received | **${canary.connections() + (canary6?.connections() ?? 0)}** |

${notRefused.length ? `Not refused:\n\n${notRefused.map((n) => `- ${n}`).join('\n')}` : 'Every trick was refused.'}

A redirect can only be shown refused at its first hop here: the redirector itself has to listen on
this machine, which is internal. That every hop of a redirect chain from a public host is checked is
tested in \`test/audio-ssrf.test.ts\` (a stand-in public host and a resolver that lies).`;
  console.log(md);
  await writeReliabilitySection('r5', 'R5 — SSRF corpus', 'npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r5-ssrf.ts', md);
});
