import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { listKeys } from '../src/store/keys.js';
import { closeSharedAudio, connectedSandboxSession, defaultSendBody, startTestApp, STORAGE_LABEL, type TestApp } from './fixtures/app-harness.js';
import { cookieValue, createDashboardAccount, csrfIn, FormClient, setCookies, type DashboardAccount } from './fixtures/dashboard-harness.js';
import { TEST_TLS_CERT, TEST_TLS_KEY } from './fixtures/tls-cert.js';

const sessionCookieLine = (lines: string[]): string => {
  const line = lines.find((l) => l.startsWith('vn_session='));
  assert.ok(line, `a vn_session cookie in ${JSON.stringify(lines)}`);
  return line;
};

describe(`dashboard sign-in, cookies and CSRF (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: DashboardAccount;

  before(async () => {
    t = await startTestApp({ worker: false });
    account = await createDashboardAccount(t);
  });
  after(async () => {
    await t?.close();
    await closeSharedAudio();
  });

  const keyCount = async (accountId: string) => (await listKeys(t.app.services.db.kysely, accountId)).length;

  it('a wrong password or an unknown email is refused alike, and sets no session', async () => {
    const client = new FormClient(t, '10.1.0.1');
    const wrong = await client.signIn(account.email, 'wrong password');
    assert.equal(wrong.statusCode, 401);
    assert.match(wrong.body, /Wrong email or password\./);
    assert.equal(cookieValue(wrong, 'vn_session'), undefined);
    const unknown = await client.signIn('nobody@example.com', account.password);
    assert.equal(unknown.statusCode, 401);
    assert.match(unknown.body, /Wrong email or password\./);
    assert.equal(cookieValue(unknown, 'vn_session'), undefined);
    // Signed-in pages still send the visitor to the form.
    const keys = await client.get('/dashboard/keys');
    assert.equal(keys.statusCode, 303);
    assert.equal(keys.headers.location, '/dashboard/sign-in');
  });

  it('signs in with email (any case) and password: an HttpOnly, SameSite=Lax cookie scoped to /dashboard, stored only hashed', async () => {
    const client = new FormClient(t, '10.1.0.2');
    const res = await client.signIn(account.email.toUpperCase(), account.password);
    assert.equal(res.statusCode, 303, res.body);
    assert.equal(res.headers.location, '/dashboard');
    const line = sessionCookieLine(setCookies(res));
    const attrs = line.split(';').map((a) => a.trim());
    assert.ok(attrs.includes('HttpOnly'), line);
    assert.ok(attrs.includes('SameSite=Lax'), line);
    assert.ok(attrs.includes('Path=/dashboard'), line);
    assert.ok(!attrs.includes('Secure'), `plain http: no Secure (${line})`);
    const token = cookieValue(res, 'vn_session')!;
    assert.ok(token.length >= 40);
    const rows = await t.app.services.db.kysely.selectFrom('dashboard_sessions').selectAll().where('account_id', '=', account.accountId).execute();
    assert.ok(rows.length >= 1);
    assert.ok(rows.every((r) => r.token_hash !== token));
    assert.ok(rows.some((r) => r.token_hash === createHash('sha256').update(token).digest('hex')));
    const usage = await client.get('/dashboard/usage');
    assert.equal(usage.statusCode, 200);
    assert.match(usage.body, /<h1>Usage<\/h1>/);
    assert.equal(usage.headers['cache-control'], 'no-store');
    assert.match(String(usage.headers['content-security-policy']), /frame-ancestors 'none'/);
  });

  it('an X-Forwarded-Proto header from an untrusted client does not make the cookie Secure; TLS does', async () => {
    const spoofed = new FormClient(t, '10.1.0.3');
    const page = await spoofed.get('/dashboard/sign-in', { 'x-forwarded-proto': 'https' });
    const res = await spoofed.post('/dashboard/sign-in', { _csrf: csrfIn(page.body), email: account.email, password: account.password }, { 'x-forwarded-proto': 'https' });
    assert.equal(res.statusCode, 303);
    assert.ok(!sessionCookieLine(setCookies(res)).includes('Secure'));

    // The same app behind TLS of its own (a custom HTTPS server routing into it).
    const fastify = t.app.server.app;
    await fastify.ready();
    const server = https.createServer({ key: TEST_TLS_KEY, cert: TEST_TLS_CERT }, (req, res) => fastify.routing(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const call = (method: string, path: string, headers: Record<string, string>, body?: string) =>
      new Promise<{ status: number; cookies: string[]; body: string }>((resolve, reject) => {
        const req = https.request({ host: '127.0.0.1', port, method, path, headers, rejectUnauthorized: false }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, cookies: (res.headers['set-cookie'] ?? []).map(String), body: text }));
        });
        req.on('error', reject);
        req.end(body);
      });
    try {
      const form = await call('GET', '/dashboard/sign-in', {});
      const formCookie = form.cookies.find((c) => c.startsWith('vn_signin='))!;
      assert.ok(formCookie.split(';').map((a) => a.trim()).includes('Secure'), formCookie);
      const body = new URLSearchParams({ _csrf: csrfIn(form.body), email: account.email, password: account.password }).toString();
      const signedIn = await call('POST', '/dashboard/sign-in', {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: formCookie.split(';')[0]!,
        origin: `https://127.0.0.1:${port}`,
        host: `127.0.0.1:${port}`,
      }, body);
      assert.equal(signedIn.status, 303, signedIn.body);
      const attrs = sessionCookieLine(signedIn.cookies).split(';').map((a) => a.trim());
      assert.ok(attrs.includes('Secure') && attrs.includes('HttpOnly') && attrs.includes('SameSite=Lax'), attrs.join('; '));
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('refuses every change without the sign-in’s CSRF token, with another sign-in’s token, or from another origin', async () => {
    const client = new FormClient(t, '10.1.0.4');
    assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
    const other = new FormClient(t, '10.1.0.5');
    assert.equal((await other.signIn(account.email, account.password)).statusCode, 303);
    const token = csrfIn((await client.get('/dashboard/keys')).body);
    const otherToken = csrfIn((await other.get('/dashboard/keys')).body);
    assert.notEqual(token, otherToken);
    const before = await keyCount(account.accountId);

    for (const [what, fields, headers] of [
      ['no token', { env: 'test' }, {}],
      ['a wrong token', { env: 'test', _csrf: 'x'.repeat(token.length) }, {}],
      ['another sign-in’s token', { env: 'test', _csrf: otherToken }, {}],
      ['another origin', { env: 'test', _csrf: token }, { origin: 'https://evil.example' }],
    ] as const) {
      const res = await client.post('/dashboard/keys', fields, headers);
      assert.equal(res.statusCode, 403, `${what}: ${res.statusCode}`);
      assert.match(res.body, /nothing was changed/, what);
    }
    assert.equal(await keyCount(account.accountId), before, 'no key was created');

    // Sign-out and the environment switch are changes too.
    assert.equal((await client.post('/dashboard/sign-out', {})).statusCode, 403);
    assert.equal((await client.post('/dashboard/env', { env: 'live' })).statusCode, 403);
    assert.equal((await client.get('/dashboard/keys')).statusCode, 200, 'still signed in');

    // A change without any sign-in goes to the form and changes nothing.
    const anonymous = new FormClient(t, '10.1.0.6');
    const res = await anonymous.post('/dashboard/keys', { env: 'test', _csrf: token });
    assert.equal(res.statusCode, 303);
    assert.equal(res.headers.location, '/dashboard/sign-in');

    // With its own token the same change goes through.
    const created = await client.post('/dashboard/keys', { env: 'test', _csrf: token });
    assert.equal(created.statusCode, 201);
    assert.equal(await keyCount(account.accountId), before + 1);
  });

  it('refuses a sign-in form that did not come from the sign-in page (login CSRF)', async () => {
    const client = new FormClient(t, '10.1.0.7');
    const res = await client.post('/dashboard/sign-in', { email: account.email, password: account.password, _csrf: 'forged' });
    assert.equal(res.statusCode, 403);
    assert.equal(cookieValue(res, 'vn_session'), undefined);
  });

  it('limits sign-in attempts per client address and email, with growing waits; wrong passwords from elsewhere never lock the owner out', async () => {
    const target = await createDashboardAccount(t);
    // One address, one email: after three wrong passwords each further attempt waits (1 s, then doubling).
    const guesser = new FormClient(t, '10.2.0.1');
    for (let i = 0; i < 3; i += 1) assert.equal((await guesser.signIn(target.email, `guess ${i}`)).statusCode, 401, `attempt ${i + 1}`);
    const limited = await guesser.signIn(target.email, target.password);
    assert.equal(limited.statusCode, 429, 'even the right password waits');
    assert.match(limited.body, /Too many sign-in attempts. Try again in 1 second/);
    assert.ok(Number(limited.headers['retry-after']) >= 1);
    assert.equal(cookieValue(limited, 'vn_session'), undefined);
    // The same address may still try other emails.
    assert.equal((await guesser.signIn(account.email, account.password)).statusCode, 303);

    // Many wrong passwords for the email from many other addresses (more than ten, the old lock per email)…
    for (let i = 0; i < 12; i += 1) {
      const res = await new FormClient(t, `10.2.1.${i + 1}`).signIn(target.email, `guess ${i}`);
      assert.equal(res.statusCode, 401, `address ${i + 1}`);
    }
    // …and the owner, from their own address, signs in at once.
    assert.equal((await new FormClient(t, '10.2.0.99').signIn(target.email, target.password)).statusCode, 303);

    // Thirty attempts per client address, whatever the emails.
    const client = new FormClient(t, '10.3.0.1');
    for (let i = 0; i < 30; i += 1) {
      const res = await client.signIn(`someone${i}@example.com`, 'guess');
      assert.equal(res.statusCode, 401, `address attempt ${i + 1}`);
    }
    const byAddress = await client.signIn(account.email, account.password);
    assert.equal(byAddress.statusCode, 429);
  });

  it('changes the password: the old one stops working and other sign-ins end', async () => {
    const owner = await createDashboardAccount(t);
    const a = new FormClient(t, '10.4.0.1');
    const b = new FormClient(t, '10.4.0.2');
    assert.equal((await a.signIn(owner.email, owner.password)).statusCode, 303);
    assert.equal((await b.signIn(owner.email, owner.password)).statusCode, 303);
    const token = csrfIn((await a.get('/dashboard/account')).body);

    const wrongCurrent = await a.post('/dashboard/account/password', { _csrf: token, current_password: 'nope', new_password: 'a new secret 123', confirm_password: 'a new secret 123' });
    assert.equal(wrongCurrent.statusCode, 401);
    assert.match(wrongCurrent.body, /current password is wrong/);
    const mismatch = await a.post('/dashboard/account/password', { _csrf: token, current_password: owner.password, new_password: 'a new secret 123', confirm_password: 'another' });
    assert.equal(mismatch.statusCode, 422);
    const short = await a.post('/dashboard/account/password', { _csrf: token, current_password: owner.password, new_password: 'short', confirm_password: 'short' });
    assert.equal(short.statusCode, 422);

    const changed = await a.post('/dashboard/account/password', { _csrf: token, current_password: owner.password, new_password: 'a new secret 123', confirm_password: 'a new secret 123' });
    assert.equal(changed.statusCode, 303);
    assert.equal((await a.get(changed.headers.location as string)).statusCode, 200, 'this sign-in stays');
    assert.equal((await b.get('/dashboard/account')).statusCode, 303, 'the other sign-in ended');
    assert.equal((await new FormClient(t, '10.4.0.3').signIn(owner.email, owner.password)).statusCode, 401);
    assert.equal((await new FormClient(t, '10.4.0.4').signIn(owner.email, 'a new secret 123')).statusCode, 303);
  });

  it('acts only on the signed-in account: another account’s key cannot be rolled or revoked', async () => {
    const stranger = await createDashboardAccount(t);
    const strangerKeys = await listKeys(t.app.services.db.kysely, stranger.accountId);
    const client = new FormClient(t, '10.5.0.1');
    assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
    const token = csrfIn((await client.get('/dashboard/keys')).body);
    for (const action of ['roll', 'revoke']) {
      const res = await client.post(`/dashboard/keys/${strangerKeys[0]!.id}/${action}`, { _csrf: token });
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, '/dashboard/keys?notice=unknown');
    }
    const after = await listKeys(t.app.services.db.kysely, stranger.accountId);
    assert.deepEqual(after, strangerKeys);
    const usage = await t.request({ method: 'GET', url: '/api/v1/usage', key: stranger.testKey });
    assert.equal(usage.statusCode, 200);
  });

  it('shows usage of the period, test and live side by side, and the day’s sends in the chart', async () => {
    const owner = await createDashboardAccount(t);
    for (let i = 0; i < 2; i += 1) assert.equal((await t.send(owner.testKey, defaultSendBody('telegram', t.voiceUrl))).statusCode, 202);
    assert.equal((await t.send(owner.liveKey, defaultSendBody('linkedin', t.voiceUrl))).statusCode, 202);
    const client = new FormClient(t, '10.6.0.1');
    assert.equal((await client.signIn(owner.email, owner.password)).statusCode, 303);
    const page = (await client.get('/dashboard/usage')).body;
    const card = (env: string) => page.slice(page.indexOf(`data-env="${env}"`), page.indexOf('</section>', page.indexOf(`data-env="${env}"`)));
    const fact = (env: string, name: string) => new RegExp(`data-usage="${name}">(\\d+)<`).exec(card(env))?.[1];
    assert.equal(fact('test', 'sent'), '2');
    assert.equal(fact('test', 'quota'), '500');
    assert.equal(fact('test', 'remaining'), '498');
    assert.equal(fact('test', 'telegram'), '2');
    assert.equal(fact('live', 'sent'), '1');
    assert.equal(fact('live', 'linkedin'), '1');
    // The chart (test environment, the dashboard's default) has today's two telegram sends.
    const today = new Date().toISOString().slice(5, 10);
    const telegram = page.slice(page.indexOf('data-platform="telegram"'), page.indexOf('</figure>', page.indexOf('data-platform="telegram"')));
    assert.match(telegram, new RegExp(`<title>${today}: 2 sent</title>`));
    assert.match(telegram, /<svg class="chart"[^>]*role="img"/);
  });

  it('refuses a pairing-code phone number that is not 7 to 15 digits, creating no session', async () => {
    const client = new FormClient(t, '10.9.0.1');
    assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
    const token = csrfIn((await client.get('/dashboard/whatsapp')).body);
    const res = await client.post('/dashboard/whatsapp', { _csrf: token, phone_number: '+1 415 555' });
    assert.equal(res.statusCode, 422);
    assert.match(res.body, /role="alert">The phone number must have 7 to 15 digits/);
    const list = await t.request({ method: 'GET', url: '/api/v1/whatsapp/sessions', key: account.testKey });
    assert.deepEqual(list.json().sessions, []);
  });

  it('keeps the dashboard out of the API document', async () => {
    const doc = await t.request({ method: 'GET', url: '/api/v1/openapi.json' });
    assert.equal(doc.statusCode, 200);
    assert.equal(Object.keys(doc.json().paths).some((p) => p.startsWith('/dashboard')), false);
  });
});

