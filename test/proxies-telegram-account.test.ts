import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeAll } from './fixtures/close-all.js';
import { assertErrorEnvelope, closeSharedAudio, STORAGE_LABEL, startTestApp, withRestartableStorage, type TestApp } from './fixtures/app-harness.js';
import { startSocks5Proxy, type TestProxy } from './fixtures/proxies.js';
import { proxyScene } from './fixtures/proxy-scene.js';
import { FakeTelegram } from './fakes/telegram-mtproto.js';
import type { WebhookReceiver } from './fakes/webhook-receiver.js';
import { decodeQr, eventually, JANE, sendersOf, sendFrom } from './fixtures/telegram-account.js';
import { gramjsProxyOf, type TelegramClientFactory, type TelegramClientOptions } from '../src/platforms/telegram/account/client.js';
import { createGramjsClientFactory } from '../src/platforms/telegram/account/gramjs-client.js';

/**
 * A Telegram account's own proxy (docs/proxies.md): SOCKS5 only, given to GramJS as its `proxy`
 * (extensions/PromisedNetSockets.js hands it to the `socks` package). The accounts run against the
 * suite's MTProto fake (test/fakes/telegram-mtproto.ts), which records the options each connection was
 * made with; the check when set and before each connection goes through real SOCKS5 proxies on loopback
 * (test/fixtures/proxies.ts) to a TCP server standing for Telegram's data centre (TELEGRAM_DC_ADDRESS).
 * The last test connects the real GramJS client through a SOCKS5 proxy to that server.
 */

const API = '/api/v1';
const PASSWORD = 'tg-Pr0xy-Secret-Pa55';

after(closeSharedAudio);

