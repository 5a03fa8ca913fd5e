/**
 * R11: small holes found by attack, tried on a real `voicenote serve` (embedded: SQLite, the worker
 * in the process, private addresses refused) as an outsider and as a customer would:
 *   1. many API keys (`keys create`, as its operator would for a customer) and many sandbox WhatsApp sessions;
 *   2. a JSON body nested 10,000 deep to POST /api/v1/send and to the dashboard's sign-in;
 *   3. audio URLs on a name that resolves to loopback and on a name that does not resolve: what the status lookup says;
 *   4. ten wrong passwords for one email sent at once to the sign-in form;
 *   5. two client addresses each opening 600 connections that send a slow request.
 * With REL_BEFORE_ROOT set to a built checkout of an earlier commit (`npm run build` there), the same
 * attacks run against it first, so the table shows before and after.
 *   npm run build && REL_BEFORE_ROOT=/path/to/earlier/checkout node --import tsx bench/reliability/r11-small-holes.ts
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, sleep } from './cluster.js';
import { writeReliabilitySection } from './report.js';

interface Service {
  child: ChildProcess;
  root: string;
  dataDir: string;
  port: number;
  accountId: string;
  key: string;
  email: string;
  password: string;
  output(): string;
}

async function startService(root: string, dataDir: string): Promise<Service> {
  const child = spawn(process.execPath, ['bin/voicenote.js', 'serve'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', SANDBOX_LATENCY_MS: '0', ALLOW_PRIVATE_URLS: 'false', MAX_EVENT_LOOP_DELAY_MS: '0', OWNER_EMAIL: 'owner@example.com' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (output += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (output += c));
  for (let i = 0; i < 600; i++) {
    const address = /"address":"http:\/\/127\.0\.0\.1:(\d+)"/.exec(output);
    const key = /sk_test_\w+/.exec(output);
    const account = /account\s+(acct_\w+)/.exec(output);
    const login = /dashboard login\s+(\S+)\s+password (\S+)/.exec(output);
    if (address && key && account && login) {
      return { child, root, dataDir, port: Number(address[1]), accountId: account[1]!, key: key[0], email: login[1]!, password: login[2]!, output: () => output };
    }
    if (child.exitCode !== null) break;
    await sleep(50);
  }
  child.kill('SIGKILL');
  throw new Error(`serve did not start: ${output}`);
}

function cli(service: Service, args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/voicenote.js', ...args], { cwd: service.root, env: { PATH: process.env.PATH ?? '', DATA_DIR: service.dataDir }, timeout: 60_000 }, (error, _stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) || 1 : 0, stderr: stderr.trim() });
    });
  });
}

interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

function http(service: Service, method: string, path: string, options: { key?: string; body?: string; type?: string; cookie?: string; localAddress?: string } = {}): Promise<Answer> {
  return new Promise((resolve) => {
    const headers: Record<string, string> = { connection: 'close' };
    if (options.key) headers.authorization = `Bearer ${options.key}`;
    if (options.body !== undefined) {
      headers['content-type'] = options.type ?? 'application/json';
      headers['content-length'] = String(Buffer.byteLength(options.body));
    }
    if (options.cookie) headers.cookie = options.cookie;
    const req = request({ host: '127.0.0.1', port: service.port, method, path, headers, timeout: 30_000, ...(options.localAddress ? { localAddress: options.localAddress } : {}) }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({ status: 0, body: '', headers: {} }));
    req.end(options.body);
  });
}

const count = (statuses: number[]): string => {
  const by = new Map<number, number>();
  for (const s of statuses) by.set(s, (by.get(s) ?? 0) + 1);
  return [...by].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s === 0 ? 'no answer' : s}: ${n}`).join(', ');
};

const errorLines = (service: Service): number => service.output().split('\n').filter((l) => /"level":(50|60)/.test(l)).length;

async function keysAndSessions(service: Service): Promise<{ keys: string; keyRefusal: string; sessions: string }> {
  let created = 0;
  let refusal = '';
  for (let i = 0; i < 15; i++) {
    const run = await cli(service, ['keys', 'create', '--account', service.accountId, '--env', 'test']);
    if (run.code === 0) created++;
    else if (!refusal) refusal = run.stderr.split('\n').filter((l) => !l.startsWith('voicenote: note:')).join(' ').slice(0, 160);
  }
  // Room for the sessions' own rate limit: enterprise with a high limit.
  await cli(service, ['accounts', 'set-plan', service.accountId, '--plan', 'enterprise', '--rate-limit', '100000']);
  await sleep(300);
  const statuses: number[] = [];
  for (let i = 0; i < 110; i++) statuses.push((await http(service, 'POST', '/api/v1/whatsapp/sessions', { key: service.key })).status);
  return { keys: `${created} of 15 created (the account had 1 sandbox key)`, keyRefusal: refusal || '(none)', sessions: count(statuses) };
}

async function deepJson(service: Service): Promise<{ statuses: string; errors: number }> {
  const before = errorLines(service);
  const deep = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`;
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) {
    statuses.push((await http(service, 'POST', '/api/v1/send', { key: service.key, body: deep })).status);
    statuses.push((await http(service, 'POST', '/dashboard/sign-in', { body: deep })).status);
  }
  await sleep(200);
  return { statuses: count(statuses), errors: errorLines(service) - before };
}

async function disclosure(service: Service): Promise<string[]> {
  const said: string[] = [];
  for (const url of ['http://vm:5432/x.ogg', 'http://no-such-name.invalid:5432/x.ogg']) {
    const sent = await http(service, 'POST', '/api/v1/send', {
      key: service.key,
      body: JSON.stringify({ platform: 'telegram', recipient: '123456789', audio_url: url, session: { bot_token: '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ' } }),
    });
    const id = (JSON.parse(sent.body) as { id?: string }).id;
    if (!id) {
      said.push(`${url}: ${sent.status} ${sent.body.slice(0, 120)}`);
      continue;
    }
    let error = '(not settled in 30 s)';
    for (let i = 0; i < 300; i++) {
      const status = JSON.parse((await http(service, 'GET', `/api/v1/status/${id}`, { key: service.key })).body) as { status: string; error: { code: string; message: string } | null };
      if (status.status === 'failed' || status.status === 'delivered') {
        error = status.error ? `${status.error.code}: "${status.error.message}"` : status.status;
        break;
      }
      await sleep(100);
    }
    said.push(`\`${url}\` → ${error}`);
  }
  return said;
}

async function parallelSignIn(service: Service): Promise<{ statuses: string; ms: number }> {
  const form = await http(service, 'GET', '/dashboard/sign-in', { localAddress: '127.0.0.60' });
  const cookie = ([] as string[]).concat(form.headers['set-cookie'] ?? []).map((c) => c.split(';')[0]).join('; ');
  const csrf = /name="_csrf" value="([^"]+)"/.exec(form.body)?.[1] ?? '';
  const body = new URLSearchParams({ _csrf: csrf, email: service.email, password: 'not the password' }).toString();
  const started = Date.now();
  const answers = await Promise.all(
    Array.from({ length: 10 }, () => http(service, 'POST', '/dashboard/sign-in', { body, type: 'application/x-www-form-urlencoded', cookie, localAddress: '127.0.0.60' })),
  );
  return { statuses: count(answers.map((a) => a.status)), ms: Date.now() - started };
}

/** Two addresses each open 600 connections with a slow request; how many does each hold, and is a third answered? */
async function connectionShare(service: Service): Promise<{ held: string; other: number }> {
  const sockets: net.Socket[] = [];
  const open = new Map<string, number>();
  for (const address of ['127.0.0.2', '127.0.0.3']) {
    open.set(address, 0);
    for (let i = 0; i < 600; i++) {
      const socket = net.connect({ port: service.port, host: '127.0.0.1', localAddress: address });
      socket.on('error', () => undefined);
      socket.on('connect', () => {
        open.set(address, open.get(address)! + 1);
        socket.write('POST /api/v1/send HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{"a":');
      });
      socket.on('close', () => open.set(address, open.get(address)! - 1));
      sockets.push(socket);
    }
  }
  await sleep(3_000);
  const held = [...open].map(([address, n]) => `${address}: ${n}`).join(', ');
  const other = (await http(service, 'GET', '/healthz', { localAddress: '127.0.0.99' })).status;
  for (const socket of sockets) socket.destroy();
  await sleep(500);
  return { held, other };
}