describe(`dashboard message log (${STORAGE_LABEL})`, () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp();
  });
  after(async () => {
    await t?.close();
    await closeSharedAudio();
  });

  it('serves a message’s converted audio only to its own account, whole or by range', async () => {
    const owner = await createDashboardAccount(t);
    const stranger = await createDashboardAccount(t);
    const sent = await t.send(owner.testKey, defaultSendBody('telegram', t.mp3Url));
    assert.equal(sent.statusCode, 202);
    const id = sent.json().id as string;
    await t.waitForStatus(owner.testKey, id, ['delivered'], 60_000);
    const url = `/dashboard/messages/${id}/audio`;

    const anonymous = await new FormClient(t, '10.7.0.1').get(url);
    assert.equal(anonymous.statusCode, 303);
    assert.equal(anonymous.headers.location, '/dashboard/sign-in');

    const other = new FormClient(t, '10.7.0.2');
    assert.equal((await other.signIn(stranger.email, stranger.password)).statusCode, 303);
    assert.equal((await other.get(url)).statusCode, 404);
    assert.equal((await other.get(`/dashboard/messages/${id}`)).statusCode, 404);

    const client = new FormClient(t, '10.7.0.3');
    assert.equal((await client.signIn(owner.email, owner.password)).statusCode, 303);
    const whole = await t.app.server.app.inject({ method: 'GET', url, headers: { cookie: `vn_session=${client.cookies.get('vn_session')}` } });
    assert.equal(whole.statusCode, 200);
    assert.match(String(whole.headers['content-type']), /^audio\/ogg/);
    assert.equal(whole.rawPayload.subarray(0, 4).toString('latin1'), 'OggS');
    assert.equal(Number(whole.headers['content-length']), whole.rawPayload.length);
    const part = await t.app.server.app.inject({ method: 'GET', url, headers: { cookie: `vn_session=${client.cookies.get('vn_session')}`, range: 'bytes=0-3' } });
    assert.equal(part.statusCode, 206);
    assert.equal(part.headers['content-range'], `bytes 0-3/${whole.rawPayload.length}`);
    assert.equal(part.body, 'OggS');

    // The log finds it by recipient, and the detail shows the attempt and both audio forms.
    const list = await client.get('/dashboard/messages?recipient=123456789&status=delivered');
    assert.match(list.body, new RegExp(`data-message-id="${id}"`));
    const none = await client.get('/dashboard/messages?recipient=999&status=delivered');
    assert.doesNotMatch(none.body, new RegExp(`data-message-id="${id}"`));
    const detail = await client.get(`/dashboard/messages/${id}`);
    assert.equal(detail.statusCode, 200);
    assert.match(detail.body, /As detected[\s\S]*MPEG[\s\S]*As sent[\s\S]*ogg_opus/);
    assert.match(detail.body, /<td>delivered<\/td>/);
    assert.match(detail.body, /<audio controls/);

    // Once the cache has let the converted file go, the page says so and the player route answers 404.
    const cacheDir = path.join(t.dataDir, 'audio-cache');
    for (const name of await readdir(cacheDir)) if (name.endsWith('.ogg')) await rm(path.join(cacheDir, name));
    const gone = await client.get(`/dashboard/messages/${id}`);
    assert.match(gone.body, /no longer in the audio cache/);
    assert.doesNotMatch(gone.body, /<audio controls/);
    assert.equal((await client.get(url)).statusCode, 404);
  });
});

