/**
 * R10: slow clients at a descriptor limit. `voicenote serve` (embedded: SQLite and the worker in the
 * process, as `npm start`) runs under `ulimit -n 256`; attackers hold as many sockets as they can,
 * each a request that promises 60,000 bytes of body and sends 5, reopening every socket the service
 * closes; meanwhile another client (its own loopback address) asks GET /api/v1/usage with a key, one
 * request at a time. Three runs: one attacking address with the default caps; eight attacking
 * addresses; the connection cap set above the descriptor limit (accept() itself runs out).
 * Shows: the process never exits; what the other client got meanwhile.
 *   npm run build && node --import tsx bench/reliability/r10-slow-clients.ts
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, sleep } from './cluster.js';
import { writeReliabilitySection } from './report.js';

const ULIMIT = 256;
const SECONDS = Number(process.env.REL_SECONDS ?? 20);
const SOCKETS_PER_ATTACKER = 600;
const SLOW_REQUEST = 'POST /api/v1/send HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{"a":';

interface Service {
  child: ChildProcess;
  port: number;
  key: string;
  output(): string;
  exit: Promise<string>;
}

async function startService(dataDir: string, env: Record<string, string>): Promise<Service> {
  const child = spawn('bash', ['-c', `ulimit -n ${ULIMIT}; exec "${process.execPath}" bin/voicenote.js serve`], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', SANDBOX_LATENCY_MS: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (output += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (output += c));
  const exit = new Promise<string>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? `exit ${code}`)));
  for (let i = 0; i < 600; i++) {
    const address = /"address":"http:\/\/127\.0\.0\.1:(\d+)"/.exec(output);
    const key = /sk_test_\w+/.exec(output);
    if (address && key) return { child, port: Number(address[1]), key: key[0], output: () => output, exit };
    if (child.exitCode !== null) break;
    await sleep(50);
  }
  child.kill('SIGKILL');
  throw new Error(`serve did not start: ${output}`);
}

/** One attacking address keeping `count` slow requests open, reopening each one the service closes. */
function attack(port: number, localAddress: string, count: number): { stop(): void; opened(): number } {
  let stopped = false;
  let opened = 0;
  const sockets = new Set<net.Socket>();
  const open = (): void => {
    if (stopped) return;
    const socket = net.connect({ port, host: '127.0.0.1', localAddress });
    opened++;
    sockets.add(socket);
    socket.on('connect', () => socket.write(SLOW_REQUEST));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      sockets.delete(socket);
      // Back at once, as an attacker would be (a short pause so the loop is not a busy one).
      setTimeout(open, 20);
    });
  };
  for (let i = 0; i < count; i++) open();
  return {
    stop() {
      stopped = true;
      for (const socket of sockets) socket.destroy();
    },
    opened: () => opened,
  };
}

function usage(port: number, key: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, localAddress: '127.0.0.200', path: '/api/v1/usage', headers: { authorization: `Bearer ${key}`, connection: 'close' }, timeout: 2_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end();
  });
}

interface Outcome {
  label: string;
  attackers: number;
  opened: number;
  asked: number;
  answered: number;
  latencies: number[];
  longestGapMs: number;
  maxDescriptors: number;
  ended: string;
}

