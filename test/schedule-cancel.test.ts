import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeAll } from './fixtures/close-all.js';
import { claimDueMessages } from '../src/store/messages.js';
import { cancelMessage } from '../src/store/cancel.js';
import { dailyCounts } from '../src/store/daily-usage.js';
import { purgeOldMessages } from '../src/housekeeping/retention.js';
import { READ_REQUESTS_PER_MINUTE } from '../src/core/plans.js';
import {
  assertErrorEnvelope,
  closeSharedAudio,
  defaultSendBody,
  LINKEDIN_SESSION,
  STORAGE_LABEL,
  startTestApp,
  storedCredentials,
  TELEGRAM_TOKEN,
  type TestAccount,
  type TestApp,
} from './fixtures/app-harness.js';
import { createDashboardAccount, csrfIn, FormClient } from './fixtures/dashboard-harness.js';
import { startTelegramApi, type TelegramFake } from './fakes/telegram-api.js';
import { startWebhookReceiver, type WebhookReceiver } from './fakes/webhook-receiver.js';

/**
 * Scheduled sends (`send_at`), taking a queued note back (POST /messages/{id}/cancel) and the refusal of
 * request fields the API does not know, as a caller sees them.
 */

const STATUS_FIELDS = ['created_at', 'delivered_at', 'error', 'id', 'platform', 'recipient', 'status'];
const SENT_FIELDS = ['created_at', 'id', 'platform', 'recipient', 'status'];
const MINUTE = 60_000;
const DAY = 86_400_000;
const inMs = (ms: number): string => new Date(Date.now() + ms).toISOString();

after(async () => {
  await closeSharedAudio();
});

const cancel = (t: TestApp, key: string, id: string) => t.request({ method: 'POST', url: `/api/v1/messages/${id}/cancel`, key });

async function accepted(t: TestApp, key: string, body: Record<string, unknown>, headers?: Record<string, string>): Promise<string> {
  const res = await t.send(key, body, headers);
  assert.equal(res.statusCode, 202, res.body);
  return res.json<{ id: string }>().id;
}

