import assert from 'node:assert/strict';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import SqliteDatabase from 'better-sqlite3';
import pino from 'pino';
import { startTelegramApi, type TelegramFake } from './fakes/telegram-api.js';
import {
  assertErrorEnvelope,
  closeSharedAudio,
  defaultSendBody,
  startTestApp,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
  withRestartableStorage,
  type TestApp,
  storedCredentials as credentialsOf,
} from './fixtures/app-harness.js';
import { startTcpProxy, type TcpProxy } from './fixtures/tcp-proxy.js';

/**
 * Storage that goes away and comes back while the service runs: an outcome that cannot be written is
 * kept and written later (never a second send), requests answer 503 with Retry-After instead of
 * hanging or failing with 500, /readyz says so, and everything recovers by itself. PostgreSQL and
 * Redis are cut through a loopback proxy (the shared servers keep running); SQLite is locked by a
 * second connection.
 */

after(async () => {
  await closeSharedAudio();
});

function capturingLogger(): { logger: pino.Logger; lines: Array<Record<string, unknown>>; count(msg: RegExp): number } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, lines, count: (msg) => lines.filter((l) => msg.test(String(l.msg))).length };
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

function deliveredTo(fake: TelegramFake, chatId: string): number {
  return fake.callsForChat(chatId).filter((c) => c.reply.status === 200).length;
}

describe('storage faults', () => {
  let fake: TelegramFake;
  before(async () => {
    fake = await startTelegramApi();
  });
  after(async () => {
    await fake.close();
  });

  it('SQLite locked by another writer: the delivered outcome is kept, written once the lock is gone, and the voice note is not sent twice', { skip: TEST_DATABASE_URL !== undefined }, async () => {
    const logs = capturingLogger();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, logger: logs.logger });
    const locker = new SqliteDatabase(path.join(t.dataDir, 'voicenote.db'));
    const chat = '600000001';
    try {
      const account = await t.createAccount();
      // The platform call is under way when another writer takes the database's write lock.
      fake.beforeReadingBody = async () => {
        if (!locker.inTransaction) locker.exec('BEGIN EXCLUSIVE');
      };
      const res = await t.send(account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: chat });
      assert.equal(res.statusCode, 202, res.body);
      const id = res.json().id as string;
      await until('the delivered outcome to be held', () => logs.count(/outcome kept in memory/) >= 1);
      assert.equal(deliveredTo(fake, chat), 1);

      // Meanwhile a send, which must write, answers 503 with Retry-After rather than 500.
      const refused = await t.send(account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '600000002' });
      assertErrorEnvelope(refused, 503, 'service_unavailable');
      assert.ok(Number(refused.headers['retry-after']) >= 1);

      locker.exec('ROLLBACK');
      fake.beforeReadingBody = undefined;
      const message = await t.waitForStatus(account.liveKey, id, ['delivered', 'failed']);
      assert.equal(message.status, 'delivered');
      assert.equal(deliveredTo(fake, chat), 1, 'sent exactly once');
      assert.equal(await credentialsOf(t, id), null);
      assert.equal(logs.count(/storage is not answering/), 1, 'one warning for the outage');
    } finally {
      fake.beforeReadingBody = undefined;
      if (locker.inTransaction) locker.exec('ROLLBACK');
      locker.close();
      await t.close();
    }
  });

  it('PostgreSQL unreachable: 503 with Retry-After, /readyz 503, the delivered outcome held and written once it returns; nothing sent twice', { skip: TEST_DATABASE_URL === undefined }, async () => {
    const proxy = await startTcpProxy(TEST_DATABASE_URL!);
    const logs = capturingLogger();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot, DATABASE_URL: proxy.through(TEST_DATABASE_URL!) }, logger: logs.logger });
    const chat = '610000001';
    try {
      const account = await t.createAccount();
      // The platform call is under way when the database goes away.
      fake.beforeReadingBody = async () => {
        proxy.cut();
      };
      const res = await t.send(account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: chat });
      assert.equal(res.statusCode, 202, res.body);
      const id = res.json().id as string;
      await until('the delivered outcome to be held', () => logs.count(/outcome kept in memory/) >= 1);
      fake.beforeReadingBody = undefined;
      assert.equal(deliveredTo(fake, chat), 1);

      const status = await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: account.liveKey });
      assertErrorEnvelope(status, 503, 'service_unavailable');
      assert.ok(Number(status.headers['retry-after']) >= 1);
      const send = await t.send(account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '610000002' });
      assertErrorEnvelope(send, 503, 'service_unavailable');
      const ready = await t.request({ method: 'GET', url: '/readyz' });
      assertErrorEnvelope(ready, 503, 'service_unavailable');

      proxy.restore();
      const message = await t.waitForStatus(account.liveKey, id, ['delivered', 'failed']);
      assert.equal(message.status, 'delivered');
      assert.equal(deliveredTo(fake, chat), 1, 'sent exactly once');
      assert.equal((await t.request({ method: 'GET', url: '/readyz' })).statusCode, 200);
      // The worker claims again by itself.
      const next = await t.send(account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '610000003' });
      assert.equal(next.statusCode, 202, next.body);
      assert.equal((await t.waitForStatus(account.liveKey, next.json().id, ['delivered', 'failed'])).status, 'delivered');
      assert.equal(await credentialsOf(t, id), null);
    } finally {
      fake.beforeReadingBody = undefined;
      proxy.restore();
      await t.close();
      await proxy.close();
    }
  });

  it('Redis unreachable: requests are counted per process at once, one warning down and one line back, shared counts again after', { skip: TEST_REDIS_URL === undefined }, async () => {
    const proxy = await startTcpProxy(TEST_REDIS_URL!);
    const logs = capturingLogger();
    const redisKeyPrefix = `voicenote-test:redis-cut-${Date.now()}`;
    await withRestartableStorage(async (reuse) => {
      // Two nodes sharing counters: A reaches Redis through the proxy, B directly.
      const a = await startTestApp({ worker: false, reuse, redisKeyPrefix, logger: logs.logger, env: { REDIS_URL: proxy.through(TEST_REDIS_URL!) } });
      const b = await startTestApp({ worker: false, reuse, redisKeyPrefix });
      try {
        const account = await a.createAccount();
        const usage = async (app: TestApp) => {
          const res = await app.request({ method: 'GET', url: '/api/v1/usage', key: account.testKey });
          assert.equal(res.statusCode, 200, res.body);
          return { limit: Number(res.headers['x-ratelimit-limit']), remaining: Number(res.headers['x-ratelimit-remaining']) };
        };
        await until('both to reach Redis', () => a.app.services.rateLimiter.shared && b.app.services.rateLimiter.shared);
        const first = await usage(a);
        assert.equal(first.remaining, first.limit - 1);

        proxy.cut();
        for (let i = 0; i < 3; i++) await usage(a); // counted in A's memory
        for (let i = 0; i < 3; i++) await usage(b); // counted in Redis: 4 there now
        await until('the warning', () => logs.count(/Redis is not reachable/) === 1);

        proxy.restore();
        await until('Redis to be back for A', () => logs.count(/Redis answers again/) === 1, 15_000);
        const after = await usage(a);
        assert.equal(after.remaining, after.limit - 5, 'the shared count (4 + this one), not A’s own');
        assert.equal(logs.count(/Redis is not reachable/), 1, 'one warning for the outage');
        assert.equal(logs.count(/Redis answers again/), 1);
      } finally {
        proxy.restore();
        await b.close();
        await a.close();
        await proxy.close();
      }
    });
  });
});
