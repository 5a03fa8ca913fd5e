import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeAll } from './fixtures/close-all.js';
import { assertErrorEnvelope, closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, type TestAccount, type TestApp } from './fixtures/app-harness.js';
import { closedPort, startHttpConnectProxy, startSocks5Proxy, type TestProxy } from './fixtures/proxies.js';
import { proxyScene } from './fixtures/proxy-scene.js';
import { startLinkedinVoyagerFake, type LinkedinVoyagerFake, type VoyagerAccount } from './fakes/linkedin-voyager.js';
import { startTelegramApi, type TelegramCall, type TelegramFake } from './fakes/telegram-api.js';
import type { WebhookReceiver } from './fakes/webhook-receiver.js';
import { createDashboardAccount, FormClient } from './fixtures/dashboard-harness.js';
import { eventually } from './fixtures/eventually.js';
import { JANE, newLinkedinSession, USER_AGENT } from './fixtures/linkedin-account.js';
import { ManualClock } from './fixtures/manual-clock.js';

/**
 * A proxy per sender (docs/proxies.md), end to end: real HTTP CONNECT and SOCKS5 proxies on loopback
 * (test/fixtures/proxies.ts) in front of the fake Bot API. Each call the fake received names the port it
 * came from, and each proxy the ports of its onward connections: so every call is known to have come
 * through one proxy, the other, or directly.
 */

const API = '/api/v1';
const PASSWORD = 'pr0xy-Secret-Pa55';
const credentials = { username: 'agency', password: PASSWORD };
// Well-formed bot tokens (the fake knows every token when given none).
const BOT_HTTP = '200000001:AAHTTPproxyBotTokenSecretPart_0123456789';
const BOT_SOCKS = '200000002:AASOCKSproxyBotTokenSecretPart_012345678';
const BOT_DIRECT = '200000003:AADirectBotTokenSecretPart_0123456789ab';
const BOT_LATER = '200000004:AALaterBotTokenSecretPart_0123456789abc';
const BOT_DOWN = '200000005:AADownBotTokenSecretPart_0123456789abcd';

after(async () => {
  await closeSharedAudio();
});

const callsOf = (fake: TelegramFake, token: string): TelegramCall[] => fake.calls.filter((c) => c.token === token);

/** Every call of this bot came from one of the proxy's onward connections. */
function assertThrough(fake: TelegramFake, token: string, proxy: TestProxy): void {
  const calls = callsOf(fake, token);
  assert.ok(calls.length > 0, 'the bot made calls');
  const ports = proxy.upstreamPorts();
  for (const call of calls) assert.ok(ports.has(call.remotePort!), `${call.method} came from port ${call.remotePort}, not through the proxy`);
}

/** No call of this bot came through any of these proxies. */
function assertNotThrough(fake: TelegramFake, token: string, ...proxies: TestProxy[]): void {
  for (const proxy of proxies) {
    const ports = proxy.upstreamPorts();
    for (const call of callsOf(fake, token)) assert.ok(!ports.has(call.remotePort!), `${call.method} of this bot went through another proxy`);
  }
}

