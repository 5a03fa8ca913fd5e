import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { assertErrorEnvelope, closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, type TestAccount, type TestApp } from './fixtures/app-harness.js';
import type { TestProxy } from './fixtures/proxies.js';
import { proxyScene } from './fixtures/proxy-scene.js';
import { startFakeWhatsappWeb, type FakeWhatsappWeb } from './fakes/whatsapp-web-socket.js';
import type { WebhookReceiver } from './fakes/webhook-receiver.js';
import { eventually } from './fixtures/eventually.js';
import { newWhatsappSessionId } from '../src/core/ids.js';
import { newAuthCreds, sealAuthValue } from '../src/platforms/whatsapp/auth-state.js';
import { createBaileysSocketFactory, proxyAgentsFor } from '../src/platforms/whatsapp/socket.js';
import { parseProxyUrl } from '../src/core/proxy-url.js';
import { proxiedNodeAgent } from '../src/platforms/proxy/node-agent.js';
import { insertWhatsappSession } from '../src/store/whatsapp-sessions.js';
import { setSenderProxy } from '../src/store/sender-proxy.js';

/**
 * A WhatsApp session's own proxy (docs/proxies.md), end to end with the real Baileys: makeWASocket
 * connects to a WebSocket server on loopback (WHATSAPP_WEB_SOCKET_URL) through real HTTP CONNECT and
 * SOCKS5 proxies (test/fixtures/proxies.ts). The server records the remote port of every connection it
 * took and each proxy the local ports of its onward connections, so each connection is known to have
 * come through one proxy, the other, or directly.
 */

const API = '/api/v1';
const PASSWORD = 'wa-Pr0xy-Secret-Pa55';

after(closeSharedAudio);

