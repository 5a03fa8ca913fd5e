import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { sql } from 'kysely';
import { newKeyId, newKeySecret } from '../src/core/ids.js';
import { createKey, hashKeySecret } from '../src/store/keys.js';
import { closeAll } from './fixtures/close-all.js';
import { assertErrorEnvelope, closeSharedAudio, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, type TestAccount, type TestApp } from './fixtures/app-harness.js';
import { test } from './fixtures/timed.js';
import { createDashboardAccount, csrfIn, FormClient } from './fixtures/dashboard-harness.js';

/** POST /send with "dry_run": true, and keys limited to a scope or to senders, as a caller sees them. */

const OTHER_BOT = '987654321:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ';

after(async () => {
  await closeSharedAudio();
});

describe(`dry runs and key scopes (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;

  before(async () => {
    t = await startTestApp({ worker: true });
    account = await t.createAccount({ quota: 2 });
  });
  after(() => closeAll(t));

  const body = (extra: Record<string, unknown> = {}) => ({ platform: 'telegram', recipient: '123456789', audio_url: t.voiceUrl, session: { bot_token: TELEGRAM_TOKEN }, ...extra });
  const usage = async (key: string) => (await t.request({ method: 'GET', url: '/api/v1/usage', key })).json();
  const messages = async (key: string) => (await t.request({ method: 'GET', url: '/api/v1/messages?limit=100', key })).json().data;
  const checkOf = (answer: any, id: string) => answer.checks.find((c: any) => c.id === id);

  test('dry_run: true answers 200 with what would be sent and each check; nothing stored, usage unchanged', async () => {
    const res = await t.send(account.testKey, body({ dry_run: true, caption: 'hi' }), { 'idempotency-key': 'dry-1' });
    assert.equal(res.statusCode, 200, res.body);
    const answer = res.json();
    assert.equal(answer.dry_run, true);
    assert.equal(answer.would_send, true, res.body);
    assert.deepEqual(answer.message, {
      platform: 'telegram',
      recipient: '123456789',
      audio_url: t.voiceUrl,
      sender_id: null,
      env: 'test',
      duration: null,
      caption: 'hi',
      send_at: null,
      cancel_on_reply: false,
      recording_indicator: false,
      recipient_time_zone: null,
    });
    assert.deepEqual(
      answer.checks.map((c: any) => [c.id, c.result]),
      [
        ['validation', 'pass'],
        ['sender', 'pass'],
        ['quota', 'pass'],
        ['daily_rhythm', 'skip'],
        ['suppression', 'pass'],
        ['send_window', 'pass'],
        ['recipient', 'pass'],
        ['audio', 'pass'],
      ],
    );
    assert.equal(checkOf(answer, 'quota').facts.remaining, 2);
    const audio = checkOf(answer, 'audio').facts;
    assert.equal(audio.container, 'Ogg');
    assert.ok(audio.size_bytes > 0 && audio.duration_seconds > 0, JSON.stringify(audio));
    assert.equal(res.headers['x-usage-remaining'], '2');
    assert.ok(res.headers['x-ratelimit-remaining'], 'a dry run spends the rate limit');
    assert.deepEqual(await messages(account.testKey), [], 'no message stored');
    assert.equal((await usage(account.testKey)).usage.total_sent, 0, 'usage unchanged');
    // The Idempotency-Key of a dry run is not kept: a real send with it is a send of its own.
    const real = await t.send(account.testKey, body({ caption: 'hi' }), { 'idempotency-key': 'dry-1' });
    assert.equal(real.statusCode, 202, real.body);
    await t.waitForStatus(account.testKey, real.json().id, ['delivered']);
  });

  test('a dry run says a listed recipient would be refused, and a closed send window would hold the note', async () => {
    const other = await t.createAccount();
    const listed = await t.request({ method: 'POST', url: '/api/v1/suppressions', key: other.testKey, body: { recipients: [{ platform: 'telegram', recipient: '123456789' }] } });
    assert.equal(listed.statusCode, 201, listed.body);
    const real = await t.send(other.testKey, body());
    const refused = assertErrorEnvelope(real, 422, 'recipient_suppressed');
    const dry = await t.send(other.testKey, body({ dry_run: true }));
    assert.equal(dry.statusCode, 200, dry.body);
    assert.equal(dry.json().would_send, false);
    const suppression = checkOf(dry.json(), 'suppression');
    assert.equal(suppression.result, 'fail');
    assert.deepEqual(suppression.error, { code: 'recipient_suppressed', message: refused.message });

    // A window that is never open today or tomorrow in UTC: a day other than today and tomorrow.
    const days = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
    const today = new Date().getUTCDay();
    const windowDay = days[(today + 3) % 7];
    const window = await t.request({ method: 'PATCH', url: '/api/v1/rhythm/telegram', key: other.testKey, body: { send_window: { days: [windowDay], start: '09:00', end: '10:00', time_zone: 'UTC' } } });
    assert.equal(window.statusCode, 200, window.body);
    const held = await t.send(other.testKey, body({ recipient: '123456780', dry_run: true }));
    assert.equal(held.statusCode, 200, held.body);
    const sendWindow = checkOf(held.json(), 'send_window');
    assert.equal(sendWindow.result, 'wait', held.body);
    const opening = new Date(sendWindow.facts.next_attempt_at);
    assert.equal(days[opening.getUTCDay()], windowDay);
    assert.equal(opening.toISOString().slice(11, 16), '09:00');
    assert.equal(held.json().would_send, true, 'a note that waits would still be sent');
    assert.deepEqual(await messages(other.testKey), [], 'no message stored');
  });

  test('a body the real send refuses is refused the same way in a dry run', async () => {
    const real = await t.send(account.testKey, body({ recipient: 'nobody here' }));
    const dry = await t.send(account.testKey, body({ recipient: 'nobody here', dry_run: true }));
    assert.deepEqual(assertErrorEnvelope(dry, 422, 'invalid_parameter'), assertErrorEnvelope(real, 422, 'invalid_parameter'));
    assertErrorEnvelope(await t.send(account.testKey, body({ dry_run: 'yes' })), 400, 'invalid_request');
  });

  test('a broken audio URL: the dry run reports the error the real send fails with', async () => {
    const broken = t.voiceUrl.replace(/[^/]+$/, 'missing.ogg');
    const dry = await t.send(account.testKey, body({ audio_url: broken, dry_run: true }));
    assert.equal(dry.statusCode, 200, dry.body);
    assert.equal(dry.json().would_send, false);
    const audio = checkOf(dry.json(), 'audio');
    assert.equal(audio.result, 'fail');
    const real = await t.send(account.testKey, body({ audio_url: broken }));
    assert.equal(real.statusCode, 202, real.body);
    const failed = await t.waitForStatus(account.testKey, real.json().id, ['failed', 'delivered']);
    assert.equal(failed.status, 'failed');
    assert.equal(audio.error.code, failed.error.code, `dry ${JSON.stringify(audio.error)} vs real ${JSON.stringify(failed.error)}`);
  });

  test('an account over its quota: the dry run reports quota_exceeded as the real send answers it', async () => {
    // The quota is 2: real sends until one is refused (a failed note that never reached the platform is given back).
    let real = await t.send(account.testKey, body());
    for (let i = 0; i < 3 && real.statusCode === 202; i++) real = await t.send(account.testKey, body());
    const refused = assertErrorEnvelope(real, 402, 'quota_exceeded');
    const dry = await t.send(account.testKey, body({ dry_run: true }));
    assert.equal(dry.statusCode, 200, dry.body);
    assert.equal(dry.json().would_send, false);
    const quota = checkOf(dry.json(), 'quota');
    assert.equal(quota.result, 'fail');
    assert.deepEqual(quota.error, { code: refused.code, message: refused.message });
    assert.equal(quota.facts.remaining, 0);
  });

  test('existing keys are full: they still create sessions (POST beyond send)', async () => {
    const res = await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: account.testKey });
    assert.equal(res.statusCode, 201, res.body);
    // A key written as before scopes existed (no scope or senders column given): the storage's default makes it full.
    const secret = newKeySecret('test');
    await sql`insert into api_keys (id, account_id, env, prefix, secret_hash, replaces, created_at, expires_at, revoked_at, last_used_at)
      values (${newKeyId()}, ${account.accountId}, ${'test'}, ${secret.slice(0, 12)}, ${hashKeySecret(secret)}, ${null}, ${Date.now()}, ${null}, ${null}, ${null})`.execute(t.app.services.db.kysely);
    const old = await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: secret });
    assert.equal(old.statusCode, 201, old.body);
    assert.equal((await t.send(secret, body({ session: { bot_token: OTHER_BOT }, dry_run: true }))).statusCode, 200, 'and sends from any sender');
  });

  test('a read key: GET answers, POST /send and cancel are 403 insufficient_scope naming its scope', async () => {
    const other = await t.createAccount({ quota: 10 });
    const read = (await createKey(t.app.services.db.kysely, other.accountId, 'test', Date.now(), { scope: 'read' })).secret;
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/messages', key: read })).statusCode, 200);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/usage', key: read })).statusCode, 200);
    const refused = assertErrorEnvelope(await t.send(read, body()), 403, 'insufficient_scope');
    assert.deepEqual(refused.details, { scope: 'read', required_scope: 'send' });
    assert.match(refused.message, /scope is read/);
    const sent = await t.send(other.testKey, body({ send_at: new Date(Date.now() + 86_400_000).toISOString() }));
    assert.equal(sent.statusCode, 202, sent.body);
    assertErrorEnvelope(await t.request({ method: 'POST', url: `/api/v1/messages/${sent.json().id}/cancel`, key: read }), 403, 'insufficient_scope');
    assertErrorEnvelope(await t.request({ method: 'POST', url: '/api/v1/recipients/check', key: read, body: { platform: 'telegram', recipient: '1', session: { bot_token: TELEGRAM_TOKEN } } }), 403, 'insufficient_scope');
  });

  test('a send key: sends, cancels and reads; anything else (a session, a webhook endpoint) is 403', async () => {
    const other = await t.createAccount({ quota: 10 });
    const send = (await createKey(t.app.services.db.kysely, other.accountId, 'test', Date.now(), { scope: 'send' })).secret;
    const sent = await t.send(send, body({ send_at: new Date(Date.now() + 86_400_000).toISOString() }));
    assert.equal(sent.statusCode, 202, sent.body);
    const canceled = await t.request({ method: 'POST', url: `/api/v1/messages/${sent.json().id}/cancel`, key: send });
    assert.equal(canceled.statusCode, 200, canceled.body);
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/messages/${sent.json().id}`, key: send })).statusCode, 200);
    const refused = assertErrorEnvelope(await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: send }), 403, 'insufficient_scope');
    assert.deepEqual(refused.details, { scope: 'send', required_scope: 'full' });
  });

  test('a key limited to senders sends only from them: 403 sender_not_allowed otherwise, in dry runs too', async () => {
    const other = await t.createAccount({ quota: 10 });
    const first = await t.send(other.testKey, body());
    assert.equal(first.statusCode, 202, first.body);
    await t.waitForStatus(other.testKey, first.json().id, ['delivered']);
    const bot = (await t.request({ method: 'GET', url: '/api/v1/senders', key: other.testKey })).json().data[0];
    const limited = (await createKey(t.app.services.db.kysely, other.accountId, 'test', Date.now(), { scope: 'send', senders: [bot.id] })).secret;
    const own = await t.send(limited, body({ dry_run: true }));
    assert.equal(own.statusCode, 200, own.body);
    assert.equal(own.json().message.sender_id, bot.id);
    assert.equal((await t.send(limited, body())).statusCode, 202);
    for (const dryRun of [true, false]) {
      const refused = assertErrorEnvelope(await t.send(limited, body({ session: { bot_token: OTHER_BOT }, dry_run: dryRun })), 403, 'sender_not_allowed');
      assert.deepEqual(refused.details, { scope: 'send', senders: [bot.id] });
    }
    // Asking about a recipient is as limited.
    const check = (botToken: string) => t.request({ method: 'POST', url: '/api/v1/recipients/check', key: limited, body: { platform: 'telegram', recipient: '123456789', session: { bot_token: botToken } } });
    assert.equal((await check(TELEGRAM_TOKEN)).statusCode, 200);
    assertErrorEnvelope(await check(OTHER_BOT), 403, 'sender_not_allowed');
    // Canceling is as limited: a note scheduled from the other bot is not this key's to cancel; its own is.
    const later = new Date(Date.now() + 86_400_000).toISOString();
    const others = await t.send(other.testKey, body({ session: { bot_token: OTHER_BOT }, send_at: later }));
    assert.equal(others.statusCode, 202, others.body);
    const refusedCancel = assertErrorEnvelope(await t.request({ method: 'POST', url: `/api/v1/messages/${others.json().id}/cancel`, key: limited }), 403, 'sender_not_allowed');
    assert.deepEqual(refusedCancel.details, { scope: 'send', senders: [bot.id] });
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/messages/${others.json().id}`, key: limited })).json().status, 'queued', 'still scheduled, and readable');
    const mine = await t.send(limited, body({ send_at: later }));
    assert.equal(mine.statusCode, 202, mine.body);
    assert.equal((await t.request({ method: 'POST', url: `/api/v1/messages/${mine.json().id}/cancel`, key: limited })).statusCode, 200);
    assertErrorEnvelope(await t.request({ method: 'POST', url: '/api/v1/messages/msg_doesnotexist/cancel', key: limited }), 404, 'not_found');
    // A WhatsApp session named by its own id.
    const session = (await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: other.testKey })).json().session_id;
    const bySession = (await createKey(t.app.services.db.kysely, other.accountId, 'test', Date.now(), { senders: [session] })).secret;
    assertErrorEnvelope(await t.send(bySession, body({ dry_run: true })), 403, 'sender_not_allowed');
  });

  test('the OpenAPI document names insufficient_scope on every 403, and sender_not_allowed on POST /send', async () => {
    const doc = (await t.request({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    const forbidden: Array<[string, string]> = [];
    for (const [path, operations] of Object.entries<any>(doc.paths)) {
      for (const [method, operation] of Object.entries<any>(operations)) {
        const response = operation.responses?.['403'];
        if (response) forbidden.push([`${method.toUpperCase()} ${path}`, response.description]);
      }
    }
    assert.ok(forbidden.length > 5, JSON.stringify(forbidden));
    for (const [route, description] of forbidden) assert.match(description, /insufficient_scope/, route);
    const send = forbidden.find(([route]) => route === 'POST /api/v1/send');
    assert.ok(send, 'POST /send lists 403');
    assert.match(send[1], /sender_not_allowed/);
  });

  test('the dashboard makes a key with a scope and senders, and its keys page shows both', async () => {
    const person = await createDashboardAccount(t);
    const client = new FormClient(t, '10.9.0.1');
    assert.equal((await client.signIn(person.email, person.password)).statusCode, 303);
    const csrf = csrfIn((await client.get('/dashboard/keys')).body);
    const sender = `snd_${'C'.repeat(24)}`;
    const made = await client.post('/dashboard/keys', { _csrf: csrf, env: 'test', scope: 'read', senders: sender });
    assert.equal(made.statusCode, 201, made.body);
    const secret = /<code id="new-secret">([^<]+)<\/code>/.exec(made.body)![1]!;
    const row = new RegExp(`<tr data-key-id="[^"]+">\\s*<td><code>${secret.slice(0, 12)}…</code></td>\\s*<td>test<br><span class="key-access">scope read, as <code>${sender}</code></span></td>`);
    assert.match(made.body, row);
    assert.match(made.body, /<td>test<br><span class="key-access">scope full<\/span><\/td>/, 'the starting keys are full, for any sender');
    assertErrorEnvelope(await t.send(secret, body({ dry_run: true })), 403, 'insufficient_scope');
    const wrong = await client.post('/dashboard/keys', { _csrf: csrf, env: 'test', scope: 'read', senders: 'jane' });
    assert.equal(wrong.statusCode, 422);
    assert.match(wrong.body, /jane is not a sender id/);
  });
});