describe(`a proxy per Telegram bot (${STORAGE_LABEL})`, () => {
  let fake: TelegramFake;
  let httpProxy: TestProxy;
  let socksProxy: TestProxy;
  let receiver: WebhookReceiver;
  let t: TestApp;
  let account: TestAccount;
  const scene = proxyScene(PASSWORD);
  const { logs, seen } = scene;

  before(async () => {
    fake = await startTelegramApi();
    ({ httpProxy, socksProxy, receiver } = await scene.start());
    t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, logger: logs.logger, platformTuning: { telegram: { chatActionEveryMs: 1_000, listenScanMs: 100, listenPollSeconds: 1 } } });
    account = await t.createAccount();
    const hook = await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key: account.liveKey, body: { url: receiver.url(), events: ['sender.updated', 'voice_note.failed'] } });
    assert.equal(hook.statusCode, 201, hook.body);
  });

  after(() => scene.close(t, fake));

  async function call(options: Parameters<TestApp['request']>[0]) {
    const res = await t.request(options);
    seen.push(res.body);
    return res;
  }

  async function send(token: string, recipient: string, extra: Record<string, unknown> = {}, session: Record<string, unknown> = {}) {
    const res = await t.send(account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient, session: { bot_token: token, ...session }, ...extra });
    seen.push(res.body);
    return res;
  }

  async function delivered(id: string): Promise<void> {
    const body = await t.waitForStatus(account.liveKey, id, ['delivered', 'failed'], 30_000);
    seen.push(JSON.stringify(body));
    assert.equal(body.status, 'delivered', JSON.stringify(body));
  }

  it('each bot tunnels through its own proxy only, for its chat action and its send; a bot without one goes direct', async () => {
    const viaHttp = await send(BOT_HTTP, '41000001', { recording_indicator: true }, { proxy: httpProxy.url });
    assert.equal(viaHttp.statusCode, 202, viaHttp.body);
    const viaSocks = await send(BOT_SOCKS, '41000002', {}, { proxy: socksProxy.url.replace('socks5://', 'socks5h://') });
    assert.equal(viaSocks.statusCode, 202, viaSocks.body);
    const direct = await send(BOT_DIRECT, '41000003');
    assert.equal(direct.statusCode, 202, direct.body);
    for (const res of [viaHttp, viaSocks, direct]) await delivered(res.json().id);

    const fakeHost = new URL(fake.apiRoot).host;
    assert.ok(httpProxy.tunnels.some((tunnel) => tunnel.destination === fakeHost), JSON.stringify(httpProxy.tunnels));
    assert.ok(socksProxy.tunnels.some((tunnel) => tunnel.destination === fakeHost), JSON.stringify(socksProxy.tunnels));
    assert.deepEqual(
      callsOf(fake, BOT_HTTP).map((c) => c.method.toLowerCase()).filter((m, i, all) => all.indexOf(m) === i).sort(),
      ['sendchataction', 'sendvoice'],
    );
    assertThrough(fake, BOT_HTTP, httpProxy);
    assertNotThrough(fake, BOT_HTTP, socksProxy);
    assertThrough(fake, BOT_SOCKS, socksProxy);
    assertNotThrough(fake, BOT_SOCKS, httpProxy);
    assert.ok(callsOf(fake, BOT_DIRECT).length > 0);
    assertNotThrough(fake, BOT_DIRECT, httpProxy, socksProxy);

    // The senders show their proxies as scheme://host:port, never the credentials.
    const list = (await call({ method: 'GET', url: `${API}/senders?limit=100`, key: account.liveKey })).json().data as any[];
    const shown = list.map((s) => String(s.proxy)).sort();
    assert.deepEqual(shown, [`http://127.0.0.1:${httpProxy.port}`, 'null', `socks5h://127.0.0.1:${socksProxy.port}`]);
    const one = list.find((s) => s.proxy === `http://127.0.0.1:${httpProxy.port}`);
    const alone = await call({ method: 'GET', url: `${API}/senders/${one.id}`, key: account.liveKey });
    assert.equal(alone.json().proxy, `http://127.0.0.1:${httpProxy.port}`);
  });

  it("a bot's recipient check and its listener (getUpdates) go through its proxy too", async () => {
    const checked = await call({ method: 'POST', url: `${API}/recipients/check`, key: account.liveKey, body: { platform: 'telegram', recipient: '41000001', session: { bot_token: BOT_HTTP } } });
    assert.equal(checked.statusCode, 200, checked.body);
    assert.equal(checked.json().exists, true);
    const getChat = callsOf(fake, BOT_HTTP).filter((c) => c.method.toLowerCase() === 'getchat');
    assert.equal(getChat.length, 1);
    assertThrough(fake, BOT_HTTP, httpProxy);

    const listened = await send(BOT_SOCKS, '41000002', { listen: true });
    assert.equal(listened.statusCode, 202, listened.body);
    await delivered(listened.json().id);
    await fake.waitForCalls(1, (c) => c.token === BOT_SOCKS && c.method.toLowerCase() === 'getupdates', 20_000);
    assertThrough(fake, BOT_SOCKS, socksProxy);
  });

  it('PATCH /senders/{id} sets a proxy from the next send and null clears it', async () => {
    const first = await send(BOT_LATER, '41000004');
    await delivered(first.json().id);
    const list = (await call({ method: 'GET', url: `${API}/senders?limit=100`, key: account.liveKey })).json().data as any[];
    const directCalls = callsOf(fake, BOT_LATER).length;
    // Newest first: this bot's record was made when its note settled, after the others'.
    const sender = list[0];
    assert.equal(sender.proxy, null);
    assert.equal(sender.sent_today, 1, JSON.stringify(list));

    const set = await call({ method: 'PATCH', url: `${API}/senders/${sender.id}`, key: account.liveKey, body: { proxy: socksProxy.url } });
    assert.equal(set.statusCode, 200, set.body);
    assert.equal(set.json().proxy, `socks5://127.0.0.1:${socksProxy.port}`);
    const second = await send(BOT_LATER, '41000004');
    await delivered(second.json().id);
    const proxied = callsOf(fake, BOT_LATER).slice(directCalls);
    assert.ok(proxied.length > 0);
    for (const c of proxied) assert.ok(socksProxy.upstreamPorts().has(c.remotePort!), 'the send after PATCH went through the proxy');

    const cleared = await call({ method: 'PATCH', url: `${API}/senders/${sender.id}`, key: account.liveKey, body: { proxy: null } });
    assert.equal(cleared.statusCode, 200, cleared.body);
    assert.equal(cleared.json().proxy, null);
    const before = callsOf(fake, BOT_LATER).length;
    const third = await send(BOT_LATER, '41000004');
    await delivered(third.json().id);
    for (const c of callsOf(fake, BOT_LATER).slice(before)) {
      assert.ok(!socksProxy.upstreamPorts().has(c.remotePort!) && !httpProxy.upstreamPorts().has(c.remotePort!), 'a cleared proxy is no longer used');
    }
  });

  it('a proxy is checked when set: not answering, refusing the credentials, a bad scheme, an unknown field', async () => {
    const nowhere = `http://127.0.0.1:${await closedPort()}`;
    const unreachable = await send(BOT_DIRECT, '41000005', {}, { proxy: nowhere });
    const down = assertErrorEnvelope(unreachable, 422, 'proxy_unreachable');
    assert.match(down.message, new RegExp(`127\\.0\\.0\\.1:${nowhere.split(':').pop()}`));

    const wrongHttp = await send(BOT_DIRECT, '41000005', {}, { proxy: `http://agency:wrong@127.0.0.1:${httpProxy.port}` });
    assert.match(assertErrorEnvelope(wrongHttp, 422, 'proxy_auth_failed').message, /407/);
    const wrongSocks = await send(BOT_DIRECT, '41000005', {}, { proxy: `socks5://agency:wrong@127.0.0.1:${socksProxy.port}` });
    assertErrorEnvelope(wrongSocks, 422, 'proxy_auth_failed');
    // The refusals name neither the password given nor accept anything.
    assert.ok(!wrongHttp.body.includes('wrong') && !wrongSocks.body.includes('wrong'));

    const ftp = await send(BOT_DIRECT, '41000005', {}, { proxy: 'ftp://127.0.0.1:21' });
    assert.equal(assertErrorEnvelope(ftp, 422, 'invalid_parameter').details.field, 'session.proxy');
    const list = (await call({ method: 'GET', url: `${API}/senders?limit=100`, key: account.liveKey })).json().data as any[];
    const patchedBad = await call({ method: 'PATCH', url: `${API}/senders/${list[0].id}`, key: account.liveKey, body: { proxy: 'not a url' } });
    assert.equal(assertErrorEnvelope(patchedBad, 422, 'invalid_parameter').details.field, 'proxy');
    const extra = await call({ method: 'PATCH', url: `${API}/senders/${list[0].id}`, key: account.liveKey, body: { proxy: null, label: 'x' } });
    assertErrorEnvelope(extra, 400, 'invalid_request');
    const missing = await call({ method: 'PATCH', url: `${API}/senders/snd_000000000000000000000000`, key: account.liveKey, body: { proxy: null } });
    assertErrorEnvelope(missing, 404, 'not_found');
    // Nothing of these refused sends reached Telegram.
    assert.equal(fake.calls.filter((c) => c.chatId === '41000005').length, 0);
  });

  it('a stopped proxy: notes wait, the sender is disconnected (proxy_unreachable), nothing goes direct; they fail proxy_unreachable naming the proxy; the sender recovers by itself', async () => {
    const downProxy = await startHttpConnectProxy({ credentials });
    try {
      const first = await send(BOT_DOWN, '41000006', {}, { proxy: downProxy.url });
      assert.equal(first.statusCode, 202, first.body);
      await delivered(first.json().id);
      downProxy.cut();

      const waiting = await send(BOT_DOWN, '41000006');
      const id = waiting.json().id as string;
      const [event] = await receiver.waitFor(1, 'sender.updated');
      const data = JSON.parse(event!.body).data;
      assert.equal(data.status, 'disconnected');
      assert.equal(data.reason, 'proxy_unreachable');
      assert.equal(data.proxy, `http://127.0.0.1:${downProxy.port}`);
      const queued = (await call({ method: 'GET', url: `${API}/status/${id}`, key: account.liveKey })).json();
      assert.equal(queued.status, 'queued', JSON.stringify(queued));
      assert.equal(fake.calls.filter((c) => c.chatId === '41000006').length, 1, 'only the first note reached Telegram');

      // The retry window spent: the next attempt is the last one.
      await t.app.services.db.kysely.updateTable('messages').set({ created_at: Date.now() - 2 * 60 * 60_000, next_attempt_at: Date.now() }).where('id', '=', id).execute();
      const failed = await t.waitForStatus(account.liveKey, id, ['failed', 'delivered'], 30_000);
      seen.push(JSON.stringify(failed));
      assert.equal(failed.error.code, 'proxy_unreachable');
      assert.match(failed.error.message, new RegExp(`127\\.0\\.0\\.1:${downProxy.port}`));
      assert.equal(fake.calls.filter((c) => c.chatId === '41000006').length, 1, 'no note went direct while the proxy was down');

      downProxy.restore();
      const again = await send(BOT_DOWN, '41000006');
      await delivered(again.json().id);
      const events = (await receiver.waitFor(2, 'sender.updated')).map((e) => JSON.parse(e.body).data);
      assert.equal(events[1].status, 'ok');
      for (const c of fake.calls.filter((c) => c.chatId === '41000006')) assert.ok(downProxy.upstreamPorts().has(c.remotePort!));
    } finally {
      await downProxy.close();
    }
  });
});