describe(`a proxy per WhatsApp session, with Baileys' own socket (${STORAGE_LABEL})`, () => {
  let web: FakeWhatsappWeb;
  let httpProxy: TestProxy;
  let socksProxy: TestProxy;
  let receiver: WebhookReceiver;
  let t: TestApp;
  let account: TestAccount;
  const scene = proxyScene(PASSWORD);
  const { logs, seen } = scene;

  before(async () => {
    web = await startFakeWhatsappWeb();
    ({ httpProxy, socksProxy, receiver } = await scene.start());
    t = await startTestApp({
      env: { WHATSAPP_WEB_SOCKET_URL: web.url },
      logger: logs.logger,
      whatsappSocketFactory: createBaileysSocketFactory({ webSocketUrl: web.url }),
      // The fake never answers Baileys' handshake: linking gives up after qrWaitMs; reconnects are quick and never run out.
      whatsappLive: { qrWaitMs: 1_500, reconnectFirstDelayMs: 100, reconnectMaxDelayMs: 400, reconnectAttempts: 10_000, renewMs: 300, takeoverScanMs: 200, leaseMs: 3_000 },
    });
    account = await t.createAccount();
    const hook = await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key: account.liveKey, body: { url: receiver.url(), events: ['sender.updated'] } });
    assert.equal(hook.statusCode, 201, hook.body);
  });

  after(() => scene.close(t, web));

  async function call(options: Parameters<TestApp['request']>[0]) {
    const res = await t.request(options);
    seen.push(res.body);
    return res;
  }

  /** The connections the fake took since `from`, each of them through `proxy`. */
  function assertAllThrough(from: { connections: number; sockets: number }, proxy: TestProxy): void {
    const ports = proxy.upstreamPorts();
    const connections = web.connections.slice(from.connections);
    assert.ok(web.sockets.length > from.sockets, 'a WebSocket was opened');
    for (const port of connections) assert.ok(ports.has(port), `a connection came from port ${port}, not through ${proxy.url.replace(PASSWORD, '…')}`);
  }
  const mark = () => ({ connections: web.connections.length, sockets: web.sockets.length });

  it("a new session's socket arrives through its own proxy; a second session's through its own only", async () => {
    const first = mark();
    const viaHttp = await call({ method: 'POST', url: `${API}/whatsapp/sessions`, key: account.liveKey, body: { proxy: httpProxy.url } });
    // The fake shows no QR code: the linking gives up, but its socket came, through the proxy.
    assertErrorEnvelope(viaHttp, 502, 'platform_error');
    assertAllThrough(first, httpProxy);
    assert.ok(httpProxy.tunnels.every((tunnel) => tunnel.destination === `127.0.0.1:${web.port}`), JSON.stringify(httpProxy.tunnels));

    const second = mark();
    const httpTunnels = httpProxy.tunnels.length;
    const viaSocks = await call({ method: 'POST', url: `${API}/whatsapp/sessions`, key: account.liveKey, body: { proxy: socksProxy.url.replace('socks5://', 'socks5h://') } });
    assertErrorEnvelope(viaSocks, 502, 'platform_error');
    assertAllThrough(second, socksProxy);
    assert.equal(httpProxy.tunnels.length, httpTunnels, 'nothing of the second session went through the first one');

    // A linking that failed leaves no sender behind, and no sealed proxy.
    const senders = await call({ method: 'GET', url: `${API}/senders`, key: account.liveKey });
    assert.deepEqual(senders.json().data, []);
  });

  it('a proxy is checked when a session is created: not answering, refusing the credentials, a bad scheme', async () => {
    socksProxy.cut();
    try {
      const before = mark();
      const down = await call({ method: 'POST', url: `${API}/whatsapp/sessions`, key: account.liveKey, body: { proxy: socksProxy.url } });
      const error = assertErrorEnvelope(down, 422, 'proxy_unreachable');
      assert.equal(error.details.proxy, `socks5://127.0.0.1:${socksProxy.port}`);
      assert.equal(web.connections.length, before.connections, 'nothing went directly');
    } finally {
      socksProxy.restore();
    }
    const wrong = await call({ method: 'POST', url: `${API}/whatsapp/sessions`, key: account.liveKey, body: { proxy: httpProxy.url.replace(PASSWORD, 'wrong') } });
    assertErrorEnvelope(wrong, 422, 'proxy_auth_failed');
    const ftp = await call({ method: 'POST', url: `${API}/whatsapp/sessions`, key: account.liveKey, body: { proxy: 'ftp://proxy.example:21' } });
    assert.equal(assertErrorEnvelope(ftp, 422, 'invalid_parameter').details.field, 'proxy');
    const sandbox = await call({ method: 'POST', url: `${API}/whatsapp/sessions`, key: account.testKey, body: { proxy: `socks5://u:${PASSWORD}@proxy.example:1080` } });
    assert.equal(sandbox.statusCode, 201, sandbox.body);
    const listed = (await call({ method: 'GET', url: `${API}/senders`, key: account.testKey })).json().data;
    assert.deepEqual(
      listed.map((s: { kind: string; proxy: string }) => [s.kind, s.proxy]),
      [['whatsapp_session', 'socks5://proxy.example:1080']],
    );
  });

  it('a linked session whose proxy is down stays disconnected (proxy_unreachable) with nothing direct, is ok again when it answers, and follows PATCH /senders/{id}', async () => {
    const services = t.app.services;
    const at = Date.now();
    const id = newWhatsappSessionId(at);
    const creds = { ...(await newAuthCreds()), me: { id: '14155550123:7@s.whatsapp.net' } };
    socksProxy.cut();
    const before = mark();
    // As a linking would have left it: connected, its creds sealed, its proxy kept; then the worker takes it over.
    const ref = { accountId: account.accountId, env: 'live', platform: 'whatsapp', senderKey: id };
    await setSenderProxy(services.db.kysely, ref, 'whatsapp_session', { sealed: services.secretBox.seal(socksProxy.url), shown: `socks5://127.0.0.1:${socksProxy.port}` });
    await insertWhatsappSession(services.db.kysely, {
      id,
      account_id: account.accountId,
      env: 'live',
      status: 'connected',
      phone_number: '14155550123',
      qr_expires_at: null,
      auto_connect_at: null,
      auth_state: await sealAuthValue(services.secretBox, creds),
      created_at: at,
      updated_at: at,
      last_connected_at: at,
    });
    const senderOf = async () => (await call({ method: 'GET', url: `${API}/senders`, key: account.liveKey })).json().data.find((s: { label: string | null; kind: string }) => s.kind === 'whatsapp_session');
    const cut = await eventually(async () => {
      const sender = await senderOf();
      return sender?.status === 'disconnected' ? sender : undefined;
    }, 'the sender cut off by its proxy');
    assert.equal(cut.reason, 'proxy_unreachable');
    assert.equal(cut.proxy, `socks5://127.0.0.1:${socksProxy.port}`);
    await eventually(() => receiver.received.some((r) => r.body.includes('proxy_unreachable')), 'sender.updated saying so');
    // A note meanwhile waits, then fails proxy_unreachable naming the proxy, never sent another way.
    const note = await t.send(account.liveKey, defaultSendBody('whatsapp', t.voiceUrl, id));
    seen.push(note.body);
    assert.equal(note.statusCode, 202, note.body);
    await t.app.services.db.kysely.updateTable('messages').set({ created_at: Date.now() - 2 * 60 * 60_000, next_attempt_at: Date.now() }).where('id', '=', note.json().id).execute();
    const failed = await t.waitForStatus(account.liveKey, note.json().id, ['failed', 'delivered'], 30_000);
    seen.push(JSON.stringify(failed));
    assert.equal(failed.error.code, 'proxy_unreachable', JSON.stringify(failed));
    assert.match(failed.error.message, new RegExp(`socks5://127\\.0\\.0\\.1:${socksProxy.port}`));
    assert.equal(web.connections.length, before.connections, 'no connection reached WhatsApp directly');

    socksProxy.restore();
    await eventually(async () => (await senderOf())?.status === 'ok', 'the sender ok again');
    await eventually(() => web.sockets.length > before.sockets, 'the socket through the proxy');
    assertAllThrough(before, socksProxy);

    // PATCH to another proxy: the live socket connects again, through it.
    const patched = mark();
    const changed = await call({ method: 'PATCH', url: `${API}/senders/${cut.id}`, key: account.liveKey, body: { proxy: httpProxy.url } });
    assert.equal(changed.statusCode, 200, changed.body);
    assert.equal(changed.json().proxy, `http://127.0.0.1:${httpProxy.port}`);
    await eventually(() => web.sockets.length > patched.sockets, 'a socket through the new proxy');
    const httpPorts = httpProxy.upstreamPorts();
    assert.ok(web.sockets.slice(patched.sockets).every((port) => httpPorts.has(port)), 'the new socket came through the new proxy');

    // Cleared: from its next connection it goes directly.
    const cleared = mark();
    const none = await call({ method: 'PATCH', url: `${API}/senders/${cut.id}`, key: account.liveKey, body: { proxy: null } });
    assert.equal(none.json().proxy, null);
    await eventually(() => web.sockets.length > cleared.sockets, 'a direct socket');
    const proxied = new Set([...httpProxy.upstreamPorts(), ...socksProxy.upstreamPorts()]);
    assert.ok(web.sockets.slice(cleared.sockets).some((port) => !proxied.has(port)), 'the socket after clearing came directly');

    const removed = await call({ method: 'DELETE', url: `${API}/whatsapp/sessions/${id}`, key: account.liveKey });
    assert.equal(removed.statusCode, 200, removed.body);
  });

  it("a voice note's media upload goes through the session's proxy: Baileys' own upload with its fetchAgent", async () => {
    // What the socket is given: Node agents (rc14 uploads with https.request and `agent: fetchAgent`, lib/Utils/messages-media.js).
    const agents = proxyAgentsFor(socksProxy.url, 'wss://web.whatsapp.com/ws/chat');
    assert.equal((agents.fetchAgent as unknown as { protocol: string }).protocol, 'https:');
    assert.equal((agents.agent as unknown as { protocol: string }).protocol, 'https:');
    assert.deepEqual(proxyAgentsFor(null, web.url), {});
    // Baileys' upload function itself, to a plain-HTTP media host on loopback through an agent for http.
    const uploads: number[] = [];
    const media = http.createServer((request, response) => {
      uploads.push(request.socket.remotePort!);
      request.resume().on('end', () => response.end(JSON.stringify({ url: 'https://mmg.example/x', direct_path: '/v/x' })));
    });
    await new Promise<void>((resolve) => media.listen(0, '127.0.0.1', resolve));
    const dir = await mkdtemp(path.join(tmpdir(), 'wa-upload-'));
    try {
      const file = path.join(dir, 'note.enc');
      await writeFile(file, Buffer.alloc(4096, 7));
      const { uploadWithNodeHttp } = await import('@whiskeysockets/baileys');
      const parsed = parseProxyUrl(httpProxy.url);
      assert.ok(!('problem' in parsed));
      const { port } = media.address() as AddressInfo;
      const result = await uploadWithNodeHttp({ url: `http://127.0.0.1:${port}/mms/audio/abc`, filePath: file, headers: {}, timeoutMs: 5_000, agent: proxiedNodeAgent(parsed, 'http:') as never });
      assert.equal(result?.direct_path, '/v/x');
      assert.equal(uploads.length, 1);
      assert.ok(httpProxy.upstreamPorts().has(uploads[0]!), 'the upload came through the proxy');
      assert.ok(httpProxy.tunnels.some((tunnel) => tunnel.destination === `127.0.0.1:${port}`));
    } finally {
      media.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a Telegram account refuses an HTTP proxy, naming the schemes it takes', async () => {
    const res = await call({ method: 'POST', url: `${API}/telegram/sessions`, key: account.liveKey, body: { proxy: httpProxy.url } });
    const error = assertErrorEnvelope(res, 422, 'invalid_parameter');
    assert.equal(error.details.field, 'proxy');
    assert.match(error.message, /socks5:\/\/ or socks5h:\/\//);
  });
});
