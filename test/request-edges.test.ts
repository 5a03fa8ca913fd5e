/**
 * Edges of requests that used to end badly: a NUL character in a query value or cookie (a 500 on
 * PostgreSQL), a rate-limited request with a bad key (answered 429 but logged and counted as 401),
 * and a full disk (ready while it could not write, then "storage is not reachable").
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { isDiskFull } from '../src/store/disk-full.js';
import { assertErrorEnvelope, closeSharedAudio, STORAGE_LABEL, startTestApp } from './fixtures/app-harness.js';
import { captureLogs } from './fixtures/log-capture.js';
import { createDashboardAccount, FormClient } from './fixtures/dashboard-harness.js';

after(closeSharedAudio);

describe(`NUL characters in query values and cookies (${STORAGE_LABEL})`, () => {
  test('the API answers 400 invalid_request naming the parameter, on every storage', async (t) => {
    const app = await startTestApp({ worker: false });
    t.after(() => app.close());
    const account = await app.createAccount();
    for (const [name, query] of [
      ['recipient', 'recipient=%00'],
      ['recipient', 'recipient=12%0034'],
      ['starting_after', 'starting_after=msg_%00'],
      ['ending_before', 'ending_before=%00'],
      ['platform', 'platform=telegram%00'],
      ['created_gte', 'created_gte=2024%00'],
    ] as const) {
      const res = await app.request({ method: 'GET', url: `/api/v1/messages?${query}`, key: account.testKey });
      const error = assertErrorEnvelope(res, 400, 'invalid_request');
      assert.deepEqual(error.details, { field: name }, query);
    }
    const deliveries = await app.request({ method: 'GET', url: '/api/v1/webhook_endpoints/we_x/deliveries?starting_after=%00', key: account.testKey });
    assert.ok(deliveries.statusCode < 500, deliveries.body);
    // Still fine without one.
    assert.equal((await app.request({ method: 'GET', url: '/api/v1/messages?recipient=123', key: account.testKey })).statusCode, 200);
  });

  test('the dashboard: a filter or cursor with a NUL is a 400 page; a session cookie with one is no session', async (t) => {
    const app = await startTestApp({ worker: false });
    t.after(() => app.close());
    const account = await createDashboardAccount(app);
    const client = new FormClient(app);
    assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
    for (const query of ['recipient=%00', 'starting_after=%00', 'ending_before=msg_%00', 'status=%00', 'from=%00']) {
      const res = await client.get(`/dashboard/messages?${query}`);
      assert.equal(res.statusCode, 400, `${query}: ${res.body.slice(0, 200)}`);
    }
    assert.equal((await client.get('/dashboard/messages?recipient=123')).statusCode, 200);
    const forged = await app.request({ method: 'GET', url: '/dashboard/messages', headers: { cookie: 'vn_session=abc%00def' } });
    assert.ok([302, 303].includes(forged.statusCode), `${forged.statusCode}: ${forged.body.slice(0, 200)}`);
  });
});

describe(`a rate-limited request with a bad key (${STORAGE_LABEL})`, () => {
  test('answered 429, logged and counted as 429, without a "Reply was already sent" warning', async (t) => {
    const { lines, logger } = captureLogs();
    const token = 'metrics-token-0123456789';
    const app = await startTestApp({ worker: false, logger, env: { METRICS_TOKEN: token } });
    t.after(() => app.close());
    const badKey = `sk_test_${'a'.repeat(32)}`;
    // With Redis, the counts are shared only once its connection is ready; a request before that is
    // counted by the process alone, and the 302nd would then not be the shared count's 302nd.
    const { redis, rateLimiter } = app.app.services;
    for (const started = Date.now(); redis && !rateLimiter.shared; ) {
      assert.ok(Date.now() - started < 5_000, 'Redis was not ready within 5 s');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    let last;
    // The per-IP bucket of requests without a valid key holds 300 a minute. An address of this run's own:
    // with Redis the buckets outlive the app, and another run's window ending midway reset the count.
    const address = `198.18.${Math.floor(Math.random() * 256)}.${1 + Math.floor(Math.random() * 254)}`;
    for (let i = 0; i < 302; i++) last = await app.request({ method: 'GET', url: '/api/v1/usage', key: badKey, remoteAddress: address });
    assertErrorEnvelope(last!, 429, 'rate_limited');
    const requestId = last!.headers['x-request-id'];
    const completed = lines.find((l) => l.request_id === requestId && l.msg === 'request completed') as { res?: { statusCode?: number } } | undefined;
    assert.equal(completed?.res?.statusCode, 429);
    assert.deepEqual(
      lines.filter((l) => /already sent/i.test(String(l.msg))),
      [],
      'no warning',
    );
    const metrics = await app.request({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${token}` } });
    const count = (status: number): number =>
      Number(new RegExp(`voicenote_http_requests_total\\{method="GET",route="/api/v1/usage",status="${status}"\\} (\\d+)`).exec(metrics.body)?.[1] ?? 0);
    assert.equal(count(429), 2);
    assert.equal(count(401), 300);
  });
});

describe('a full disk', () => {
  test('storage errors that mean a full disk are told apart (SQLite, a file write, PostgreSQL)', () => {
    const coded = (code: string, message = 'x'): Error => Object.assign(new Error(message), { code });
    assert.ok(isDiskFull(coded('SQLITE_FULL', 'database or disk is full')));
    assert.ok(isDiskFull(coded('ENOSPC')));
    assert.ok(isDiskFull(coded('53100', 'could not extend file "base/16384/16385": No space left on device')));
    assert.ok(!isDiskFull(coded('SQLITE_BUSY')));
    assert.ok(!isDiskFull(coded('ECONNREFUSED')));
  });

  const root = process.getuid?.() === 0 && process.platform === 'linux';
  test('SQLite on a disk that fills up: /readyz and the API say "disk full" (503), and recover once space is freed', { skip: root ? false : 'needs root (mounts a small tmpfs)' }, async (t) => {
    const mountPoint = await mkdtemp(path.join(tmpdir(), 'voicenote-full-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', mountPoint]);
    t.after(async () => {
      execFileSync('umount', ['-l', mountPoint]);
      await rm(mountPoint, { recursive: true, force: true });
    });
    const dataDir = path.join(mountPoint, 'data');
    // SQLite whatever storage the suite runs on: its file is what fills the disk.
    const app = await startTestApp({ worker: false, reuse: { dataDir }, env: { DATA_DIR: dataDir, DATABASE_URL: '' } });
    t.after(() => app.close());
    const account = await app.createAccount();
    assert.equal((await app.request({ method: 'GET', url: '/readyz' })).statusCode, 200);

    // Fill the disk: a file as large as what is left.
    const filler = path.join(mountPoint, 'filler');
    await fillDisk(filler);
    const ready = await app.request({ method: 'GET', url: '/readyz' });
    const readyError = assertErrorEnvelope(ready, 503, 'service_unavailable');
    assert.match(readyError.message, /disk full/);
    // A write that needs pages it cannot get.
    let sent;
    for (let i = 0; i < 200; i++) {
      sent = await app.send(account.testKey, { platform: 'telegram', recipient: '123456789', audio_url: `${app.voiceUrl}?${'x'.repeat(1500)}${i}`, caption: 'y'.repeat(1000), session: { bot_token: '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ' } });
      if (sent.statusCode !== 202) break;
    }
    const sendError = assertErrorEnvelope(sent!, 503, 'service_unavailable');
    assert.match(sendError.message, /disk full/);
    assert.doesNotMatch(sendError.message, /not reachable/);
    assert.ok(Number(sent!.headers['retry-after']) >= 1);

    await rm(filler);
    assert.equal((await app.request({ method: 'GET', url: '/readyz' })).statusCode, 200, 'ready again once space is freed');
    assert.equal((await app.send(account.testKey, { platform: 'telegram', recipient: '123456789', audio_url: app.voiceUrl, session: { bot_token: '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ' } })).statusCode, 202);
  });
});

/** Writes `file` until the disk is out of space (ENOSPC ends it). */
async function fillDisk(file: string): Promise<void> {
  const handle = await open(file, 'w');
  try {
    for (const size of [1024 * 1024, 4096]) {
      const chunk = Buffer.alloc(size, 1);
      try {
        for (;;) await handle.write(chunk);
      } catch (error) {
        if ((error as { code?: string }).code !== 'ENOSPC') throw error;
      }
    }
  } finally {
    await handle.close();
  }
}
