/**
 * R4: REL_REQUESTS (10,000) generated and mutated requests (fast-check) over every endpoint of a real
 * `serve --no-worker` process on PostgreSQL + Redis, sent over loopback with node:http (any method,
 * header, body bytes). Every answer is judged against the OpenAPI document the process serves.
 * Shows: 0 × 5xx; 100 % documented envelope; every answer valid against the document.
 *   npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r4-api-fuzz.ts
 */
import { request } from 'node:http';
import fc from 'fast-check';
import { fuzzRequest, type FuzzRequest } from '../../test/reliability/api-arbitraries.js';
import { createResponseChecker } from '../../test/reliability/openapi-check.js';
import { createAccount } from './cluster.js';
import { writeReliabilitySection } from './report.js';
import { withCluster } from './run.js';

const REQUESTS = Number(process.env.REL_REQUESTS ?? 10_000);

function send(base: string, req: FuzzRequest): Promise<{ status: number; contentType: string | undefined; body: string; requestId: unknown }> {
  return new Promise((resolve, reject) => {
    const url = new URL(base);
    const r = request(
      { host: url.hostname, port: url.port, method: req.method, path: req.url, headers: { ...req.headers, ...(req.body ? { 'content-length': String(req.body.length) } : {}) }, timeout: 15_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], body: Buffer.concat(chunks).toString('utf8'), requestId: res.headers['x-request-id'] }));
        res.on('error', reject);
      },
    );
    r.on('timeout', () => r.destroy(new Error('no answer in 15 s')));
    r.on('error', reject);
    if (req.body) r.write(req.body);
    r.end();
  });
}

await withCluster({ extraEnv: { SANDBOX_AUTO_SCAN_SECONDS: '1' } }, async ({ cluster, telegram, audio }) => {
  await cluster.start('api-1', 'api');
  const base = cluster.apis()[0]!;
  const { testKey, liveKey } = createAccount(cluster);
  const auth = { authorization: `Bearer ${testKey}`, 'content-type': 'application/json' };
  const session = (await (await fetch(`${base}/api/v1/whatsapp/sessions`, { method: 'POST', headers: { authorization: `Bearer ${testKey}` } })).json()) as { session_id: string };
  const sent = (await (await fetch(`${base}/api/v1/send`, { method: 'POST', headers: auth, body: JSON.stringify({ platform: 'telegram', recipient: '123456789', audio_url: audio.url, session: { bot_token: '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ' } }) })).json()) as { id: string };
  const doc = await (await fetch(`${base}/api/v1/openapi.json`)).json();
  const checker = createResponseChecker(doc);
  const ctx = { operations: checker.operations, keys: { test: testKey, live: liveKey }, ids: [session.session_id, sent.id], audioUrl: audio.url };
  const byStatus: Record<string, number> = {};
  const problems = new Map<string, { count: number; example: string }>();
  let fiveXx = 0;
  let envelopes = 0;
  let errors = 0;
  let transportFailures = 0;
  let noRequestId = 0;
  const t0 = Date.now();
  const samples = fc.sample(fuzzRequest(ctx), { numRuns: REQUESTS });
  for (const req of samples) {
    let res;
    try {
      res = await send(base, req);
    } catch (err) {
      transportFailures++;
      const key = `transport: ${(err as Error).message}`;
      problems.set(key, { count: (problems.get(key)?.count ?? 0) + 1, example: `${req.method} ${req.url.slice(0, 120)}` });
      continue;
    }
    byStatus[res.status] = (byStatus[res.status] ?? 0) + 1;
    if (res.status >= 500) fiveXx++;
    if (typeof res.requestId !== 'string') noRequestId++;
    const found = checker.check({ method: req.method, url: req.url, status: res.status, contentType: res.contentType, body: res.body });
    if (res.status >= 400) {
      errors++;
      if (!found.some((p) => /envelope|error body|error has keys|error\.|not JSON/.test(p))) envelopes++;
    }
    for (const p of found) {
      const key = p.slice(0, 140);
      problems.set(key, { count: (problems.get(key)?.count ?? 0) + 1, example: `${req.method} ${req.url.slice(0, 120)} → ${res.status} ${res.body.slice(0, 160)}` });
    }
  }
  const ms = Date.now() - t0;
  const invalid = [...problems.values()].reduce((n, p) => n + p.count, 0);
  const md = `| figure | value |
|---|---|
| generated requests | ${REQUESTS} over ${checker.operations.length} documented operations and unknown paths (methods, paths with foreign and hostile ids, keys, content types, idempotency keys, request ids, bodies: valid, mutated, random JSON, bytes, oversized, UTF-16) in ${(ms / 1000).toFixed(0)} s |
| answers by status | ${Object.entries(byStatus).sort().map(([k, v]) => `${k}: ${v}`).join(', ')} |
| 5xx | **${fiveXx}** |
| error answers in the documented envelope | **${envelopes} / ${errors}** (${errors ? ((100 * envelopes) / errors).toFixed(1) : '100'} %) |
| answers not valid against the served OpenAPI document | **${invalid}** |
| answers without X-Request-Id / requests without an answer | ${noRequestId} / ${transportFailures} |

${problems.size === 0 ? 'No problem found.' : `Problems found:\n\n${[...problems.entries()].map(([k, v]) => `- ${v.count} × ${k} — e.g. \`${v.example.replace(/`/g, "'")}\``).join('\n')}`}

The check flags any 500, and another 5xx only where the operation does not document it (a 503 would be load
shedding or storage away, documented for every operation). 429s are the per-key and per-IP limits doing their job.`;
  console.log(md);
  await writeReliabilitySection('r4', 'R4 — generated requests against the served OpenAPI document', 'npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r4-api-fuzz.ts', md);
});