/** A TCP server in place of a data centre: it records the remote port of each connection and says nothing. */
async function startFakeDc(options: { hangUp?: boolean; host?: string; port?: number } = {}): Promise<{ port: number; connections: number[]; close(): Promise<void> }> {
  const connections: number[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    connections.push(socket.remotePort!);
    sockets.add(socket);
    socket.on('error', () => undefined).on('close', () => sockets.delete(socket));
    // Hung up on its first bytes, as a data centre that does not take this client would.
    socket.on('data', () => (options.hangUp ? socket.destroy() : undefined));
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe(`a proxy per Telegram account (${STORAGE_LABEL})`, () => {
  let world: FakeTelegram;
  let dc: Awaited<ReturnType<typeof startFakeDc>>;
  let socksA: TestProxy;
  let socksB: TestProxy;
  let httpProxy: TestProxy;
  let receiver: WebhookReceiver;
  const scene = proxyScene(PASSWORD);
  const { credentials, logs, seen } = scene;
  /** Every connection the apps made, by instance, with the options GramJS would have been given. */
  const made: Array<{ instance: string; options: TelegramClientOptions }> = [];

  before(async () => {
    world = new FakeTelegram();
    dc = await startFakeDc();
    ({ socksProxy: socksA, httpProxy, receiver } = await scene.start());
    socksB = await startSocks5Proxy({ credentials });
  });

  after(() => scene.close(dc, socksB));

  const recording = (instance: string): TelegramClientFactory => {
    const factory = world.factory(instance);
    return (options) => {
      made.push({ instance, options });
      return factory(options);
    };
  };
  const app = (instance: string, reuse: { dataDir: string; pgSchema?: string; secretKey: string }) =>
    startTestApp({
      reuse,
      logger: logs.logger,
      env: { TELEGRAM_API_ID: String(world.apiId), TELEGRAM_API_HASH: world.apiHash, TELEGRAM_DC_ADDRESS: `127.0.0.1:${dc.port}` },
      telegramClientFactory: recording(instance),
      telegramAccounts: { qrWaitMs: 3_000, leaseMs: 1_500, renewMs: 300, takeoverScanMs: 200 },
    });
  const expectedProxy = (proxy: TestProxy) => ({ ip: '127.0.0.1', port: proxy.port, socksType: 5, username: 'agency', password: PASSWORD, timeout: 10 });

  it('links through its SOCKS5 proxy, refuses an HTTP one, follows PATCH /senders/{id}, and waits disconnected (proxy_unreachable) for a proxy that is down, never direct', async () => {
    await withRestartableStorage(async (reuse) => {
      let key: string;
      let sessionId: string;
      let senderId: string;
      const one: TestApp = await app('one', reuse);
      try {
        const account = await one.createAccount();
        key = account.liveKey;
        const hook = await one.request({ method: 'POST', url: `${API}/webhook_endpoints`, key, body: { url: receiver.url(), events: ['sender.updated'] } });
        assert.equal(hook.statusCode, 201, hook.body);

        // An HTTP CONNECT proxy cannot carry MTProto for GramJS: refused, naming the field and the schemes.
        const http = await one.request({ method: 'POST', url: `${API}/telegram/sessions`, key, body: { proxy: httpProxy.url } });
        const refused = assertErrorEnvelope(http, 422, 'invalid_parameter');
        assert.equal(refused.details.field, 'proxy');
        assert.match(refused.message, /socks5:\/\/ or socks5h:\/\//);
        assert.equal(httpProxy.tunnels.length, 0);

        const created = await one.request({ method: 'POST', url: `${API}/telegram/sessions`, key, body: { proxy: socksA.url } });
        seen.push(created.body);
        assert.equal(created.statusCode, 201, created.body);
        sessionId = created.json().session_id;
        // The check went through the proxy to the data centre; the linking connection was made with it.
        assert.ok(socksA.tunnels.some((tunnel) => tunnel.destination === `127.0.0.1:${dc.port}`), JSON.stringify(socksA.tunnels));
        const socksPorts = socksA.upstreamPorts();
        assert.ok(dc.connections.every((port) => socksPorts.has(port)), 'nothing reached the data centre directly');
        assert.deepEqual(made.at(-1)!.options.proxy, expectedProxy(socksA));

        world.scan(decodeQr(created.json().qr_code), JANE);
        await eventually(async () => (await one.request({ method: 'GET', url: `${API}/telegram/sessions/${sessionId}`, key })).json().status === 'connected', 'linking');
        const [sender] = await sendersOf(one, key);
        seen.push(JSON.stringify(sender));
        assert.equal(sender!.kind, 'telegram_account');
        assert.equal(sender!.proxy, `socks5://127.0.0.1:${socksA.port}`);
        senderId = sender!.id;

        const httpPatch = await one.request({ method: 'PATCH', url: `${API}/senders/${senderId}`, key, body: { proxy: httpProxy.url } });
        assert.equal(assertErrorEnvelope(httpPatch, 422, 'invalid_parameter').details.field, 'proxy');

        // Another proxy: the held connection is made again with it.
        const before = made.length;
        const patched = await one.request({ method: 'PATCH', url: `${API}/senders/${senderId}`, key, body: { proxy: socksB.url.replace('socks5://', 'socks5h://') } });
        seen.push(patched.body);
        assert.equal(patched.statusCode, 200, patched.body);
        assert.equal(patched.json().proxy, `socks5h://127.0.0.1:${socksB.port}`);
        await eventually(() => made.slice(before).find((m) => m.options.proxy?.port === socksB.port), 'a connection through the new proxy');
        assert.ok(made.slice(before).every((m) => m.options.proxy?.port === socksB.port), 'every connection since went through it');
      } finally {
        await one.close();
      }

      // The process restarts while the proxy is down: the account is not taken over directly.
      socksB.cut();
      const two = await app('two', reuse);
      try {
        const cut = await eventually(async () => (await sendersOf(two, key)).find((s) => s.id === senderId && s.status === 'disconnected'), 'the sender cut off by its proxy');
        assert.equal(cut.reason, 'proxy_unreachable');
        await eventually(() => receiver.received.some((r) => r.body.includes('proxy_unreachable')), 'sender.updated saying so');
        assert.equal(made.filter((m) => m.instance === 'two').length, 0, 'no connection was made without the proxy');
        // A note meanwhile waits, then fails proxy_unreachable naming the proxy.
        const note = await sendFrom(two, key, sessionId, '@bob_builder');
        assert.equal(note.statusCode, 202, note.body);
        await two.app.services.db.kysely.updateTable('messages').set({ created_at: Date.now() - 2 * 60 * 60_000, next_attempt_at: Date.now() }).where('id', '=', note.json().id).execute();
        const failed = await two.waitForStatus(key, note.json().id, ['failed', 'delivered'], 30_000);
        seen.push(JSON.stringify(failed));
        assert.equal(failed.error.code, 'proxy_unreachable', JSON.stringify(failed));
        assert.match(failed.error.message, new RegExp(`socks5h://127\\.0\\.0\\.1:${socksB.port}`));
        assert.equal(made.filter((m) => m.instance === 'two').length, 0, 'still none');

        socksB.restore();
        await eventually(() => made.find((m) => m.instance === 'two'), 'taken over through the proxy');
        assert.ok(made.filter((m) => m.instance === 'two').every((m) => m.options.proxy?.port === socksB.port));
        await eventually(async () => (await sendersOf(two, key)).find((s) => s.id === senderId && s.status === 'ok'), 'the sender ok again');

        // Deleted with its credentials: its proxy's go too.
        assert.equal((await two.request({ method: 'DELETE', url: `${API}/telegram/sessions/${sessionId}`, key })).statusCode, 200);
        assert.ok((await sendersOf(two, key)).every((s) => s.proxy === null));
      } finally {
        await two.close();
      }
    });
  });

  it('GramJS takes the proxy in its own shape, and its MTProto connection goes through a real SOCKS5 proxy', async (t) => {
    assert.deepEqual(gramjsProxyOf(`socks5h://agency:${PASSWORD}@proxy.example`), { ip: 'proxy.example', port: 1080, socksType: 5, username: 'agency', password: PASSWORD, timeout: 10 });
    assert.equal(gramjsProxyOf(null), undefined);
    assert.throws(() => gramjsProxyOf('http://proxy.example:3128'), /not a SOCKS5 proxy/);

    // GramJS 2.26.22 connects to port 80 of a data centre whatever the session says (client/TelegramClient.js,
    // connect(): `port: this.useWSS ? 443 : 80`): the fake one listens there, on a loopback address of its own.
    let hangingUp: Awaited<ReturnType<typeof startFakeDc>>;
    try {
      hangingUp = await startFakeDc({ hangUp: true, host: '127.0.0.2', port: 80 });
    } catch (error) {
      return void t.skip(`no fake data centre on 127.0.0.2:80 here (${(error as NodeJS.ErrnoException).code})`);
    }
    const proxy = await startSocks5Proxy({ credentials });
    try {
      const client = createGramjsClientFactory({ dc: { host: '127.0.0.2', port: 80 } })({
        apiId: world.apiId,
        apiHash: world.apiHash,
        floodSleepThreshold: 0,
        proxy: gramjsProxyOf(proxy.url)!,
      });
      // The fake data centre hangs up on GramJS's first bytes: the connection fails, after it was made through the proxy.
      await Promise.race([client.connect().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
      await Promise.race([client.disconnect().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 2_000).unref())]);
      assert.ok(hangingUp.connections.length > 0, 'GramJS connected');
      assert.ok(proxy.tunnels.length > 0 && proxy.tunnels.every((tunnel) => tunnel.destination === '127.0.0.2:80'), JSON.stringify(proxy.tunnels));
      const ports = proxy.upstreamPorts();
      assert.ok(hangingUp.connections.every((port) => ports.has(port)), 'every connection of GramJS came through the proxy');
    } finally {
      await closeAll(hangingUp, proxy);
    }
  });
});
