/** The HTTP phase: each real endpoint measured right after its bare twin, in a server process of its own. */
import { READ_REQUESTS_PER_MINUTE } from '../../src/core/plans.js';
import type { LoadRequest } from '../loadgen.js';
import { measure, procStats, rssSampler } from './load.js';
import { startHttpServer } from './processes.js';
import { READ_RPS_CEILING, SECONDS, type Storage, WARMUP_SECONDS } from './settings.js';
import { openStorage } from './storage.js';
import type { Endpoint } from './types.js';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { SQLITE_FILE } from '../../src/store/db.js';

export async function runHttp(storage: Storage, pgUrl: string | undefined, sendBody: Record<string, unknown>) {
  const httpStorage = await openStorage(storage, pgUrl);
  try {
    // The read bucket is READ_REQUESTS_PER_MINUTE per key whatever the plan: spread GET /status over
    // enough keys of the same account (all see the message) that 429s never happen.
    const keyCount = Math.max(1, Math.ceil(((SECONDS + WARMUP_SECONDS) * READ_RPS_CEILING) / (READ_REQUESTS_PER_MINUTE * 0.9)));
    const server = await startHttpServer(httpStorage, sendBody, keyCount);
    try {
      const { url, messageId, readKeys, sendKey } = server;
      const pid = server.child.pid!;
      const httpStart = (await procStats(pid)).rss;
      const rss = rssSampler(pid, httpStart);

      const auth = (key: string) => ({ authorization: `Bearer ${key}` });
      const json = { 'content-type': 'application/json' };
      const sendRequest = (path: string, headers: Record<string, string>): LoadRequest => ({ method: 'POST', path, headers: { ...headers, ...json }, body: JSON.stringify(sendBody) });
      const endpoints: Endpoint[] = [];
      const run = async (label: string, what: string, baseline: number, requests: LoadRequest[]) => {
        console.error(`[${storage}] ${label}`);
        endpoints.push({ label, what, baseline, ...(await measure(pid, url, requests)) });
      };
      await run('GET /healthz', 'framework floor: no body, no schema', 0, [{ method: 'GET', path: '/healthz' }]);
      await run('GET /bench/bare/status/:id', 'baseline: same params and response schema, no auth, no storage', 1, [
        { method: 'GET', path: `/bench/bare/status/${messageId}` },
      ]);
      await run(
        'GET /api/v1/status/:id',
        'auth + rate limit + usage headers + one read',
        1,
        readKeys.map((key) => ({ method: 'GET', path: `/api/v1/status/${messageId}`, headers: auth(key) })),
      );
      await run('POST /bench/bare/send', 'baseline: same body and response schema, no auth, no storage', 3, [sendRequest('/bench/bare/send', {})]);
      await run('POST /api/v1/send', 'auth + rate limit + validation + sealed credentials + durable write', 3, [
        sendRequest('/api/v1/send', auth(sendKey)),
      ]);
      const httpMax = await rss.stop();
      const peak = (await procStats(pid)).hwm;
      const rowsAfterSendLoad = (await server.request('count')).count;
      // How long the write-ahead log grew under the send load (its file never shrinks while the app runs).
      const walBytes = storage === 'sqlite' ? (await stat(join(httpStorage.dataDir, `${SQLITE_FILE}-wal`)).catch(() => undefined))?.size : undefined;
      return { endpoints, readKeys: readKeys.length, rowsAfterSendLoad, ...(walBytes !== undefined ? { walBytes } : {}), httpStart, httpMax, peak };
    } finally {
      await server.close();
    }
  } finally {
    await httpStorage.cleanup();
  }
}