describe(`dashboard listen receipts (${STORAGE_LABEL})`, () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp();
  });
  after(async () => {
    await t?.close();
    await closeSharedAudio();
  });

  it('shows a sandbox WhatsApp voice note being read and played, and says Telegram has no receipts', async () => {
    const owner = await createDashboardAccount(t);
    const sessionId = await connectedSandboxSession(t, owner.testKey);
    const sent = await t.send(owner.testKey, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient: '15550000005' });
    assert.equal(sent.statusCode, 202, sent.body);
    const id = sent.json().id as string;
    await t.waitForStatus(owner.testKey, id, ['delivered'], 60_000);
    const client = new FormClient(t, '10.8.0.1');
    assert.equal((await client.signIn(owner.email, owner.password)).statusCode, 303);
    // The sandbox plays the receipts a few seconds after delivery.
    const deadline = Date.now() + 60_000;
    let body = '';
    while (Date.now() < deadline) {
      body = (await client.get(`/dashboard/messages/${id}`)).body;
      if (/<li>played:/.test(body)) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.match(body, /data-receipts="some"/);
    assert.match(body, /<li>read: <time[^>]*>[^<]*<\/time> \(sandbox\)<\/li>/);
    assert.match(body, /<li>played: <time/);

    const telegram = await t.send(owner.testKey, defaultSendBody('telegram', t.voiceUrl));
    const telegramId = telegram.json().id as string;
    await t.waitForStatus(owner.testKey, telegramId, ['delivered'], 60_000);
    const page = (await client.get(`/dashboard/messages/${telegramId}`)).body;
    assert.match(page, /data-receipts="none">Telegram does not tell bots when a voice note is heard/);
  });
});

