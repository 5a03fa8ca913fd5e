import assert from 'node:assert/strict';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe } from 'node:test';
import { it } from './fixtures/timed.js';
import pino from 'pino';
import { connectRedis } from '../src/api/rate-limiter.js';
import { TEST_REDIS_URL } from './fixtures/app-harness.js';

/**
 * Split mode's start: a Redis connection that is still being opened is no alarm. A busy start can make
 * the first ready check outlast the 500 ms command timeout ("Command timed out"), after which the
 * client connects again at once: no "not reachable" warning followed by "answers again" for that.
 */

function capturingLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, lines, count: (msg: RegExp) => lines.filter((l) => msg.test(String(l.msg))).length };
}

/** A proxy to Redis whose first connection answers 800 ms late (a process too busy to read it sooner). */
async function slowFirstAnswerProxy(target: URL): Promise<{ url: string; close(): Promise<void> }> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const slow = connections++ === 0;
    const upstream = net.connect({ host: target.hostname, port: Number(target.port || 6379) });
    sockets.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (slow) setTimeout(() => client.writable && client.write(chunk), 800);
      else client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target.href);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);
  return {
    url: url.href,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('Redis at start', { skip: TEST_REDIS_URL === undefined ? 'needs TEST_REDIS_URL' : false }, () => {
  it('a first ready check that times out is no alarm: no warning, no "answers again"', async () => {
    const proxy = await slowFirstAnswerProxy(new URL(TEST_REDIS_URL!));
    const logs = capturingLogger();
    const redis = await connectRedis(proxy.url, logs.logger);
    try {
      for (let i = 0; i < 200 && redis.status !== 'ready'; i++) await sleep(25);
      assert.equal(redis.status, 'ready');
      assert.equal(await redis.ping(), 'PONG');
      assert.equal(logs.count(/Redis is not reachable/), 0, JSON.stringify(logs.lines));
      assert.equal(logs.count(/Redis answers again/), 0, JSON.stringify(logs.lines));
    } finally {
      redis.disconnect();
      await proxy.close();
    }
  });

  it('a Redis that does not come up at all is still reported, once', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const logs = capturingLogger();
    const redis = await connectRedis(`redis://127.0.0.1:${port}`, logs.logger);
    try {
      for (let i = 0; i < 400 && logs.count(/Redis is not reachable/) === 0; i++) await sleep(25);
      assert.equal(logs.count(/Redis is not reachable/), 1);
      assert.match(String(logs.lines.find((l) => /not reachable/.test(String(l.msg)))?.error), /ECONNREFUSED/);
    } finally {
      redis.disconnect();
    }
  });
});
