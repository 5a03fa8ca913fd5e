import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeAll } from './fixtures/close-all.js';
import { clientHints, DEFAULT_USER_AGENT } from '../src/platforms/linkedin/browser.js';
import { DeliveryCookies } from '../src/platforms/linkedin/cookies.js';
import { closeSharedAudio, redisReachable, STORAGE_LABEL, startTestApp, TEST_REDIS_URL, type TestAccount, type TestApp } from './fixtures/app-harness.js';
import { startLinkedinVoyagerFake, type LinkedinVoyagerFake, type VoyagerAccount, type VoyagerCall } from './fakes/linkedin-voyager.js';

/**
 * LinkedIn as the browser that holds the session speaks it: the web app's headers on every call, the
 * browser's own User-Agent and cookies, cookies LinkedIn rotates followed within a delivery, sends into
 * existing conversations, and what LinkedIn's refusals (999, a CSRF failure, a session it ended) become.
 * The Voyager fake refuses what the web app would never send, so each rule shows as a failed delivery.
 */

const JANE = { publicId: 'jane-smith-a1b2c3', urn: 'urn:li:fsd_profile:ACoAABjaneSmith01' };
const PACE = { minMs: 50, maxMs: 80 };
const FIREFOX_MAC = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14.7; rv:144.0) Gecko/20100101 Firefox/144.0';
const EDGE_WIN = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/151.0.0.0 Safari/537.36 Edg/151.0.0.0';

after(async () => {
  await closeSharedAudio();
});

