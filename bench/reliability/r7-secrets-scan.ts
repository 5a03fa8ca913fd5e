/**
 * R7: secrets at rest. A run of its own (1 API + 1 worker on PostgreSQL + Redis) handles every kind
 * of secret a process can see here: API keys, Telegram bot tokens (live deliveries to the fake Bot
 * API), LinkedIn cookies (sandbox sends carry them sealed), a webhook signing secret. Then it scans,
 * for each secret in clear, hex, UTF-16, URL-encoded and base64: this database's files under
 * PostgreSQL's data directory, the WAL segments written meanwhile, every process log and data
 * directory (audio cache). It also scans the logs and data of every earlier reliability run still in
 * /tmp (R1–R3) for anything shaped like an API key or a bot token.
 *   npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r7-secrets-scan.ts
 */
import { randomBytes } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeSecret, filesUnder, scanFiles } from '../../test/reliability/secret-scan.js';
import { createAccount, sleep } from './cluster.js';
import { waitSettled } from './load.js';
import { PG_DB, query } from './postgres.js';
import { writeReliabilitySection } from './report.js';
import { withCluster } from './run.js';

const started = Date.now();
await withCluster({ extraEnv: { SANDBOX_LATENCY_MS: '0' } }, async ({ cluster, telegram, audio }) => {
  await cluster.start('api-1', 'api');
  await cluster.start('worker-1', 'worker');
  const base = cluster.apis()[0]!;
  const { testKey, liveKey } = createAccount(cluster);
  const botTokens = Array.from({ length: 50 }, (_, i) => `${800000000 + i}:${randomBytes(27).toString('base64url')}`);
  const cookies = Array.from({ length: 10 }, () => ({ li_at: `AQEDAQ${randomBytes(24).toString('base64url')}`, csrf_token: `ajax:${BigInt(`0x${randomBytes(8).toString('hex')}`).toString()}` }));
  const post = (key: string, body: unknown, path = '/api/v1/send') =>
    fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  for (const [i, token] of botTokens.entries()) await post(liveKey, { platform: 'telegram', recipient: String(9000 + i), audio_url: audio.url, session: { bot_token: token } });
  for (const c of cookies) await post(testKey, { platform: 'linkedin', recipient: 'jane-smith-a1b2c3', audio_url: audio.url, session: c });
  const hook = await post(testKey, { url: 'https://example.com/hooks/voicenote' }, '/api/v1/webhook_endpoints');
  const webhookSecret = hook.status < 300 ? ((await hook.json()) as { secret?: string }).secret : undefined;
  const settled = await waitSettled(3 * 60_000);
  await sleep(1_000);
  const secrets = [testKey, liveKey, ...botTokens, ...cookies.flatMap((c) => [c.li_at, c.csrf_token]), ...(webhookSecret ? [webhookSecret] : [])];

  const dataDirectory = (await query<{ data_directory: string }>('show data_directory'))[0]!.data_directory;
  const dbOid = (await query<{ oid: number }>('select oid::int from pg_database where datname = $1', [PG_DB]))[0]!.oid;
  const dbFiles = await filesUnder(join(dataDirectory, 'base', String(dbOid)));
  const walFiles = [];
  for (const name of await readdir(join(dataDirectory, 'pg_wal')).catch(() => [] as string[])) {
    const path = join(dataDirectory, 'pg_wal', name);
    const st = await stat(path).catch(() => null);
    if (st?.isFile() && st.mtimeMs >= started - 1_000) walFiles.push(path);
  }
  const runFiles = await filesUnder(cluster.runDir);
  const logs = runFiles.filter((f) => f.endsWith('.log'));
  const cache = runFiles.filter((f) => f.includes('audio-cache'));
  const scan = await scanFiles([...dbFiles, ...walFiles, ...runFiles], secrets);

  // Earlier runs (R1–R3): their secrets are gone with their scripts, so look for their shapes.
  const earlier = (await readdir(tmpdir())).filter((n) => n.startsWith('voicenote-rel-')).map((n) => join(tmpdir(), n)).filter((d) => d !== cluster.runDir);
  const shaped: string[] = [];
  let banner = 0;
  let earlierFiles = 0;
  for (const dir of earlier) {
    for (const file of await filesUnder(dir)) {
      earlierFiles++;
      let text = (await readFile(file).catch(() => Buffer.alloc(0))).toString('latin1');
      // The owner's keys, printed once at a first start on stderr by design (the scripts keep stderr in the same file).
      text = text.replace(/^(sandbox key|live key) +key_\S+ +sk_(test|live)_\S+$/gm, () => {
        banner++;
        return '';
      });
      for (const m of text.matchAll(/sk_(?:test|live)_[0-9A-Za-z]{32}|\b\d{6,12}:[A-Za-z0-9_-]{35,}/g)) shaped.push(`${file}: ${describeSecret(m[0])}`);
    }
  }
  const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;
  const md = `| figure | value |
|---|---|
| secrets used | ${secrets.length}: 2 API keys, ${botTokens.length} bot tokens (live deliveries: ${settled.byStatus.delivered ?? 0} delivered, ${settled.byStatus.failed ?? 0} failed), ${cookies.length} \`li_at\` + ${cookies.length} \`csrf_token\`, ${webhookSecret ? 1 : 0} webhook signing secret |
| files scanned | ${dbFiles.length} database files, ${walFiles.length} WAL segments, ${logs.length} process logs, ${cache.length} audio-cache files, ${runFiles.length - logs.length - cache.length} other data files; ${mb(scan.bytes)} |
| encodings looked for | clear, hex, UTF-16, URL-encoded, base64 and base64url at every alignment |
| secrets found | **${scan.findings.length}** |
| earlier runs' logs and data (R1–R3 …) scanned for API-key and bot-token shapes | ${earlier.length} runs, ${earlierFiles} files: **${shaped.length}** found (besides ${banner} owner keys in the first-start block each fresh database prints once on stderr, by design) |

${scan.findings.length + shaped.length === 0 ? 'Nothing found in clear.' : `Found:\n\n${[...scan.findings.map((f) => `- ${f.file}: ${describeSecret(f.secret)} (${f.encoding})`), ...shaped.map((s) => `- ${s}`)].join('\n')}`}

Not covered here: WhatsApp keys (a live WhatsApp session needs the real WhatsApp; the suite's
secrets-in-logs test checks them sealed at rest with a fake socket).`;
  console.log(md);
  await writeReliabilitySection('r7', 'R7 — secrets at rest', 'npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r7-secrets-scan.ts', md);
});
