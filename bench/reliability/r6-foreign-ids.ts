/**
 * R6: every id-taking operation of the served OpenAPI document, on a real `serve` process, called
 * with another account's ids and with the other environment's. Shows: 100 % 404, nothing changed.
 *   npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r6-foreign-ids.ts
 */
import { callWithForeignIds, type Owned } from '../../test/reliability/cross-tenant.js';
import { createAccount } from './cluster.js';
import { writeReliabilitySection } from './report.js';
import { withCluster } from './run.js';

await withCluster({ extraEnv: { SANDBOX_AUTO_SCAN_SECONDS: '0' } }, async ({ cluster, telegram, audio }) => {
  await cluster.start('api-1', 'api');
  const base = cluster.apis()[0]!;
  const caller = {
    async request(method: string, url: string, key: string, body?: unknown) {
      const res = await fetch(`${base}${url}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, body: await res.text() };
    },
  };
  const json = async (method: string, url: string, key: string, body?: unknown) => {
    const r = await caller.request(method, url, key, body);
    return { status: r.status, data: r.body ? (JSON.parse(r.body) as Record<string, any>) : {} };
  };
  async function resources(key: string, env: 'test' | 'live', label: string): Promise<Owned> {
    const ids: Record<string, string[]> = { message_id: [], session_id: [], endpoint_id: [], delivery_id: [] };
    const sent = await json('POST', '/api/v1/send', key, { platform: 'telegram', recipient: '123456789', audio_url: audio.url, session: { bot_token: '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ' } });
    ids.message_id!.push(sent.data.id);
    if (env === 'test') {
      const s = await json('POST', '/api/v1/whatsapp/sessions', key);
      await json('POST', `/api/v1/whatsapp/sessions/${s.data.session_id}/simulate`, key, { event: 'scan' });
      ids.session_id!.push(s.data.session_id);
    }
    const ep = await json('POST', '/api/v1/webhook_endpoints', key, { url: 'https://example.com/hooks/voicenote' });
    if (ep.status < 300) {
      ids.endpoint_id!.push(ep.data.id);
      await json('POST', `/api/v1/webhook_endpoints/${ep.data.id}/test`, key, {});
      const d = await json('GET', `/api/v1/webhook_endpoints/${ep.data.id}/deliveries`, key);
      if (d.data.data?.[0]?.id) ids.delivery_id!.push(d.data.data[0].id);
    }
    return { label, key, ids };
  }
  const a = createAccount(cluster, 'account-a');
  const b = createAccount(cluster, 'account-b');
  const aTest = await resources(a.testKey, 'test', 'A/test');
  const aLive = await resources(a.liveKey, 'live', 'A/live');
  const doc = (await (await fetch(`${base}/api/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
  const operations = Object.entries(doc.paths).flatMap(([template, ops]) => Object.keys(ops).map((method) => ({ method: method.toUpperCase(), template })));
  const r1 = await callWithForeignIds(caller, operations, aTest, [
    { label: 'B/test', key: b.testKey },
    { label: 'B/live', key: b.liveKey },
    { label: 'A/live', key: a.liveKey },
  ]);
  const r2 = await callWithForeignIds(caller, operations, aLive, [
    { label: 'B/test', key: b.testKey },
    { label: 'B/live', key: b.liveKey },
    { label: 'A/test', key: a.testKey },
  ]);
  let unchanged = 0;
  let checkedUnchanged = 0;
  for (const owned of [aTest, aLive]) {
    for (const id of owned.ids.message_id!) (checkedUnchanged++, (await json('GET', `/api/v1/status/${id}`, owned.key)).status === 200 && unchanged++);
    for (const id of owned.ids.session_id!) (checkedUnchanged++, (await json('GET', `/api/v1/whatsapp/sessions/${id}`, owned.key)).data.status === 'connected' && unchanged++);
    for (const id of owned.ids.endpoint_id!) (checkedUnchanged++, (await json('GET', `/api/v1/webhook_endpoints/${id}`, owned.key)).status === 200 && unchanged++);
  }
  const calls = r1.calls + r2.calls;
  const notFound = r1.notFound + r2.notFound;
  const ops = [...new Set([...r1.operations, ...r2.operations])];
  const md = `| figure | value |
|---|---|
| id-taking operations in the served document, all called | ${ops.length}: ${ops.map((o) => `\`${o}\``).join(', ')} |
| calls with foreign ids (another account's, test ↔ live) | ${calls} |
| answered 404 | **${notFound} (${calls ? ((100 * notFound) / calls).toFixed(1) : '0'} %)** |
| owner's resources unchanged afterwards | ${unchanged} / ${checkedUnchanged} |

${[...r1.others, ...r2.others].length ? `Not 404:\n\n${[...r1.others, ...r2.others].map((o) => `- ${o}`).join('\n')}` : 'Every call was a 404.'}`;
  console.log(md);
  await writeReliabilitySection('r6', 'R6 — ids of another account or environment', 'npm run build && flock -s /tmp/voicenote-services.lock node --import tsx bench/reliability/r6-foreign-ids.ts', md);
});
