/**
 * The server process of the HTTP bench (bench/api.ts, phase `http`): the compiled service (dist/, built
 * by `npm run build`) and nothing else, so that its RSS and CPU are the service's own. Plain JavaScript,
 * run by `node` without tsx: tsx's loader hooks run on a thread with a V8 isolate of its own, and the
 * bench script, its audio server and the TypeScript sources would sit in the measured process beside it.
 *
 * Started by bench/api.ts with an IPC channel and the storage's variables in its environment
 * (DATA_DIR, and DATABASE_URL plus BENCH_PG_SCHEMA for PostgreSQL), and `BENCH_SEND_BODY` (the JSON
 * body of POST /send). It builds the app as the bench always did (createApp, worker off, load shedding
 * off), adds the bare twins of /send and /status to the same Fastify server, creates the enterprise
 * account, the read keys (`BENCH_READ_KEYS`) and one request per key, listens on 127.0.0.1 and sends
 * `{ url, messageId, readKeys, sendKey }`. Then it answers `count` with the number of messages
 * stored, and `close` by closing the app and exiting.
 */
import { randomBytes } from 'node:crypto';

const dist = (path) => new URL(`../dist/${path}`, import.meta.url).href;
// As bin/voicenote.js does before it loads the service (unless the flag is given on node's command line).
const { applyHeapSettings } = await import(dist('heap.js'));
applyHeapSettings();
const { createApp } = await import(dist('app.js'));
const { loadConfig } = await import(dist('config.js'));
const { createAccountWithKeys } = await import(dist('admin/accounts.js'));
const { updatePlan } = await import(dist('store/accounts.js'));
const { issueKey } = await import(dist('store/keys.js'));
const { newMessageId } = await import(dist('core/ids.js'));
const { MessageIdParams, MessageStatus, SendBody, SentMessage } = await import(dist('api/schemas.js'));

const sendBody = JSON.parse(process.env.BENCH_SEND_BODY);
const readKeyCount = Number(process.env.BENCH_READ_KEYS);

const config = loadConfig({
  DATA_DIR: process.env.DATA_DIR,
  ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
  LOG_LEVEL: 'silent',
  SECRET_KEY: randomBytes(32).toString('base64'),
  AUDIO_ALLOW_PRIVATE_URLS: 'true',
  SANDBOX_LATENCY_MS: '0',
  // Load shedding off: on this shared machine a start-up stall would turn the first requests into 503s.
  MAX_EVENT_LOOP_DELAY_MS: '0',
  ...(process.env.FFMPEG_PATH ? { FFMPEG_PATH: process.env.FFMPEG_PATH } : {}),
});
const app = await createApp(config, { worker: false, ...(process.env.BENCH_PG_SCHEMA ? { pgSchema: process.env.BENCH_PG_SCHEMA } : {}) });

async function inject(method, url, key, body) {
  const res = await app.server.app.inject({
    method,
    url,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
  });
  if (res.statusCode >= 300) throw new Error(`${method} ${url} answered ${res.statusCode}: ${res.body}`);
  return res.json();
}

// The baselines: routes in the same server taking the same JSON through the same schemas and answering
// the same JSON, with nothing behind them (no key, no limits, no storage). Added before the first
// request: Fastify takes no routes once ready.
const statusBody = {};
app.server.app.post('/bench/bare/send', { schema: { body: SendBody, response: { 202: SentMessage } } }, async (request, reply) => {
  const now = Date.now();
  return reply.code(202).send({
    id: newMessageId(now),
    status: 'queued',
    platform: request.body.platform,
    recipient: request.body.recipient,
    created_at: new Date(now).toISOString(),
  });
});
app.server.app.get('/bench/bare/status/:message_id', { schema: { params: MessageIdParams, response: { 200: MessageStatus } } }, async () => statusBody.value);

// An enterprise account whose send rate limit and quota never get in the way.
const db = app.services.db.kysely;
const created = await createAccountWithKeys(db, { name: 'bench', plan: 'enterprise' });
await updatePlan(db, created.account.id, { plan: 'enterprise', rateLimit: 10_000_000, quota: 10_000_000 });
const sendKey = created.testKey.secret;
const messageId = (await inject('POST', '/api/v1/send', sendKey, sendBody)).id;
statusBody.value = await inject('GET', `/api/v1/status/${messageId}`, sendKey);
await app.server.app.listen({ port: 0, host: '127.0.0.1' });

// The read bucket is per key whatever the plan: GET /status is spread over keys of the same account.
const readKeys = [sendKey];
while (readKeys.length < readKeyCount) readKeys.push((await issueKey(db, created.account.id, 'test')).secret);
// One request per key first: it records the key's last use, a write that would otherwise land in the run.
for (const key of readKeys) await inject('GET', `/api/v1/status/${messageId}`, key);
await inject('POST', '/api/v1/send', sendKey, sendBody); // and the send key's

process.on('message', async (command) => {
  if (command === 'count') {
    const row = await db.selectFrom('messages').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
    process.send({ count: Number(row.n) });
  } else if (command === 'close') {
    await app.close();
    process.exit(0);
  }
});
process.send({ url: `http://127.0.0.1:${app.server.app.server.address().port}`, messageId, readKeys, sendKey });