describe(`LinkedIn sessions as the browser holds them (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let fake: LinkedinVoyagerFake;
  let account: TestAccount;
  const redisKeyPrefix = `voicenote-test:${randomBytes(6).toString('hex')}`;

  function newSession(extra: Partial<VoyagerAccount> = {}): VoyagerAccount {
    const session: VoyagerAccount = {
      liAt: `AQEDAQ${randomBytes(18).toString('base64url')}`,
      csrfToken: `ajax:${BigInt(`0x${randomBytes(8).toString('hex')}`).toString()}`,
      profileUrn: `urn:li:fsd_profile:ACoAAB${randomBytes(6).toString('hex')}`,
      ...extra,
    };
    fake.addAccount(session);
    return session;
  }

  const sessionBody = (s: VoyagerAccount, extra: Record<string, unknown> = {}) => ({ li_at: s.liAt, csrf_token: s.csrfToken, ...extra });

  async function sendWith(app: TestApp, recipient: string, session: Record<string, unknown>): Promise<string> {
    const res = await app.send(account.liveKey, { platform: 'linkedin', recipient, audio_url: app.mp3Url, session });
    assert.equal(res.statusCode, 202, res.body);
    return res.json().id as string;
  }

  const outcome = (id: string, app = t): Promise<any> => app.waitForStatus(account.liveKey, id, ['delivered', 'failed'], 30_000);
  const callsOf = (s: VoyagerAccount): VoyagerCall[] => fake.calls.filter((c) => c.liAt === s.liAt);
  const cookiesOf = (call: VoyagerCall): Map<string, string> =>
    new Map(String(call.headers.cookie ?? '').split(/;\s*/).filter(Boolean).map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)] as [string, string]));

  before(async () => {
    fake = await startLinkedinVoyagerFake({ profiles: [JANE] });
    t = await startTestApp({ env: { LINKEDIN_API_ROOT: fake.apiRoot }, linkedinPace: { ...PACE, timeoutMs: 4_000 }, redisKeyPrefix });
    account = await t.createAccount({ plan: 'growth' });
  });

  after(() => closeAll(t, fake));

  it("sends the web app's headers on every Voyager call, and a current desktop Chrome without user_agent", async () => {
    const s = newSession();
    const status = await outcome(await sendWith(t, JANE.publicId, sessionBody(s)));
    assert.equal(status.status, 'delivered', JSON.stringify(status));
    assert.deepEqual(fake.violations, []);
    const calls = callsOf(s);
    assert.deepEqual(calls.map((c) => c.step), ['me', 'profile', 'uploadMetadata', 'upload', 'createMessage']);
    const pageInstances = new Set<string>();
    for (const call of calls) {
      const h = call.headers;
      assert.equal(h['user-agent'], DEFAULT_USER_AGENT);
      assert.match(DEFAULT_USER_AGENT, /^Mozilla\/5\.0 \(Windows NT 10\.0; Win64; x64\) .* Chrome\/\d{3}\.0\.0\.0 Safari\/537\.36$/);
      assert.equal(h['csrf-token'], s.csrfToken);
      assert.equal(cookiesOf(call).get('JSESSIONID'), `"${s.csrfToken}"`);
      assert.equal(h['x-restli-protocol-version'], '2.0.0');
      if (call.step === 'upload') continue;
      const track = JSON.parse(String(h['x-li-track']));
      assert.deepEqual(Object.keys(track), [
        'clientVersion',
        'mpVersion',
        'osName',
        'timezoneOffset',
        'timezone',
        'deviceFormFactor',
        'mpName',
        'displayDensity',
        'displayWidth',
        'displayHeight',
      ]);
      assert.equal(track.mpName, 'voyager-web');
      assert.equal(h['x-li-lang'], 'en_US');
      assert.match(String(h['x-li-page-instance']), /^urn:li:page:d_flagship3_messaging_conversation_detail;[A-Za-z0-9+/]{22}==$/);
      pageInstances.add(String(h['x-li-page-instance']));
      assert.equal(h.referer, `${fake.apiRoot}/messaging/`);
      assert.equal(h.accept, call.step === 'createMessage' ? 'application/json' : 'application/vnd.linkedin.normalized+json+2.1');
      // Chrome 152's own client hints: the GREASE brand, its version and its place follow from 152.
      assert.equal(h['sec-ch-ua'], '"Chromium";v="152", "Not?A_Brand";v="24", "Google Chrome";v="152"');
      assert.equal(h['sec-ch-ua-mobile'], '?0');
      assert.equal(h['sec-ch-ua-platform'], '"Windows"');
    }
    assert.equal(pageInstances.size, 1, 'one page view for the whole delivery');
  });

  it("sends session.user_agent verbatim: the session lives; without it LinkedIn ends a session bound to another browser", async () => {
    const firefox = newSession({ userAgent: FIREFOX_MAC });
    const edge = newSession({ userAgent: EDGE_WIN });
    const [a, b] = await Promise.all([sendWith(t, JANE.publicId, sessionBody(firefox, { user_agent: FIREFOX_MAC })), sendWith(t, JANE.publicId, sessionBody(edge))]);
    const delivered = await outcome(a!);
    assert.equal(delivered.status, 'delivered', JSON.stringify(delivered));
    for (const call of callsOf(firefox)) {
      assert.equal(call.headers['user-agent'], FIREFOX_MAC);
      assert.equal(call.headers['sec-ch-ua'], undefined, 'Firefox sends no client hints');
    }
    const ended = await outcome(b!);
    assert.equal(ended.status, 'failed');
    assert.equal(ended.error.code, 'session_expired', JSON.stringify(ended));
    assert.match(ended.error.message, /deleted the li_at cookie/);
    assert.deepEqual(fake.endedByUserAgent, [edge.liAt]);
    assert.deepEqual(fake.violations, []);
  });

  it("sends the browser's whole cookie jar, and takes x-li-lang and the time zone from LinkedIn's own cookies in it", async () => {
    const cookies = { bcookie: '"v=2&1f2e3d4c-aaaa-bbbb-cccc-0123456789ab"', bscookie: '"v=1&2026112501&AQGx"', lang: 'v=2&lang=fr-fr', timezone: 'Europe/Paris', li_theme: 'light' };
    const s = newSession({ cookies });
    const header = [
      `bcookie=${cookies.bcookie}`,
      `bscookie=${cookies.bscookie}`,
      `li_at=${s.liAt}`,
      `JSESSIONID="${s.csrfToken}"`,
      `lang=${cookies.lang}`,
      `timezone=${cookies.timezone}`,
      `li_theme=${cookies.li_theme}`,
    ].join('; ');
    const status = await outcome(await sendWith(t, JANE.publicId, sessionBody(s, { cookies: header })));
    assert.equal(status.status, 'delivered', JSON.stringify(status));
    assert.deepEqual(fake.violations, []);
    for (const call of callsOf(s)) {
      const sent = cookiesOf(call);
      for (const [name, value] of Object.entries(cookies)) assert.equal(sent.get(name), value, `${call.step} carries ${name}`);
      if (call.step === 'upload') continue;
      assert.equal(call.headers['x-li-lang'], 'fr_FR');
      assert.equal(call.headers['accept-language'], 'fr-FR,fr;q=0.9');
      const track = JSON.parse(String(call.headers['x-li-track']));
      assert.equal(track.timezone, 'Europe/Paris');
      assert.ok(track.timezoneOffset === 1 || track.timezoneOffset === 2, `Paris is UTC+1 or +2, not ${track.timezoneOffset}`);
    }

    // Without the jar, the fake (as LinkedIn) sees a client that is not the browser.
    const bare = newSession({ cookies: { bcookie: '"v=2&00000000-1111-2222-3333-444444444444"' } });
    const refused = await outcome(await sendWith(t, JANE.publicId, sessionBody(bare)));
    assert.equal(refused.status, 'failed');
    assert.match(fake.violations.join('\n'), /the browser's cookie bcookie is missing/);
    fake.violations.length = 0;
  });

  it('follows cookies LinkedIn sets (Set-Cookie) on the later calls of the delivery, JSESSIONID and csrf-token included', async () => {
    const s = newSession();
    fake.rotateCookieOn(s.liAt, 'profile', 'JSESSIONID');
    fake.rotateCookieOn(s.liAt, 'uploadMetadata', 'li_mc');
    const status = await outcome(await sendWith(t, JANE.publicId, sessionBody(s)));
    assert.equal(status.status, 'delivered', JSON.stringify(status));
    assert.deepEqual(fake.violations, []);
    const rotated = fake.rotatedValues.filter((r) => r.liAt === s.liAt);
    const jsession = rotated.find((r) => r.name === 'JSESSIONID')!.value;
    const liMc = rotated.find((r) => r.name === 'li_mc')!.value;
    const calls = callsOf(s);
    const byStep = new Map(calls.map((c) => [c.step, c]));
    assert.equal(cookiesOf(byStep.get('profile')!).get('JSESSIONID'), `"${s.csrfToken}"`, 'before the rotation: the session as given');
    for (const step of ['uploadMetadata', 'upload', 'createMessage'] as const) {
      const call = byStep.get(step)!;
      assert.equal(cookiesOf(call).get('JSESSIONID'), jsession, `${step}: the JSESSIONID LinkedIn set`);
      assert.equal(call.headers['csrf-token'], jsession.slice(1, -1), `${step}: csrf-token follows JSESSIONID`);
    }
    for (const step of ['upload', 'createMessage'] as const) assert.equal(cookiesOf(byStep.get(step)!).get('li_mc'), liMc);
    // LinkedIn's lidc comes new on every answer, and each call carries the latest.
    for (let i = 1; i < calls.length; i++) assert.ok(cookiesOf(calls[i]!).get('lidc'), `${calls[i]!.step} carries lidc`);
    assert.notEqual(cookiesOf(calls[1]!).get('lidc'), cookiesOf(calls[2]!).get('lidc'));
  });

  it('sends into an existing conversation by its URN or its thread URL: conversationUrn, no lookup, no hostRecipientUrns', async () => {
    const byUrn = newSession();
    const byUrl = newSession();
    const urnThread = `2-${Buffer.from(`${randomBytes(8).toString('hex')}_010`).toString('base64')}`;
    const urlThread = `2-${Buffer.from(`${randomBytes(8).toString('hex')}_100`).toString('base64')}`;
    const urn = fake.addConversation(byUrn.liAt, urnThread);
    const urnOfUrl = fake.addConversation(byUrl.liAt, urlThread);
    const ids = await Promise.all([
      sendWith(t, urn, sessionBody(byUrn)),
      sendWith(t, `https://www.linkedin.com/messaging/thread/${encodeURIComponent(urlThread)}/`, sessionBody(byUrl)),
    ]);
    for (const id of ids) assert.equal((await outcome(id)).status, 'delivered');
    assert.deepEqual(fake.violations, []);
    for (const [s, expected, thread] of [
      [byUrn, urn, urnThread],
      [byUrl, urnOfUrl, urlThread],
    ] as const) {
      assert.deepEqual(callsOf(s).map((c) => c.step), ['me', 'uploadMetadata', 'upload', 'createMessage'], 'no profile lookup');
      const message = fake.messages.find((m) => m.liAt === s.liAt)!;
      assert.equal(message.body.message.conversationUrn, expected);
      assert.equal('hostRecipientUrns' in message.body, false);
      assert.equal(callsOf(s)[0]!.headers.referer, `${fake.apiRoot}/messaging/thread/${encodeURIComponent(thread)}/`);
    }

    // A conversation of another mailbox is not this account's to write to: nothing is uploaded.
    const stranger = newSession();
    const failed = await outcome(await sendWith(t, urn, sessionBody(stranger)));
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error.code, 'recipient_not_found');
    assert.deepEqual(callsOf(stranger).map((c) => c.step), ['me']);
  });

  it('answers 422 for a malformed conversation recipient and for cookies or user_agent that do not fit the session', async () => {
    const s = newSession();
    const cases: Array<{ recipient?: string; session?: Record<string, unknown>; field: string }> = [
      { recipient: 'urn:li:msg_conversation:(nope)', field: 'recipient' },
      { recipient: 'urn:li:msg_conversation:(urn:li:fsd_profile:ACoAAB1,two words)', field: 'recipient' },
      { recipient: 'https://www.linkedin.com/messaging/thread/', field: 'recipient' },
      { recipient: 'https://www.linkedin.com/messaging/thread/a%20b/', field: 'recipient' },
      { session: sessionBody(s, { cookies: `li_at=AQEDAQsomeoneElse; JSESSIONID="${s.csrfToken}"` }), field: 'session.cookies' },
      { session: sessionBody(s, { cookies: `li_at=${s.liAt}; JSESSIONID="ajax:1"` }), field: 'session.cookies' },
      { session: sessionBody(s, { cookies: 'bcookie' }), field: 'session.cookies' },
      { session: sessionBody(s, { cookies: 'bcookie=a\r\nX-Injected: 1' }), field: 'session.cookies' },
      { session: sessionBody(s, { cookies: 42 }), field: 'session.cookies' },
      { session: sessionBody(s, { user_agent: 'curl/8.5.0' }), field: 'session.user_agent' },
      { session: sessionBody(s, { user_agent: `${FIREFOX_MAC}\r\nX-Injected: 1` }), field: 'session.user_agent' },
    ];
    for (const c of cases) {
      const res = await t.send(account.liveKey, { platform: 'linkedin', recipient: c.recipient ?? JANE.publicId, audio_url: t.mp3Url, session: c.session ?? sessionBody(s) });
      assert.equal(res.statusCode, 422, `${JSON.stringify(c)}: ${res.body}`);
      const body = res.json();
      assert.equal(body.error.code, 'invalid_parameter');
      assert.equal(body.error.details.field, c.field, res.body);
      assert.ok(!res.body.includes(s.liAt) && !res.body.includes(s.csrfToken), 'no secret in the answer');
    }
    // Cookies that agree with the session (JSESSIONID with or without its quotes) are taken.
    for (const cookies of [`li_at=${s.liAt}; JSESSIONID="${s.csrfToken}"`, `JSESSIONID=${s.csrfToken}; lang=v=2&lang=en-us`]) {
      const res = await t.send(account.testKey, { platform: 'linkedin', recipient: JANE.publicId, audio_url: t.mp3Url, session: sessionBody(s, { cookies, user_agent: FIREFOX_MAC }) });
      assert.equal(res.statusCode, 202, res.body);
    }
  });

  it('maps 403 "CSRF check failed." to invalid_session, other 403s on the send to recipient_blocked, a checkpoint redirect to session_expired', async () => {
    const csrf = newSession();
    const refused = newSession();
    fake.failNext('createMessage', { status: 403 });
    const ids = await Promise.all([sendWith(t, JANE.publicId, { li_at: csrf.liAt, csrf_token: 'ajax:4242424242' }), sendWith(t, JANE.publicId, sessionBody(refused))]);
    const [a, b] = await Promise.all(ids.map((id) => outcome(id)));
    assert.equal(a.error.code, 'invalid_session', JSON.stringify(a));
    assert.match(a.error.message, /CSRF check failed/);
    assert.equal(b.error.code, 'recipient_blocked', JSON.stringify(b));
    assert.match(b.error.message, /403: injected by the test/);
    assert.equal(callsOf(refused).filter((c) => c.step === 'createMessage').length, 1, 'permanent: not retried');

    // A redirect to the checkpoint (LinkedIn's security challenge) is a session to sign in again, never followed.
    const challenged = newSession();
    fake.failNext('uploadMetadata', { status: 303, headers: { location: `${fake.apiRoot}/checkpoint/challenge/AgF3xyz?ut=1` } });
    const c = await outcome(await sendWith(t, JANE.publicId, sessionBody(challenged)));
    assert.equal(c.error.code, 'session_expired', JSON.stringify(c));
    assert.deepEqual(callsOf(challenged).map((call) => call.step), ['me', 'profile', 'uploadMetadata']);
  });

  it('a 999 is not retried, fails the message as refused as automated, and rests the li_at 15 minutes: its other notes wait, not counted as attempts', async () => {
    const s = newSession();
    fake.flagAutomated(s.liAt);
    const first = await outcome(await sendWith(t, JANE.publicId, sessionBody(s)));
    assert.equal(first.status, 'failed');
    assert.equal(first.error.code, 'platform_rate_limited');
    assert.match(first.error.message, /automated/);
    assert.match(first.error.message, /999/);
    assert.deepEqual(callsOf(s).map((c) => c.status), [999], 'one call, not retried');

    const before = Date.now();
    const waiting = await sendWith(t, JANE.publicId, sessionBody(s));
    const detail = await waitForRetry(t, waiting);
    assert.equal(detail.status, 'queued');
    assert.equal(detail.attempt_count, 0, 'a wait for the rest is not an attempt');
    // The li_at's sender rests (docs/senders.md, "Senders"): its note waits for the rest, shown as such.
    assert.equal(detail.waiting_for, 'sender_rest');
    const senders = (await t.request({ method: 'GET', url: '/api/v1/senders', key: account.liveKey })).json().data;
    const resting = senders.find((x: any) => x.status === 'resting');
    assert.ok(resting, JSON.stringify(senders));
    assert.match(resting.reason, /automated/);
    assert.ok(Math.abs(Date.parse(resting.until) - (before + 15 * 60_000)) < 10_000, resting.until);
    const nextAt = Date.parse(detail.next_attempt_at);
    assert.ok(nextAt >= before + 14 * 60_000 && nextAt <= Date.now() + 15 * 60_000 + 5_000, `next attempt at ${detail.next_attempt_at}`);
    assert.deepEqual(callsOf(s).map((c) => c.status), [999], 'LinkedIn is not called while the account rests');

    // Another node of the deployment (another app sharing Redis) holds back the same li_at.
    if (TEST_REDIS_URL && (await redisReachable())) {
      const other = await startTestApp({ env: { LINKEDIN_API_ROOT: fake.apiRoot }, linkedinPace: { ...PACE, timeoutMs: 4_000 }, redisKeyPrefix });
      try {
        const otherAccount = await other.createAccount({ plan: 'growth' });
        const res = await other.send(otherAccount.liveKey, { platform: 'linkedin', recipient: JANE.publicId, audio_url: other.mp3Url, session: sessionBody(s) });
        assert.equal(res.statusCode, 202, res.body);
        const elsewhere = await waitForRetry(other, res.json().id, otherAccount.liveKey);
        assert.equal(elsewhere.status, 'queued');
        assert.equal(elsewhere.attempts.at(-1).error.code, 'platform_rate_limited');
        assert.ok(Date.parse(elsewhere.next_attempt_at) >= before + 14 * 60_000);
        assert.deepEqual(callsOf(s).map((c) => c.status), [999]);
      } finally {
        await other.close();
      }
    }
  });

  /** The message log's view of a message once an attempt has put it back in the queue. */
  async function waitForRetry(app: TestApp, id: string, key = account.liveKey): Promise<any> {
    const deadline = Date.now() + 20_000;
    let last: any;
    while (Date.now() < deadline) {
      const res = await app.request({ method: 'GET', url: `/api/v1/messages/${id}`, key });
      last = res.json();
      if (res.statusCode === 200 && last.status === 'queued' && (last.attempts.length > 0 || last.waiting_for !== null)) return last;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`message ${id} was not put back in the queue; last: ${JSON.stringify(last)}`);
  }
});