describe(`a proxy per LinkedIn cookie (${STORAGE_LABEL})`, () => {
  let fake: LinkedinVoyagerFake;
  let socksProxy: TestProxy;
  let t: TestApp;
  const jane = { publicId: 'jane-smith-a1b2c3', urn: 'urn:li:fsd_profile:ACoAABjaneSmith01' };
  const proxied = { liAt: 'AQEDAQproxiedCookieValue0123456789', csrfToken: 'ajax:1111111111111111111', profileUrn: 'urn:li:fsd_profile:ACoAABproxied01' };
  const direct = { liAt: 'AQEDAQdirectCookieValue01234567890', csrfToken: 'ajax:2222222222222222222', profileUrn: 'urn:li:fsd_profile:ACoAABdirect001' };

  before(async () => {
    fake = await startLinkedinVoyagerFake({ profiles: [jane] });
    fake.addAccount(proxied);
    fake.addAccount(direct);
    socksProxy = await startSocks5Proxy({ credentials });
    t = await startTestApp({ env: { LINKEDIN_API_ROOT: fake.apiRoot }, linkedinPace: { minMs: 50, maxMs: 60, timeoutMs: 4_000 } });
  });
  after(() => closeAll(t, fake, socksProxy));

  it("every Voyager call of a cookie with a proxy, the upload included, comes through it; another cookie's go direct", async () => {
    const account = await t.createAccount({ plan: 'growth' });
    const send = (session: typeof proxied, proxy?: string) =>
      t.send(account.liveKey, {
        ...defaultSendBody('linkedin', t.mp3Url),
        recipient: jane.publicId,
        session: { li_at: session.liAt, csrf_token: session.csrfToken, ...(proxy ? { proxy } : {}) },
      });
    const viaProxy = await send(proxied, socksProxy.url);
    assert.equal(viaProxy.statusCode, 202, viaProxy.body);
    const plain = await send(direct);
    assert.equal(plain.statusCode, 202, plain.body);
    for (const res of [viaProxy, plain]) {
      const status = await t.waitForStatus(account.liveKey, res.json().id, ['delivered', 'failed'], 30_000);
      assert.equal(status.status, 'delivered', JSON.stringify(status));
    }
    const ports = socksProxy.upstreamPorts();
    const mine = fake.calls.filter((c) => c.liAt === proxied.liAt || (c.step === 'upload' && ports.has(c.remotePort!)));
    assert.deepEqual(mine.map((c) => c.step), ['me', 'profile', 'uploadMetadata', 'upload', 'createMessage']);
    for (const c of mine) assert.ok(ports.has(c.remotePort!), `${c.step} came from port ${c.remotePort}, not through the proxy`);
    const theirs = fake.calls.filter((c) => c.liAt === direct.liAt);
    assert.ok(theirs.length > 0);
    for (const c of theirs) assert.ok(!ports.has(c.remotePort!), `${c.step} of the other cookie went through the proxy`);
    const senders = await t.request({ method: 'GET', url: `${API}/senders`, key: account.liveKey });
    assert.deepEqual(senders.json().data.map((s: any) => String(s.proxy)).sort(), ['null', `socks5://127.0.0.1:${socksProxy.port}`]);
    assert.ok(!senders.body.includes(PASSWORD));
  });
});

