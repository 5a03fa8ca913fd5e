import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeAll } from './fixtures/close-all.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';
import { startSocks5Proxy, type TestProxy } from './fixtures/proxies.js';
import { connectionProxies } from '../src/platforms/proxy/connection-proxy.js';
import { holdToAddressRule, senderProxyUrl } from '../src/platforms/proxy/sender-proxy-url.js';
import { ProxyFailure } from '../src/platforms/proxy/tunnel.js';
import { setSenderProxy } from '../src/store/sender-proxy.js';
import { createLogger } from '../src/logger.js';

/**
 * The private-address rule (docs/proxies.md, "No door inside") holds at every connection, not only when
 * a proxy is set: a name is resolved again each time (where it points may have changed since), and a
 * proxy that now falls under the rule is refused like one that does not answer (the sender waits,
 * `proxy_unreachable`), never used and never a reason to connect directly.
 */


after(closeSharedAudio);

describe(`proxies: the private-address rule at every connection, and sandbox sessions (${STORAGE_LABEL})`, () => {
  let proxy: TestProxy;
  let t: TestApp;

  before(async () => {
    proxy = await startSocks5Proxy();
    t = await startTestApp({ env: { ALLOW_PRIVATE_URLS: 'false' }, worker: false });
  });
  after(() => closeAll(t, proxy));

  it('a name is resolved again at each use: public then, private now, it is refused', async () => {
    let answer = ['93.184.216.34'];
    const lookup = async () => answer;
    await holdToAddressRule('socks5://user:secret@proxy.example:1080', { allowPrivate: false, lookup });
    answer = ['10.0.0.5'];
    await assert.rejects(holdToAddressRule('socks5://user:secret@proxy.example:1080', { allowPrivate: false, lookup }), (error: unknown) => {
      assert.ok(error instanceof ProxyFailure);
      assert.match(error.message, /the proxy socks5:\/\/proxy\.example:1080 is refused: the proxy's host is not a public address/);
      assert.ok(!error.message.includes('secret') && !error.message.includes('10.0.0.5'));
      return true;
    });
    // ALLOW_PRIVATE_URLS lifts it, as for audio URLs.
    await holdToAddressRule('socks5://proxy.example:1080', { allowPrivate: true, lookup });
  });

  it("a bot's or LinkedIn cookie's kept proxy is held to the rule again each time it is read for a connection", async () => {
    const db = t.app.services.db.kysely;
    const secretBox = t.app.services.secretBox;
    const account = await t.createAccount();
    // Kept while it was allowed (a setting changed since, or a name that points elsewhere now).
    const ref = { accountId: account.accountId, env: 'live', platform: 'telegram', senderKey: 'bot_addressrule' };
    await setSenderProxy(db, ref, 'telegram_bot', { sealed: secretBox.seal(proxy.url), shown: `socks5://127.0.0.1:${proxy.port}` });
    // What a delivery, a recipient check and a listener read before they connect (attempt.ts, recipients.ts, the listeners).
    await assert.rejects(senderProxyUrl({ db, secretBox, outboundProxy: undefined, allowPrivate: false }, ref), (error: unknown) => {
      assert.ok(error instanceof ProxyFailure);
      assert.match(error.message, new RegExp(`the proxy socks5://127\\.0\\.0\\.1:${proxy.port} is refused: the proxy's host is not a public address`));
      return true;
    });
    await assert.rejects(senderProxyUrl({ db, secretBox, outboundProxy: undefined, allowPrivate: false }, { platform: 'telegram', senderKey: ref.senderKey }), ProxyFailure);
    assert.equal(await senderProxyUrl({ db, secretBox, outboundProxy: undefined, allowPrivate: true }, ref), proxy.url);
    // The operator's OUTBOUND_PROXY is of their own choice: not held to it.
    const other = { ...ref, senderKey: 'bot_without_proxy' };
    assert.equal(await senderProxyUrl({ db, secretBox, outboundProxy: 'socks5://127.0.0.1:1080', allowPrivate: false }, other), 'socks5://127.0.0.1:1080');
    assert.equal(proxy.tunnels.length, 0, 'the proxy was not used');
  });

  it("a WhatsApp session's or Telegram account's connection is refused the same way, its sender marked", async () => {
    const db = t.app.services.db.kysely;
    const account = await t.createAccount();
    const ref = { accountId: account.accountId, env: 'live', platform: 'whatsapp', senderKey: 'ws_addressrule' };
    await setSenderProxy(db, ref, 'whatsapp_session', { sealed: t.app.services.secretBox.seal(proxy.url), shown: `socks5://127.0.0.1:${proxy.port}` });
    const proxies = connectionProxies({
      db,
      secretBox: t.app.services.secretBox,
      outboundProxy: undefined,
      allowPrivate: false,
      platform: 'whatsapp',
      target: { host: '127.0.0.1', port: 9 },
      schemes: ['http', 'https', 'socks5', 'socks5h'],
      timeoutMs: 2_000,
      log: createLogger('silent'),
    });
    await assert.rejects(proxies.next(ref.senderKey), /is refused: the proxy's host is not a public address/);
    const row = await db.selectFrom('sender_records').select(['status', 'reason']).where('sender_key', '=', ref.senderKey).executeTakeFirstOrThrow();
    assert.deepEqual([row.status, row.reason], ['disconnected', 'proxy_unreachable']);
    assert.equal(proxy.tunnels.length, 0);
  });

  it('a sandbox WhatsApp session and Telegram account keep a proxy after its syntax check only; HTTP is refused for a Telegram account there too', async () => {
    const account = await t.createAccount();
    const secret = 'sandbox-Pr0xy-Pa55';
    const wa = await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: account.testKey, body: { proxy: `http://u:${secret}@proxy.example:3128` } });
    assert.equal(wa.statusCode, 201, wa.body);
    const tg = await t.request({ method: 'POST', url: '/api/v1/telegram/sessions', key: account.testKey, body: { proxy: `socks5h://u:${secret}@proxy.example` } });
    assert.equal(tg.statusCode, 201, tg.body);
    const httpForAccount = await t.request({ method: 'POST', url: '/api/v1/telegram/sessions', key: account.testKey, body: { proxy: 'https://proxy.example:443' } });
    assert.equal(httpForAccount.statusCode, 422, httpForAccount.body);
    assert.equal(httpForAccount.json().error.details.field, 'proxy');
    const listed = await t.request({ method: 'GET', url: '/api/v1/senders', key: account.testKey });
    assert.ok(!listed.body.includes(secret));
    const shown = listed.json().data.map((s: { kind: string; proxy: string }) => `${s.kind} ${s.proxy}`).sort();
    assert.deepEqual(shown, ['telegram_account socks5h://proxy.example:1080', 'whatsapp_session http://proxy.example:3128']);
    // PATCH clears and sets them as for any sender.
    const telegramSender = listed.json().data.find((s: { kind: string }) => s.kind === 'telegram_account');
    const cleared = await t.request({ method: 'PATCH', url: `/api/v1/senders/${telegramSender.id}`, key: account.testKey, body: { proxy: null } });
    assert.equal(cleared.json().proxy, null);
    const refused = await t.request({ method: 'PATCH', url: `/api/v1/senders/${telegramSender.id}`, key: account.testKey, body: { proxy: 'http://proxy.example:3128' } });
    assert.equal(refused.statusCode, 422, refused.body);
    assert.match(refused.json().error.message, /socks5:\/\/ or socks5h:\/\//);
  });
});