async function scenario(label: string, attackers: number, env: Record<string, string>): Promise<Outcome> {
  const dataDir = await mkdtemp(join(tmpdir(), 'voicenote-r10-'));
  const service = await startService(dataDir, env);
  let ended = 'still running';
  void service.exit.then((how) => (ended = how));
  const attacks = Array.from({ length: attackers }, (_, i) => attack(service.port, `127.0.0.${i + 1}`, SOCKETS_PER_ATTACKER));
  const latencies: number[] = [];
  let asked = 0;
  let lastAnswer = Date.now();
  let longestGapMs = 0;
  let maxDescriptors = 0;
  const until = Date.now() + SECONDS * 1_000;
  while (Date.now() < until && ended === 'still running') {
    const t0 = Date.now();
    asked++;
    const status = await usage(service.port, service.key);
    if (status === 200) {
      latencies.push(Date.now() - t0);
      longestGapMs = Math.max(longestGapMs, Date.now() - lastAnswer);
      lastAnswer = Date.now();
    }
    try {
      maxDescriptors = Math.max(maxDescriptors, readdirSync(`/proc/${service.child.pid}/fd`).length);
    } catch {
      // The process is gone: `ended` says how.
    }
    await sleep(100);
  }
  longestGapMs = Math.max(longestGapMs, Date.now() - lastAnswer);
  const opened = attacks.reduce((n, a) => n + a.opened(), 0);
  attacks.forEach((a) => a.stop());
  // Still up after the attack, and answering?
  await sleep(500);
  const after = ended === 'still running' ? await usage(service.port, service.key) : 0;
  if (ended === 'still running' && after !== 200) ended = `running, but answered ${after} after the attack`;
  const state = ended;
  service.child.kill('SIGTERM');
  await Promise.race([service.exit, sleep(40_000)]);
  service.child.kill('SIGKILL');
  await rm(dataDir, { recursive: true, force: true });
  if (state !== 'still running') process.stderr.write(service.output());
  return { label, attackers, opened, asked, answered: latencies.length, latencies, longestGapMs, maxDescriptors, ended: state };
}

const pct = (sorted: number[], p: number): number => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!);

const outcomes = [
  await scenario('one attacking address, default caps', 1, {}),
  await scenario('eight attacking addresses, default caps', 8, {}),
  await scenario('one attacking address, HTTP_MAX_CONNECTIONS=5000 (above the descriptor limit)', 1, { HTTP_MAX_CONNECTIONS: '5000', HTTP_MAX_CONNECTIONS_PER_ADDRESS: '0' }),
];

const rows = outcomes.map((o) => {
  const sorted = [...o.latencies].sort((a, b) => a - b);
  return `| ${o.label} | ${o.opened} | ${o.answered} / ${o.asked} | ${pct(sorted, 50)} / ${pct(sorted, 99)} ms | ${(o.longestGapMs / 1000).toFixed(1)} s | ${o.maxDescriptors} | **${o.ended}** |`;
});
const allUp = outcomes.every((o) => o.ended === 'still running');
await writeReliabilitySection(
  'r10',
  'R10 — slow clients at a descriptor limit',
  'npm run build && node --import tsx bench/reliability/r10-slow-clients.ts',
  `\`voicenote serve\` as \`npm start\` runs it (SQLite, worker in the process), started with
\`ulimit -n ${ULIMIT}\` and the default HTTP settings (so at most ${Math.floor(ULIMIT * 0.75)} connections, ${Math.ceil(Math.floor(ULIMIT * 0.75) / 2)} from
one address; headers within 10 s, the whole request within 30 s) unless the row says otherwise.
For ${SECONDS} s each attacking loopback address keeps ${SOCKETS_PER_ATTACKER} sockets open, each a \`POST /api/v1/send\`
that promises 60,000 bytes and sends 5, and reopens every socket the service closes; another client
(127.0.0.200) meanwhile asks \`GET /api/v1/usage\` with a key, one request at a time, 100 ms apart,
each given 2 s.

| run | attacking connections opened | other client: answered / asked | its latency p50 / p99 | its longest wait between answers | most descriptors open | process at the end |
|---|---|---|---|---|---|---|
${rows.join('\n')}

${allUp ? 'The process stayed up in every run and answered after each attack.' : 'The process did NOT stay up in every run (see the last column).'}
With one attacking address the cap per address keeps places free for everyone else. Attackers on
many addresses can fill every place: the process then stays up and closes the excess at once, and
other clients get in as the timeouts free places; per-client limits in front of the service (a
reverse proxy) are what keep them answered then. Before the load-shedding check stopped reading
the process's memory (which opens a file in /proc), a process out of descriptors ended at its next
sample with exit 70 (EMFILE); \`test/http-hardening.test.ts\` keeps that case (\`ulimit -n 256\`,
400 slow sockets, the cap above the limit).`,
);
process.stdout.write(`${rows.join('\n')}\n`);