describe(`a LinkedIn cookie's listening through its proxy (${STORAGE_LABEL})`, () => {
  const HOUR = 3_600_000;
  /** The first reconnect's wait after a failed opening (realtime-stream.ts: attempts × 2 s). */
  const FIRST_RECONNECT_WAIT_MS = 2_000;
  let fake: LinkedinVoyagerFake;
  let socksProxy: TestProxy;
  let receiver: WebhookReceiver;
  let t: TestApp;
  let key: string;
  const clock = new ManualClock();
  const scene = proxyScene(PASSWORD);
  const { logs } = scene;

  before(async () => {
    fake = await startLinkedinVoyagerFake({ profiles: [JANE] });
    ({ socksProxy, receiver } = await scene.start());
    // A first look 200 ms after a note, the next an hour later: only the looks a test asks for happen.
    t = await startTestApp({
      env: { LINKEDIN_API_ROOT: fake.apiRoot },
      logger: logs.logger,
      linkedinPace: { minMs: 0, maxMs: 0 },
      platformTuning: { linkedinListen: { scanMs: 100, intervalsMs: [200], dailyMs: HOUR, streamClock: clock, proxyRetryMs: HOUR } },
    });
    const account = await t.createAccount();
    key = account.liveKey;
    const hook = await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key, body: { url: receiver.url(), events: ['sender.updated'] } });
    assert.equal(hook.statusCode, 201, hook.body);
  });

  after(() => scene.close(t, fake));

  /** A listened note of this session through this proxy, delivered, its stream open and its first look made. */
  async function listened(session: VoyagerAccount, proxy: string): Promise<void> {
    const res = await t.send(key, {
      ...defaultSendBody('linkedin', t.mp3Url),
      recipient: JANE.publicId,
      listen: true,
      session: { li_at: session.liAt, csrf_token: session.csrfToken, user_agent: USER_AGENT, cookies: 'bcookie="v=2&abc"; lang=v=2&lang=en-us', proxy },
    });
    assert.equal(res.statusCode, 202, res.body);
    const status = await t.waitForStatus(key, res.json().id, ['delivered', 'failed'], 30_000);
    assert.equal(status.status, 'delivered', JSON.stringify(status));
    await eventually(() => fake.openStreams(session.liAt) === 1, 'the realtime stream open', 10_000);
    await eventually(() => fake.callsOf('messages', session.liAt).length > 0, 'a look at the conversation', 10_000);
    await eventually(() => fake.callsOf('heartbeat', session.liAt).length > 0, 'a heartbeat', 10_000);
  }

  /** Every call the fake received with this li_at came from one of the proxy's onward connections. */
  function assertAllThrough(session: VoyagerAccount, proxy: TestProxy): void {
    const ports = proxy.upstreamPorts();
    const mine = fake.calls.filter((c) => c.liAt === session.liAt);
    for (const c of mine) assert.ok(ports.has(c.remotePort!), `${c.step} came from port ${c.remotePort}, not through the proxy`);
  }

  it('the realtime stream, its heartbeats and the looks at the conversation come through the proxy', async () => {
    const session = newLinkedinSession(fake);
    await listened(session, socksProxy.url.replace('socks5://', 'socks5h://'));
    const steps = new Set(fake.calls.filter((c) => c.liAt === session.liAt).map((c) => c.step));
    for (const step of ['me', 'createMessage', 'realtime', 'heartbeat', 'messages'] as const) assert.ok(steps.has(step), `${step} was made: ${[...steps]}`);
    assert.deepEqual(fake.violations, []);
    assertAllThrough(session, socksProxy);
    assert.ok(socksProxy.tunnels.every((tunnel) => tunnel.destination === new URL(fake.apiRoot).host));
  });

  it('a stopped proxy: neither the stream nor a look connects directly, the sender is disconnected (proxy_unreachable), then ok again when the proxy is back', async () => {
    const downProxy = await startHttpConnectProxy({ credentials });
    try {
      const session = newLinkedinSession(fake);
      await listened(session, downProxy.url);
      const sender = (await t.request({ method: 'GET', url: `${API}/senders?limit=100`, key })).json().data.find((s: any) => s.proxy === `http://127.0.0.1:${downProxy.port}`);
      assert.ok(sender, 'the sender shows its proxy');
      const callsBefore = fake.calls.filter((c) => c.liAt === session.liAt).length;

      // The proxy goes down: its tunnels drop (the stream breaks) and it carries nothing more.
      downProxy.cut();
      const [event] = await receiver.waitFor(1, 'sender.updated');
      const data = JSON.parse(event!.body).data;
      assert.deepEqual([data.id, data.status, data.reason, data.proxy], [sender.id, 'disconnected', 'proxy_unreachable', `http://127.0.0.1:${downProxy.port}`]);
      // The stream waits for its next opening; a look made due now finds the proxy down and waits too.
      await eventually(() => clock.waiting(FIRST_RECONNECT_WAIT_MS) === 1, 'the stream waiting to open again', 10_000);
      const db = t.app.services.db.kysely;
      const { sender_key: senderKey } = await db.selectFrom('sender_records').select('sender_key').where('id', '=', sender.id).executeTakeFirstOrThrow();
      await db.updateTable('linkedin_listeners').set({ next_check_at: Date.now() }).where('sender_key', '=', senderKey).execute();
      await eventually(
        async () => {
          const row = await db.selectFrom('linkedin_listeners').select('next_check_at').where('sender_key', '=', senderKey).executeTakeFirstOrThrow();
          return Number(row.next_check_at) > Date.now() + HOUR / 2;
        },
        'the look put off for the proxy',
        10_000,
      );
      assert.equal(fake.calls.filter((c) => c.liAt === session.liAt).length, callsBefore, 'nothing of this sender reached LinkedIn while its proxy was down');
      assert.equal(fake.openStreams(session.liAt), 0);
      const down = (await t.request({ method: 'GET', url: `${API}/senders/${sender.id}`, key })).json();
      assert.deepEqual([down.status, down.reason], ['disconnected', 'proxy_unreachable']);

      // Back: the stream opens again through it and the sender is ok by itself.
      downProxy.restore();
      clock.release(FIRST_RECONNECT_WAIT_MS);
      await eventually(() => fake.openStreams(session.liAt) === 1, 'the stream open again', 10_000);
      const events = (await receiver.waitFor(2, 'sender.updated')).map((e) => JSON.parse(e.body).data);
      assert.deepEqual([events[1].id, events[1].status], [sender.id, 'ok']);
      assertAllThrough(session, downProxy);
    } finally {
      await downProxy.close();
    }
  });
});