describe(`dashboard behind a trusted proxy (${STORAGE_LABEL})`, () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp({ worker: false, env: { TRUST_PROXY: 'true' } });
  });
  after(async () => {
    await t?.close();
    await closeSharedAudio();
  });

  it('makes the session cookie Secure when the trusted proxy says the browser came over https', async () => {
    const account = await createDashboardAccount(t);
    const viaTls = new FormClient(t, '127.0.0.1');
    const form = await viaTls.get('/dashboard/sign-in', { 'x-forwarded-proto': 'https' });
    const res = await viaTls.post('/dashboard/sign-in', { _csrf: csrfIn(form.body), email: account.email, password: account.password }, { 'x-forwarded-proto': 'https' });
    assert.equal(res.statusCode, 303);
    assert.ok(sessionCookieLine(setCookies(res)).split(';').map((a) => a.trim()).includes('Secure'));

    const plain = new FormClient(t, '127.0.0.1');
    const res2 = await plain.signIn(account.email, account.password);
    assert.equal(res2.statusCode, 303);
    assert.ok(!sessionCookieLine(setCookies(res2)).includes('Secure'), 'plain http through the proxy: not Secure');
  });

  it('refuses a webhook URL that is not http(s), showing why, and adds none', async () => {
    const account = await createDashboardAccount(t);
    const client = new FormClient(t);
    assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
    const token = csrfIn((await client.get('/dashboard/webhooks')).body);
    const res = await client.post('/dashboard/webhooks', { _csrf: token, url: 'ftp://example.com/hook', events: 'voice_note.failed' });
    assert.equal(res.statusCode, 422);
    assert.match(res.body, /role="alert">[^<]*url/);
    assert.match(res.body, /value="ftp:\/\/example.com\/hook"/, 'the form keeps what was typed');
    const list = await t.request({ method: 'GET', url: '/api/v1/webhook_endpoints', key: account.testKey });
    assert.equal(list.statusCode, 200);
    assert.deepEqual(list.json().data, []);
  });
});