interface Run {
  label: string;
  keys: Awaited<ReturnType<typeof keysAndSessions>>;
  deep: Awaited<ReturnType<typeof deepJson>>;
  said: string[];
  signIn: Awaited<ReturnType<typeof parallelSignIn>>;
  share: Awaited<ReturnType<typeof connectionShare>>;
}

async function attackAll(label: string, root: string): Promise<Run> {
  const dataDir = await mkdtemp(join(tmpdir(), 'voicenote-r11-'));
  const service = await startService(root, dataDir);
  try {
    const deep = await deepJson(service);
    const said = await disclosure(service);
    const signIn = await parallelSignIn(service);
    const share = await connectionShare(service);
    const keys = await keysAndSessions(service);
    return { label, keys, deep, said, signIn, share };
  } finally {
    service.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    service.child.kill('SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  }
}

const runs: Run[] = [];
if (process.env.REL_BEFORE_ROOT) runs.push(await attackAll(`before (${process.env.REL_BEFORE_LABEL ?? 'earlier build'})`, process.env.REL_BEFORE_ROOT));
runs.push(await attackAll('after (this build)', ROOT));

const rows = (pick: (run: Run) => string): string => runs.map((run) => `| ${run.label} | ${pick(run)} |`).join('\n');
const markdown = `
\`voicenote serve\` as \`npm start\` runs it (SQLite, worker in the process), with
\`ALLOW_PRIVATE_URLS=false\`, load shedding off (\`MAX_EVENT_LOOP_DELAY_MS=0\`: on this shared machine it
would answer 503 to everything for a while after the first start's password hash, hiding the rest)
and the default HTTP settings, attacked over loopback once per build.

**1. Keys and sessions.** \`voicenote keys create --env test\` 15 times for the first-start account,
then (on enterprise, its rate limit raised out of the way) 110 × \`POST /api/v1/whatsapp/sessions\` with its sandbox key.

| build | keys created | the refusal | sessions: answers |
|---|---|---|---|
${runs.map((r) => `| ${r.label} | ${r.keys.keys} | ${r.keys.keyRefusal.replace(/\|/g, '\\|')} | ${r.keys.sessions} |`).join('\n')}

**2. Deep JSON.** \`{"a":{"a":…}}\` 10,000 deep (60 KB), 5 times each to \`POST /api/v1/send\` (with the key) and \`POST /dashboard/sign-in\` (none).

| build | answers | lines logged at error |
|---|---|---|
${runs.map((r) => `| ${r.label} | ${r.deep.statuses} | ${r.deep.errors} |`).join('\n')}

**3. What a refused audio host is told.** A sandbox send each; the status lookup's \`error\` once failed
(\`vm\` resolves to 127.0.0.1 on this machine; \`no-such-name.invalid\` does not resolve).

| build | status lookup says |
|---|---|
${rows((r) => r.said.join('<br>'))}

**4. Ten wrong passwords at once** for the owner's email from one address (after the first page load).

| build | answers | all ten answered after |
|---|---|---|
${runs.map((r) => `| ${r.label} | ${r.signIn.statuses} | ${r.signIn.ms} ms |`).join('\n')}

**5. Connection share.** 127.0.0.2 and 127.0.0.3 each open 600 connections sending a slow request; after 3 s,
the connections each still holds open (as its client sees it: connections the kernel queued but the
process had not taken yet count too), and what \`GET /healthz\` from a third address got.

| build | connections held | third address |
|---|---|---|
${runs.map((r) => `| ${r.label} | ${r.share.held} | ${r.share.other === 0 ? 'no answer' : r.share.other} |`).join('\n')}

What changed between the two: an account holds at most 10 active keys per environment and 100
sandbox sessions (live: 5 to 100 by plan), \`409 limit_reached\` past that; bodies nested deeper than
32 levels are refused by a walk that does not recurse; a refused audio host is told one sentence
whether or not its name resolves (the operator's log has the detail); one address checks one
email's password at a time and at most 2 hashes run at once per process, so the burst got one check
(all ten were checked at once before, holding libuv's threads for the time in the last column); one client holds at most a twentieth of the
connection places (an IPv6 client counted by its /64), so two addresses no longer fill the process.
`;

await writeReliabilitySection(
  'r11',
  'R11 — small holes: keys and sessions, deep JSON, what errors tell, parallel sign-ins, connection share',
  'npm run build && REL_BEFORE_ROOT=<built checkout of the commit before> node --import tsx bench/reliability/r11-small-holes.ts',
  markdown,
);
console.log(markdown);