describe(`proxies: the private address rule and the sandbox (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let proxy: TestProxy;

  before(async () => {
    proxy = await startSocks5Proxy();
    t = await startTestApp({ env: { AUDIO_ALLOW_PRIVATE_URLS: 'false' } });
  });
  after(() => closeAll(t, proxy));

  it('a proxy on a loopback address is refused unless private addresses are allowed', async () => {
    const account = await t.createAccount();
    const res = await t.send(account.liveKey, {
      ...defaultSendBody('telegram', 'https://audio.example.com/note.mp3'),
      session: { bot_token: BOT_DIRECT, proxy: proxy.url },
    });
    const error = assertErrorEnvelope(res, 422, 'invalid_parameter');
    assert.equal(error.details.field, 'session.proxy');
    assert.match(error.message, /not a public address.*ALLOW_PRIVATE_URLS/);
    assert.equal(proxy.tunnels.length, 0);
  });

  it('a sandbox sender keeps a proxy after checking its syntax only', async () => {
    const account = await t.createAccount();
    const nowhere = `socks5://user:${PASSWORD}@127.0.0.1:${await closedPort()}`;
    const res = await t.send(account.testKey, { ...defaultSendBody('telegram', 'https://audio.example.com/note.mp3'), session: { bot_token: BOT_DIRECT, proxy: nowhere } });
    assert.equal(res.statusCode, 202, res.body);
    const list = await t.request({ method: 'GET', url: `${API}/senders`, key: account.testKey });
    assert.equal(list.json().data[0].proxy, nowhere.replace(`user:${PASSWORD}@`, ''));
    assert.ok(!list.body.includes(PASSWORD));
    const bad = await t.send(account.testKey, { ...defaultSendBody('telegram', 'https://audio.example.com/note.mp3'), session: { bot_token: BOT_DIRECT, proxy: 'socks4://127.0.0.1:1080' } });
    assert.equal(assertErrorEnvelope(bad, 422, 'invalid_parameter').details.field, 'session.proxy');
  });

  it("the dashboard's senders page shows a sandbox sender's proxy without its password, and sets another", async () => {
    const account = await createDashboardAccount(t);
    const sent = await t.send(account.testKey, {
      ...defaultSendBody('telegram', 'https://audio.example.com/note.mp3'),
      session: { bot_token: BOT_LATER, proxy: `socks5://user:${PASSWORD}@proxy.example:1080` },
    });
    assert.equal(sent.statusCode, 202, sent.body);
    const client = new FormClient(t);
    assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
    const page = await client.get('/dashboard/senders');
    assert.equal(page.statusCode, 200);
    assert.match(page.body, /now socks5:\/\/proxy\.example:1080/);
    assert.ok(!page.body.includes(PASSWORD));
    const id = /data-sender-id="(snd_[0-9A-Za-z]+)"/.exec(page.body)![1]!;
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)![1]!;
    const set = await client.post(`/dashboard/senders/${id}/proxy`, { _csrf: csrf, proxy: `http://user:${PASSWORD}@proxy.example:3128` });
    assert.equal(set.statusCode, 200, set.body);
    assert.match(set.body, /now goes through http:\/\/proxy\.example:3128/);
    assert.ok(!set.body.includes(PASSWORD));
    const bad = await client.post(`/dashboard/senders/${id}/proxy`, { _csrf: csrf, proxy: 'ftp://proxy.example' });
    assert.equal(bad.statusCode, 422);
    assert.match(bad.body, /proxy must use one of/);
    const api = await t.request({ method: 'GET', url: `${API}/senders/${id}`, key: account.testKey });
    assert.equal(api.json().proxy, 'http://proxy.example:3128');
  });
});