describe(`send_at, cancel and unknown fields without a worker (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  let receiver: WebhookReceiver;

  before(async () => {
    receiver = await startWebhookReceiver();
    t = await startTestApp({ worker: false, webhooks: { retryDelaysMs: [20, 20, 20], pollMs: 50 } });
    account = await t.createAccount({ quota: 10 });
  });
  after(() => closeAll(t, receiver));

  const telegram = (overrides: Record<string, unknown> = {}) => ({ ...defaultSendBody('telegram', t.voiceUrl), ...overrides });

  it('refuses a send_at that is not a timestamp with a time zone, too far back or too far ahead: 422 naming send_at', async () => {
    const cases: Array<[string, unknown]> = [
      ['a word', 'tomorrow'],
      ['no time zone', '2026-11-25T14:30:00'],
      ['a date only', '2026-11-25'],
      ['an impossible date', '2026-02-30T10:00:00Z'],
      ['a number', 1_900_000_000],
      ['an object', { at: 'now' }],
      ['more than 5 minutes past', inMs(-6 * MINUTE)],
      ['more than 30 days ahead', inMs(30 * DAY + 10 * MINUTE)],
    ];
    for (const [label, value] of cases) {
      const res = await t.send(account.testKey, telegram({ send_at: value }));
      const error = assertErrorEnvelope(res, 422, 'invalid_parameter');
      assert.equal(error.details.field, 'send_at', `${label}: ${res.body}`);
    }
    const usage = (await t.request({ method: 'GET', url: '/api/v1/usage', key: account.testKey })).json();
    assert.equal(usage.usage.total_sent, 0, 'a refused send is not counted');
  });

  it('accepts send_at with Z or an offset, a few minutes past, or null; keeps the 202 and status bodies to their fields', async () => {
    // The moment an hour from now, written as a clock two hours ahead of UTC shows it.
    const moment = Date.now() + 3600_000;
    const offset = new Date(moment + 2 * 3600_000).toISOString().replace('Z', '+02:00');
    for (const value of [inMs(10 * MINUTE), inMs(-4 * MINUTE), null, inMs(29 * DAY)]) {
      const res = await t.send(account.testKey, telegram({ send_at: value }));
      assert.equal(res.statusCode, 202, `${String(value)}: ${res.body}`);
      assert.deepEqual(Object.keys(res.json()).sort(), SENT_FIELDS, 'the 202 body keeps its exact fields');
      const status = await t.request({ method: 'GET', url: `/api/v1/status/${res.json().id}`, key: account.testKey });
      assert.deepEqual(Object.keys(status.json()).sort(), STATUS_FIELDS, 'the status lookup keeps its exact fields');
      assert.equal(status.json().status, 'queued');
    }
    // An offset other than Z names the same moment.
    const id = await accepted(t, account.testKey, telegram({ send_at: offset }));
    const detail = (await t.request({ method: 'GET', url: `/api/v1/messages/${id}`, key: account.testKey })).json();
    assert.equal(detail.send_at, new Date(moment).toISOString());
  });

  it('shows send_at in the message log (list and detail) and next_attempt_at at it; null when sent at once', async () => {
    const a = await t.createAccount();
    const sendAt = new Date(Math.ceil((Date.now() + 3 * DAY) / 1000) * 1000).toISOString();
    const scheduled = await accepted(t, a.testKey, telegram({ send_at: sendAt }));
    const atOnce = await accepted(t, a.testKey, telegram());
    const list = (await t.request({ method: 'GET', url: '/api/v1/messages', key: a.testKey })).json();
    assert.equal(list.data.find((m: any) => m.id === scheduled).send_at, sendAt);
    assert.equal(list.data.find((m: any) => m.id === atOnce).send_at, null);
    const detail = (await t.request({ method: 'GET', url: `/api/v1/messages/${scheduled}`, key: a.testKey })).json();
    assert.equal(detail.send_at, sendAt);
    assert.equal(detail.next_attempt_at, sendAt, 'the note is due at its send_at');
    assert.equal(detail.status, 'queued');
    assert.equal(detail.canceled_at, null);
  });

  it('counts a scheduled send at acceptance (quota headers) and replays it under its Idempotency-Key', async () => {
    const a = await t.createAccount({ quota: 5 });
    const body = telegram({ send_at: inMs(DAY) });
    const first = await t.send(a.testKey, body, { 'idempotency-key': 'sched-1' });
    assert.equal(first.statusCode, 202, first.body);
    assert.equal(first.headers['x-usage-remaining'], '4');
    const again = await t.send(a.testKey, body, { 'idempotency-key': 'sched-1' });
    assert.equal(again.statusCode, 202);
    assert.equal(again.json().id, first.json().id);
    const usage = (await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey })).json();
    assert.equal(usage.usage.total_sent, 1);
    // Canceled, then the same request again: the key's answer, nothing new sent or counted.
    assert.equal((await cancel(t, a.testKey, first.json().id)).statusCode, 200);
    const replay = await t.send(a.testKey, body, { 'idempotency-key': 'sched-1' });
    assert.equal(replay.json().id, first.json().id);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${first.json().id}`, key: a.testKey })).json().status, 'canceled');
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey })).json().usage.total_sent, 0);
  });

  it('cancels a queued note: 200 with the status lookup, now canceled; status, log, quota, usage and a webhook follow', async () => {
    const a = await t.createAccount({ quota: 3 });
    const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: a.testKey, body: { url: receiver.url('/cancel') } });
    assert.equal(hook.statusCode, 201, hook.body);
    assert.ok(hook.json().events.includes('voice_note.canceled'), 'subscribed by default');
    const id = await accepted(t, a.testKey, telegram({ send_at: inMs(DAY) }));
    const before = await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey });
    assert.equal(before.json().limits.remaining, 2);
    assert.equal(before.json().usage.total_sent, 1);

    const res = await cancel(t, a.testKey, id);
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.deepEqual(Object.keys(body).sort(), STATUS_FIELDS);
    assert.equal(body.id, id);
    assert.equal(body.status, 'canceled');
    assert.equal(body.delivered_at, null);
    assert.equal(body.error, null);
    // The "other endpoints" bucket, not the send bucket.
    assert.equal(res.headers['x-ratelimit-limit'], String(READ_REQUESTS_PER_MINUTE));

    const status = (await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: a.testKey })).json();
    assert.deepEqual(status, body);
    assert.equal(await storedCredentials(t, id), null, 'the sealed session is erased');

    const usage = await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey });
    assert.equal(usage.json().limits.remaining, 3, 'the note is given back to the quota');
    assert.equal(usage.json().usage.total_sent, 0, 'total_sent counts notes accepted and not canceled');
    assert.equal(usage.json().usage.by_platform.telegram, 0);
    assert.equal(usage.headers['x-usage-remaining'], '3');
    const days = await dailyCounts(t.app.services.db.kysely, { accountId: a.accountId, env: 'test' }, Date.now() - DAY, Date.now() + DAY);
    assert.equal(days.reduce((sum, d) => sum + d.sent, 0), 0, "the dashboard's daily chart does not count it either");

    const filtered = (await t.request({ method: 'GET', url: '/api/v1/messages?status=canceled', key: a.testKey })).json();
    assert.deepEqual(filtered.data.map((m: any) => m.id), [id]);
    const detail = (await t.request({ method: 'GET', url: `/api/v1/messages/${id}`, key: a.testKey })).json();
    assert.equal(detail.status, 'canceled');
    assert.equal(typeof detail.canceled_at, 'string');
    assert.equal(detail.next_attempt_at, null);

    const [event] = await receiver.waitFor(1, 'voice_note.canceled');
    const parsed = JSON.parse(event!.body);
    assert.deepEqual(parsed.data, { ...body, cancel_reason: 'requested' }, 'the event carries the status lookup and why it was canceled');
  });

  it('gives the quota back for real: a full quota takes a new send again after a cancel', async () => {
    const a = await t.createAccount({ quota: 1 });
    const id = await accepted(t, a.testKey, telegram({ send_at: inMs(DAY) }));
    assertErrorEnvelope(await t.send(a.testKey, telegram()), 402, 'quota_exceeded');
    assert.equal((await cancel(t, a.testKey, id)).statusCode, 200);
    const next = await t.send(a.testKey, telegram());
    assert.equal(next.statusCode, 202, next.body);
    assert.equal(next.headers['x-usage-remaining'], '0');
  });

  it('answers 409 not_cancelable with details.status for a note already canceled or being delivered', async () => {
    const a = await t.createAccount();
    const id = await accepted(t, a.testKey, telegram({ send_at: inMs(DAY) }));
    assert.equal((await cancel(t, a.testKey, id)).statusCode, 200);
    const twice = assertErrorEnvelope(await cancel(t, a.testKey, id), 409, 'not_cancelable');
    assert.deepEqual(twice.details, { status: 'canceled' });

    // A worker's claim: the note is in hand, too late to take back.
    const taken = await accepted(t, a.testKey, telegram());
    const claimed = await claimDueMessages(t.app.services.db.kysely, t.app.services.db.dialect, 'test-worker', { limit: 100, leaseMs: MINUTE });
    assert.ok(claimed.some((m) => m.id === taken));
    const late = assertErrorEnvelope(await cancel(t, a.testKey, taken), 409, 'not_cancelable');
    assert.deepEqual(late.details, { status: 'processing' });
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${taken}`, key: a.testKey })).json().status, 'processing');
  });

  it('a canceled note is final: retention purges it once old, like a delivered one', async () => {
    const a = await t.createAccount();
    const id = await accepted(t, a.testKey, telegram({ send_at: inMs(DAY) }));
    assert.equal((await cancel(t, a.testKey, id)).statusCode, 200);
    const db = t.app.services.db.kysely;
    await db.updateTable('messages').set({ created_at: Date.now() - 400 * DAY }).where('id', '=', id).execute();
    assert.ok((await purgeOldMessages(db, { days: 365, pauseMs: 0 })) >= 1);
    assertErrorEnvelope(await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: a.testKey }), 404, 'not_found');
  });

  it('in storage, claims and cancels of the same messages at once: each message is claimed or canceled, never both', async (ctx) => {
    const a = await t.createAccount({ quota: 1000 });
    const ids = new Set<string>();
    for (let i = 0; i < 60; i++) ids.add(await accepted(t, a.testKey, telegram({ recipient: String(330000000 + i) })));
    const { kysely, dialect } = t.app.services.db;
    const owner = { accountId: a.accountId, env: 'test' };
    const claimed = new Set<string>();
    // Three "workers" claiming a few at a time while every message is canceled, all interleaved.
    const workers = ['w1', 'w2', 'w3'].map(async (worker) => {
      for (let turn = 0; turn < 30; turn++) {
        for (const row of await claimDueMessages(kysely, dialect, worker, { limit: 3, leaseMs: MINUTE })) {
          if (!ids.has(row.id)) continue;
          assert.ok(!claimed.has(row.id), `${row.id} claimed twice`);
          claimed.add(row.id);
        }
      }
    });
    const cancels = [...ids].map((id) => cancelMessage(kysely, owner, id).then((outcome) => ({ id, outcome })));
    const [outcomes] = await Promise.all([Promise.all(cancels), Promise.all(workers)]);
    for (const { id, outcome } of outcomes) {
      if (outcome.kind === 'canceled') assert.ok(!claimed.has(id), `${id} both canceled and claimed`);
      else {
        assert.deepEqual(outcome, { kind: 'not_cancelable', status: 'processing' });
        assert.ok(claimed.has(id), `${id} refused without a claim`);
      }
    }
    ctx.diagnostic(`${claimed.size} claimed, ${ids.size - claimed.size} canceled`);
    const rows = await kysely.selectFrom('messages').select(['id', 'status']).where('account_id', '=', a.accountId).execute();
    for (const row of rows) assert.equal(row.status, claimed.has(row.id) ? 'processing' : 'canceled', row.id);
  });

  it("answers 404 for another account's or environment's message, and for an unknown id", async () => {
    const owner = await t.createAccount();
    const stranger = await t.createAccount();
    const id = await accepted(t, owner.testKey, telegram({ send_at: inMs(DAY) }));
    assertErrorEnvelope(await cancel(t, stranger.testKey, id), 404, 'not_found');
    assertErrorEnvelope(await cancel(t, owner.liveKey, id), 404, 'not_found');
    assertErrorEnvelope(await cancel(t, owner.testKey, 'msg_000000000000000000000000'), 404, 'not_found');
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: owner.testKey })).json().status, 'queued', 'untouched');
  });

  it('refuses unknown top-level fields and unknown session fields: 400 invalid_request naming the field', async () => {
    const a = await t.createAccount();
    const cases: Array<[Record<string, unknown>, string]> = [
      [telegram({ captoin: 'hi' }), 'captoin'],
      [telegram({ sendAt: inMs(MINUTE) }), 'sendAt'],
      // Names are compared as written: a field differing from a known one only in case is not that field.
      [telegram({ Caption: 'hi' }), 'Caption'],
      [telegram({ session: { bot_token: TELEGRAM_TOKEN, BOT_TOKEN: 'x' } }), 'session.BOT_TOKEN'],
      [telegram({ session: { bot_token: TELEGRAM_TOKEN, foo: 'x' } }), 'session.foo'],
      [{ ...defaultSendBody('linkedin', t.voiceUrl), session: { ...LINKEDIN_SESSION, jsessionid: 'x' } }, 'session.jsessionid'],
      [{ ...defaultSendBody('whatsapp', t.voiceUrl, 'ws_000000000000000000000000'), session: { session_id: 'ws_000000000000000000000000', bot_token: 'x' } }, 'session.bot_token'],
    ];
    for (const [body, field] of cases) {
      const res = await t.send(a.testKey, body);
      const error = assertErrorEnvelope(res, 400, 'invalid_request');
      assert.equal(error.details.field, field, res.body);
      assert.match(error.message, new RegExp(field.replace('.', '\\.')));
    }
    // Every known name passes (recording_indicator's behaviour is its own; false changes nothing here).
    const known = telegram({ duration: null, caption: null, send_at: null, recording_indicator: false });
    assert.equal((await t.send(a.testKey, known)).statusCode, 202);
    const linkedin = { ...defaultSendBody('linkedin', t.voiceUrl), session: { ...LINKEDIN_SESSION, user_agent: 'Mozilla/5.0 (X11; Linux x86_64)' } };
    assert.notEqual((await t.send(a.testKey, linkedin)).json()?.error?.details?.field, 'session.user_agent', 'user_agent is a known LinkedIn session field');
  });

  it('refuses unknown fields of the WhatsApp session and webhook endpoint bodies too', async () => {
    const a = await t.createAccount();
    const session = await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: a.testKey, body: { phone_numbr: '15550000000' } });
    assert.equal(assertErrorEnvelope(session, 400, 'invalid_request').details.field, 'phone_numbr');
    const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: a.testKey, body: { url: receiver.url('/x'), event: ['voice_note.delivered'] } });
    assert.equal(assertErrorEnvelope(hook, 400, 'invalid_request').details.field, 'event');
  });

  it('the dashboard shows send_at and cancels with its CSRF token', async () => {
    const user = await createDashboardAccount(t);
    const sendAt = new Date(Math.ceil((Date.now() + DAY) / 60_000) * 60_000).toISOString();
    const id = await accepted(t, user.testKey, telegram({ send_at: sendAt }));
    const client = new FormClient(t, '10.9.0.1');
    assert.equal((await client.signIn(user.email, user.password)).statusCode, 303);
    const page = await client.get(`/dashboard/messages/${id}`);
    assert.equal(page.statusCode, 200);
    assert.match(page.body, new RegExp(`data-field="send_at"><time datetime="${sendAt}"`));
    assert.match(page.body, /Cancel this voice note/);

    const forged = await client.post(`/dashboard/messages/${id}/cancel`, { _csrf: 'forged' });
    assert.equal(forged.statusCode, 403);
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: user.testKey })).json().status, 'queued');

    const done = await client.post(`/dashboard/messages/${id}/cancel`, { _csrf: csrfIn(page.body) });
    assert.equal(done.statusCode, 303);
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: user.testKey })).json().status, 'canceled');
    const after = await client.get(String(done.headers.location));
    assert.match(after.body, /Canceled: this voice note will not be sent/);
    assert.doesNotMatch(after.body, /Cancel this voice note/, 'no button once canceled');
    const listed = await client.get('/dashboard/messages?status=canceled');
    assert.match(listed.body, new RegExp(`data-message-id="${id}"`));
  });
});

describe(`scheduled delivery and cancel against a running worker (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let fake: TelegramFake;

  before(async () => {
    fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
    t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
  });
  after(() => closeAll(t, fake));

  it('keeps a scheduled note queued until its send_at, then delivers it', async () => {
    const a = await t.createAccount();
    const chat = '310000001';
    const sendAt = Date.now() + 2_500;
    const id = await accepted(t, a.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: chat, send_at: new Date(sendAt).toISOString() });
    const early = (await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: a.liveKey })).json();
    if (Date.now() < sendAt - 500) {
      assert.equal(early.status, 'queued');
      assert.equal(fake.callsForChat(chat).length, 0, 'nothing reached Telegram before send_at');
    }
    const done = await t.waitForStatus(a.liveKey, id, ['delivered', 'failed'], 30_000);
    assert.equal(done.status, 'delivered', JSON.stringify(done));
    assert.ok(Date.parse(done.delivered_at) >= sendAt, `delivered at ${done.delivered_at}, not before ${new Date(sendAt).toISOString()}`);
    assert.equal(fake.callsForChat(chat).length, 1);
  });

  it('an idle worker wakes for a send_at, however long its poll interval', async () => {
    // A minute between polls: only the worker's own next-due time (the scheduled note's) can wake it in time.
    const slow = await startTestApp({ workerPollMs: 60_000 });
    try {
      const a = await slow.createAccount();
      const sendAt = Date.now() + 2_000;
      const id = await accepted(slow, a.testKey, { ...defaultSendBody('telegram', slow.voiceUrl), send_at: new Date(sendAt).toISOString() });
      const done = await slow.waitForStatus(a.testKey, id, ['delivered'], 20_000);
      assert.ok(Date.parse(done.delivered_at) >= sendAt, done.delivered_at);
    } finally {
      await slow.close();
    }
  });

  it('never sends a canceled note; a delivered or failed one is not cancelable', async () => {
    const a = await t.createAccount();
    const chat = '310000002';
    const id = await accepted(t, a.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: chat, send_at: inMs(1_500) });
    assert.equal((await cancel(t, a.liveKey, id)).statusCode, 200);
    // Past its send_at, a delivered note shows that the worker has been running meanwhile.
    const later = await accepted(t, a.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '310000003', send_at: inMs(2_000) });
    await t.waitForStatus(a.liveKey, later, ['delivered'], 30_000);
    assert.equal(fake.callsForChat(chat).length, 0, 'the canceled note never reached Telegram');
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: a.liveKey })).json().status, 'canceled');

    assert.deepEqual(assertErrorEnvelope(await cancel(t, a.liveKey, later), 409, 'not_cancelable').details, { status: 'delivered' });
    fake.failForChat('310000004', { kind: 'chat_not_found' });
    const failing = await accepted(t, a.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '310000004' });
    await t.waitForStatus(a.liveKey, failing, ['failed'], 30_000);
    assert.deepEqual(assertErrorEnvelope(await cancel(t, a.liveKey, failing), 409, 'not_cancelable').details, { status: 'failed' });
  });

  it('a cancel racing the worker has exactly one winner: canceled and never sent, or sent and the cancel refused', async (ctx) => {
    const a = await t.createAccount({ quota: 1000 });
    const count = 40;
    const sendAt = Date.now() + 1_500;
    const chats = Array.from({ length: count }, (_, i) => String(320000000 + i));
    const ids = await Promise.all(
      chats.map((chat) => accepted(t, a.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: chat, send_at: new Date(sendAt).toISOString() })),
    );
    // Cancels spread around the moment the notes fall due, while the worker claims them.
    const answers = await Promise.all(
      ids.map(async (id, i) => {
        await new Promise((r) => setTimeout(r, Math.max(0, sendAt - Date.now() - 300 + i * 15)));
        return cancel(t, a.liveKey, id);
      }),
    );
    let canceled = 0;
    for (const [i, id] of ids.entries()) {
      const answer = answers[i]!;
      if (answer.statusCode === 200) {
        canceled++;
        assert.equal(answer.json().status, 'canceled');
      } else {
        const error = assertErrorEnvelope(answer, 409, 'not_cancelable');
        assert.ok(['processing', 'delivered'].includes(error.details.status), answer.body);
        await t.waitForStatus(a.liveKey, id, ['delivered'], 30_000);
      }
    }
    // Settle: every note the cancel lost was delivered above; give the worker time to (wrongly) send the others.
    const marker = await accepted(t, a.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '329999999' });
    await t.waitForStatus(a.liveKey, marker, ['delivered'], 30_000);
    for (const [i, id] of ids.entries()) {
      const status = (await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: a.liveKey })).json().status;
      const sent = fake.callsForChat(chats[i]!).length;
      if (answers[i]!.statusCode === 200) {
        assert.equal(status, 'canceled', id);
        assert.equal(sent, 0, `canceled ${id} reached Telegram`);
      } else {
        assert.equal(status, 'delivered', id);
        assert.equal(sent, 1, `${id} was sent ${sent} times`);
      }
    }
    ctx.diagnostic(`${canceled} of ${count} canceled, ${count - canceled} delivered`);
    const usage = (await t.request({ method: 'GET', url: '/api/v1/usage', key: a.liveKey })).json();
    assert.equal(usage.usage.total_sent, count + 1 - canceled, 'only canceled notes are given back');
  });
});