describe('client hints that agree with the User-Agent', () => {
  it('are the ones Chrome sends (a public capture of Chrome 134 on macOS), Edge names itself, Firefox sends none', () => {
    assert.deepEqual(clientHints('Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/134.0.0.0 Safari/537.36'), {
      'sec-ch-ua': '"Chromium";v="134", "Not:A-Brand";v="24", "Google Chrome";v="134"',
      'sec-ch-ua-mobile': '?0',
      'sec-ch-ua-platform': '"macOS"',
    });
    assert.match(clientHints(EDGE_WIN)['sec-ch-ua']!, /"Microsoft Edge";v="151"/);
    assert.deepEqual(clientHints(FIREFOX_MAC), {});
  });
});

describe('the cookies of one LinkedIn delivery', () => {
  const session = { li_at: 'AQEDAQsecretLiAt', csrf_token: 'ajax:123456789', cookies: 'bcookie="v=2&abc"; lidc="b=OLD"; li_at=AQEDAQsecretLiAt' };

  it("replaces a browser cookie by the one LinkedIn sets under the same name, whatever its domain, and sends no cookie to another host", async () => {
    const jar = await DeliveryCookies.of('https://www.linkedin.com', session);
    assert.equal(await jar.header('https://www.linkedin.com/voyager/api/me'), 'bcookie="v=2&abc"; lidc="b=OLD"; li_at=AQEDAQsecretLiAt; JSESSIONID="ajax:123456789"');
    await jar.absorb('https://www.linkedin.com/voyager/api/me', ['lidc="b=NEW"; Domain=.linkedin.com; Path=/; Secure; SameSite=None', 'JSESSIONID="ajax:987"; Domain=.www.linkedin.com; Path=/; Secure']);
    const header = await jar.header('https://www.linkedin.com/voyager/api/me');
    assert.deepEqual(header.split('; ').filter((c) => c.startsWith('lidc=')), ['lidc="b=NEW"'], header);
    assert.deepEqual(header.split('; ').filter((c) => c.startsWith('JSESSIONID=')), ['JSESSIONID="ajax:987"'], header);
    assert.equal(await jar.value('JSESSIONID'), 'ajax:987');
    assert.equal(await jar.header('https://dms.licdn.com/upload/1'), '', "linkedin.com's cookies stay on linkedin.com");
    assert.equal(await jar.signedOut(), false);
  });

  it('knows the session ended when LinkedIn deletes li_at (expired, or set to "delete me")', async () => {
    const expired = await DeliveryCookies.of('https://www.linkedin.com', session);
    await expired.absorb('https://www.linkedin.com/voyager/api/me', 'li_at=; Domain=.www.linkedin.com; Path=/; Max-Age=0');
    assert.equal(await expired.signedOut(), true);
    const deleted = await DeliveryCookies.of('https://www.linkedin.com', session);
    await deleted.absorb('https://www.linkedin.com/voyager/api/me', 'li_at="delete me"; Domain=.www.linkedin.com; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT');
    assert.equal(await deleted.signedOut(), true);
  });
});
