import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';
import type { TestProxy } from './fixtures/proxies.js';
import { proxyScene } from './fixtures/proxy-scene.js';
import { startTelegramApi, type TelegramFake } from './fakes/telegram-api.js';
import type { WebhookReceiver } from './fakes/webhook-receiver.js';
import { eventually } from './fixtures/eventually.js';

/**
 * A Telegram bot's listener (its getUpdates long poll, src/platforms/telegram/listener.ts) fails closed
 * as its sends do (docs/proxies.md, "Fail closed"): a proxy that stops carrying the poll makes the bot
 * `disconnected` with reason `proxy_unreachable` (`sender.updated`), nothing is polled directly, and
 * the first poll the proxy carries again makes it `ok`. A real HTTP CONNECT proxy on loopback in front of
 * the fake Bot API; each call the fake received names the port it came from.
 */

const API = '/api/v1';
const PASSWORD = 'l1sten-Pr0xy-Pa55';
const BOT = '200000021:AAListenerProxyBotTokenSecretPart_0123456';

after(closeSharedAudio);

describe(`a Telegram bot's listener through its proxy (${STORAGE_LABEL})`, () => {
  let fake: TelegramFake;
  let proxy: TestProxy;
  let receiver: WebhookReceiver;
  let t: TestApp;
  const scene = proxyScene(PASSWORD);
  const { logs } = scene;

  before(async () => {
    fake = await startTelegramApi();
    ({ httpProxy: proxy, receiver } = await scene.start());
    t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, logger: logs.logger, platformTuning: { telegram: { listenScanMs: 100, listenPollSeconds: 1 } } });
  });

  after(() => scene.close(t, fake));

  it('a stopped proxy makes the listened bot disconnected (proxy_unreachable) with no direct poll, then ok when it answers again', async () => {
    const account = await t.createAccount();
    const hook = await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key: account.liveKey, body: { url: receiver.url(), events: ['sender.updated'] } });
    assert.equal(hook.statusCode, 201, hook.body);
    const sent = await t.send(account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '43000001', listen: true, session: { bot_token: BOT, proxy: proxy.url } });
    assert.equal(sent.statusCode, 202, sent.body);
    assert.equal((await t.waitForStatus(account.liveKey, sent.json().id, ['delivered', 'failed'], 30_000)).status, 'delivered');
    const polls = () => fake.calls.filter((c) => c.token === BOT && c.method.toLowerCase() === 'getupdates');
    await eventually(() => polls().length > 0, 'the bot polled');

    proxy.cut();
    const senderOf = async () => (await t.request({ method: 'GET', url: `${API}/senders`, key: account.liveKey })).json().data[0];
    const cut = await eventually(async () => {
      const sender = await senderOf();
      return sender.status === 'disconnected' ? sender : undefined;
    }, 'the bot cut off by its proxy');
    assert.equal(cut.reason, 'proxy_unreachable');
    const [event] = await receiver.waitFor(1, 'sender.updated');
    assert.equal(JSON.parse(event!.body).data.reason, 'proxy_unreachable');

    proxy.restore();
    await eventually(async () => (await senderOf()).status === 'ok', 'the bot ok again', 60_000);
    const ports = proxy.upstreamPorts();
    for (const call of fake.calls.filter((c) => c.token === BOT)) assert.ok(ports.has(call.remotePort!), `${call.method} came directly`);
  });
});
