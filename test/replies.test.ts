import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { recordHeard } from '../src/inbound/recorder.js';
import type { HeardReply } from '../src/inbound/heard.js';
import { claimDueMessages } from '../src/store/messages.js';
import { purgeOldMessages } from '../src/housekeeping/retention.js';
import {
  assertErrorEnvelope,
  closeSharedAudio,
  connectedSandboxSession,
  defaultSendBody,
  STORAGE_LABEL,
  startTestApp,
  withRestartableStorage,
  type TestApp,
} from './fixtures/app-harness.js';
import { startWebhookReceiver, type WebhookReceiver } from './fakes/webhook-receiver.js';
import { createDashboardAccount, FormClient } from './fixtures/dashboard-harness.js';

/**
 * The other half of the conversation: a recipient's reply, matched to the voice note it answers
 * (voice_note.replied, the message log), and `cancel_on_reply`, as a caller sees them.
 */

const STATUS_FIELDS = ['created_at', 'delivered_at', 'error', 'id', 'platform', 'recipient', 'status'];
const MINUTE = 60_000;
const DAY = 86_400_000;
const inMs = (ms: number): string => new Date(Date.now() + ms).toISOString();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

after(async () => {
  await closeSharedAudio();
});

async function accepted(t: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  const res = await t.send(key, body);
  assert.equal(res.statusCode, 202, res.body);
  return res.json<{ id: string }>().id;
}

async function senderKeyOf(t: TestApp, id: string): Promise<string> {
  const row = await t.app.services.db.kysely.selectFrom('messages').select('sender_key').where('id', '=', id).executeTakeFirstOrThrow();
  return row.sender_key!;
}

async function repliesStored(t: TestApp, accountId: string): Promise<number> {
  const rows = await t.app.services.db.kysely.selectFrom('message_replies').select('id').where('account_id', '=', accountId).execute();
  return rows.length;
}

const eventsOf = (receiver: WebhookReceiver, type: string) => receiver.received.map((r) => JSON.parse(r.body)).filter((e) => e.type === type);

/** Events of `type` sent to `path`, once there are `count` of them. */
async function eventsAt(receiver: WebhookReceiver, path: string, type: string, count: number, timeoutMs = 15_000): Promise<any[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = receiver.received.filter((r) => r.path === path).map((r) => JSON.parse(r.body)).filter((e) => e.type === type);
    if (found.length >= count) return found;
    if (Date.now() > deadline) throw new Error(`expected ${count} ${type} at ${path}, got ${found.length}`);
    await sleep(50);
  }
}

function heard(senderKey: string, from: string, reply: Partial<HeardReply['reply']> = {}, platform = 'telegram'): HeardReply {
  return { kind: 'reply', platform, senderKey, from, reply: { platformId: `m${Math.random()}`, type: 'text', text: 'hello', at: Date.now(), ...reply } };
}

describe(`replies recorded on the note they answer (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let receiver: WebhookReceiver;

  before(async () => {
    receiver = await startWebhookReceiver();
    t = await startTestApp({ webhooks: { retryDelaysMs: [20, 20, 20], pollMs: 50 } });
  });
  after(async () => {
    await t?.close();
    await receiver?.close();
  });

  const telegram = (overrides: Record<string, unknown> = {}) => ({ ...defaultSendBody('telegram', t.voiceUrl), ...overrides });

  it('puts a reply on the latest note delivered to that recipient from that sender: voice_note.replied, the detail, the replied filter', async () => {
    const a = await t.createAccount();
    const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: a.testKey, body: { url: receiver.url('/replied') } });
    assert.equal(hook.statusCode, 201, hook.body);
    assert.ok(hook.json().events.includes('voice_note.replied'), 'subscribed by default');
    const first = await accepted(t, a.testKey, telegram({ recipient: '1000001' }));
    await t.waitForStatus(a.testKey, first, ['delivered']);
    const second = await accepted(t, a.testKey, telegram({ recipient: '1000001' }));
    const secondStatus = await t.waitForStatus(a.testKey, second, ['delivered']);
    const senderKey = await senderKeyOf(t, second);

    const at = Date.now();
    await t.app.services.onHeard(heard(senderKey, '1000001', { platformId: '501', text: 'Sounds good, call me', at }));

    const [event] = await receiver.waitFor(1, 'voice_note.replied');
    const body = JSON.parse(event!.body);
    assert.equal(body.type, 'voice_note.replied');
    assert.deepEqual(Object.keys(body.data).sort(), [...STATUS_FIELDS, 'reply'].sort());
    const { reply, ...lookup } = body.data;
    assert.deepEqual(lookup, secondStatus, 'the status lookup of the note replied to');
    assert.deepEqual(Object.keys(reply).sort(), ['id', 'received_at', 'text', 'type']);
    assert.match(reply.id, /^rpl_[0-9A-Za-z]{24}$/);
    assert.equal(reply.type, 'text');
    assert.equal(reply.text, 'Sounds good, call me');
    assert.equal(reply.received_at, new Date(at).toISOString());

    const detail = (await t.request({ method: 'GET', url: `/api/v1/messages/${second}`, key: a.testKey })).json();
    assert.deepEqual(detail.replies, [reply]);
    assert.equal(detail.first_replied_at, reply.received_at);
    const older = (await t.request({ method: 'GET', url: `/api/v1/messages/${first}`, key: a.testKey })).json();
    assert.deepEqual(older.replies, []);
    assert.equal(older.first_replied_at, null);

    const replied = (await t.request({ method: 'GET', url: '/api/v1/messages?replied=true', key: a.testKey })).json();
    assert.deepEqual(replied.data.map((m: any) => m.id), [second]);
    const unanswered = (await t.request({ method: 'GET', url: '/api/v1/messages?replied=false', key: a.testKey })).json();
    assert.deepEqual(unanswered.data.map((m: any) => m.id), [first]);
    const bad = assertErrorEnvelope(await t.request({ method: 'GET', url: '/api/v1/messages?replied=yes', key: a.testKey }), 422, 'invalid_parameter');
    assert.equal(bad.details.field, 'replied');

    // The same message heard again (re-delivered at reconnect): nothing new.
    await t.app.services.onHeard(heard(senderKey, '1000001', { platformId: '501', text: 'Sounds good, call me', at }));
    // Media: its kind and caption only; a long text is cut to 4,096 characters.
    await t.app.services.onHeard(heard(senderKey, '1000001', { platformId: '502', type: 'image', text: null, at: at + 1000 }));
    await t.app.services.onHeard(heard(senderKey, '1000001', { platformId: '503', text: '🙂'.repeat(5000), at: at + 2000 }));
    await receiver.waitFor(3, 'voice_note.replied');
    await sleep(300);
    assert.equal(eventsOf(receiver, 'voice_note.replied').length, 3, 'one event per reply');
    const after = (await t.request({ method: 'GET', url: `/api/v1/messages/${second}`, key: a.testKey })).json();
    assert.deepEqual(after.replies.map((r: any) => r.type), ['text', 'image', 'text'], 'oldest first, once each');
    assert.equal(after.replies[1].text, null);
    assert.equal(Array.from(after.replies[2].text as string).length, 4096);
    assert.equal(after.first_replied_at, reply.received_at, 'the first reply stays the first');
  });

  it('records nothing from someone never written to, to another sender, about a note older than 30 days or not delivered', async () => {
    const a = await t.createAccount();
    const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: a.testKey, body: { url: receiver.url('/nobody') } });
    assert.equal(hook.statusCode, 201);
    const id = await accepted(t, a.testKey, telegram({ recipient: '1000011' }));
    await t.waitForStatus(a.testKey, id, ['delivered']);
    const senderKey = await senderKeyOf(t, id);
    const failed = await accepted(t, a.testKey, telegram({ recipient: '10000000002' }));
    await t.waitForStatus(a.testKey, failed, ['failed']);

    await t.app.services.onHeard(heard(senderKey, '1000012'));
    await t.app.services.onHeard(heard('another-bot-key-000000', '1000011'));
    await t.app.services.onHeard(heard(senderKey, '1000011', {}, 'whatsapp'));
    await t.app.services.onHeard(heard(senderKey, '10000000002'));
    // A message written before our note was delivered does not answer it.
    await t.app.services.onHeard(heard(senderKey, '1000011', { at: Date.now() - 10 * MINUTE }));
    await t.app.services.db.kysely.updateTable('messages').set({ delivered_at: Date.now() - 31 * DAY }).where('id', '=', id).execute();
    await t.app.services.onHeard(heard(senderKey, '1000011'));

    assert.equal(await repliesStored(t, a.accountId), 0);
    const detail = (await t.request({ method: 'GET', url: `/api/v1/messages/${id}`, key: a.testKey })).json();
    assert.deepEqual(detail.replies, []);
    await sleep(300);
    assert.equal(receiver.received.filter((r) => r.path === '/nobody').length, 2, 'only the delivered and failed events');
  });

  it("answers a note delivered 29 days ago; allows 5 s for the platform's clock: a reply stamped 2 s before the delivery answers it, 8 s before does not", async () => {
    const a = await t.createAccount();
    const old = await accepted(t, a.testKey, telegram({ recipient: '1000021' }));
    await t.waitForStatus(a.testKey, old, ['delivered']);
    const senderKey = await senderKeyOf(t, old);
    await t.app.services.db.kysely.updateTable('messages').set({ delivered_at: Date.now() - 29 * DAY }).where('id', '=', old).execute();
    await t.app.services.onHeard(heard(senderKey, '1000021', { platformId: '601', text: 'sorry, late' }));
    const oldDetail = (await t.request({ method: 'GET', url: `/api/v1/messages/${old}`, key: a.testKey })).json();
    assert.deepEqual(oldDetail.replies.map((r: any) => r.text), ['sorry, late'], 'within the 30 days');

    const fresh = await accepted(t, a.testKey, telegram({ recipient: '1000022' }));
    await t.waitForStatus(a.testKey, fresh, ['delivered']);
    const { delivered_at } = await t.app.services.db.kysely.selectFrom('messages').select('delivered_at').where('id', '=', fresh).executeTakeFirstOrThrow();
    const deliveredAt = Number(delivered_at);
    await t.app.services.onHeard(heard(senderKey, '1000022', { platformId: '602', text: 'written before', at: deliveredAt - 8_000 }));
    await t.app.services.onHeard(heard(senderKey, '1000022', { platformId: '603', text: 'clock behind', at: deliveredAt - 2_000 }));
    const detail = (await t.request({ method: 'GET', url: `/api/v1/messages/${fresh}`, key: a.testKey })).json();
    assert.deepEqual(detail.replies.map((r: any) => [r.text, r.received_at]), [['clock behind', new Date(deliveredAt - 2_000).toISOString()]]);
  });

  it('group messages and strangers are not heard; a reply of one account never lands on another account sharing the bot', async () => {
    const a = await t.createAccount();
    const b = await t.createAccount();
    const mine = await accepted(t, a.testKey, telegram({ recipient: '1000021' }));
    await t.waitForStatus(a.testKey, mine, ['delivered']);
    const senderKey = await senderKeyOf(t, mine);
    // The listener of a sender that belongs to one account names it: the other account's notes are not looked at.
    await t.app.services.onHeard({ ...heard(senderKey, '1000021'), accountId: b.accountId, env: 'test' });
    assert.equal(await repliesStored(t, a.accountId), 0);
    await t.app.services.onHeard({ ...heard(senderKey, '1000021'), accountId: a.accountId, env: 'test' });
    assert.equal(await repliesStored(t, a.accountId), 1);
    assert.equal(await repliesStored(t, b.accountId), 0);
  });

  it('the dashboard marks answered notes in the list and shows the replies on the message page', async () => {
    const user = await createDashboardAccount(t);
    const answered = await accepted(t, user.testKey, telegram({ recipient: '1000041' }));
    await t.waitForStatus(user.testKey, answered, ['delivered']);
    const silent = await accepted(t, user.testKey, telegram({ recipient: '1000042' }));
    await t.waitForStatus(user.testKey, silent, ['delivered']);
    await t.app.services.onHeard(heard(await senderKeyOf(t, answered), '1000041', { platformId: 'd1', text: 'Call me <b>now</b>' }));
    await t.app.services.onHeard(heard(await senderKeyOf(t, answered), '1000041', { platformId: 'd2', type: 'voice', text: null, at: Date.now() + 1000 }));

    const client = new FormClient(t, '10.9.0.7');
    assert.equal((await client.signIn(user.email, user.password)).statusCode, 303);
    const list = await client.get('/dashboard/messages');
    const rowOf = (id: string) => list.body.slice(list.body.indexOf(`data-message-id="${id}"`)).split('</tr>')[0]!;
    assert.match(rowOf(answered), /data-replied="true"/);
    assert.doesNotMatch(rowOf(silent), /data-replied/);
    const page = await client.get(`/dashboard/messages/${answered}`);
    assert.match(page.body, /<h2>Replies<\/h2>/);
    assert.match(page.body, /data-reply-type="text">text<\/span>: <q>Call me &lt;b&gt;now&lt;\/b&gt;<\/q>/, 'escaped');
    assert.match(page.body, /data-reply-type="voice">voice message<\/span><\/li>/);
    assert.ok(page.body.indexOf('data-reply-type="text"') < page.body.indexOf('data-reply-type="voice"'), 'oldest first');
    assert.match((await client.get(`/dashboard/messages/${silent}`)).body, /data-replies="none">No reply yet\./);
  });

  it('retention deletes the replies with their message', async () => {
    const a = await t.createAccount();
    const id = await accepted(t, a.testKey, telegram({ recipient: '1000031' }));
    await t.waitForStatus(a.testKey, id, ['delivered']);
    await t.app.services.onHeard(heard(await senderKeyOf(t, id), '1000031'));
    assert.equal(await repliesStored(t, a.accountId), 1);
    const db = t.app.services.db.kysely;
    await db.updateTable('messages').set({ created_at: Date.now() - 400 * DAY }).where('id', '=', id).execute();
    assert.ok((await purgeOldMessages(db, { days: 365, pauseMs: 0 })) >= 1);
    assert.equal(await repliesStored(t, a.accountId), 0);
  });

  it('sandbox recipients ending in 6 answer every delivered note after 4 s, on every platform, through the same road', async () => {
    const a = await t.createAccount();
    const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: a.testKey, body: { url: receiver.url('/sandbox') } });
    assert.equal(hook.statusCode, 201);
    const session = await connectedSandboxSession(t, a.testKey);
    const notes = [
      await accepted(t, a.testKey, telegram({ recipient: '1000006' })),
      await accepted(t, a.testKey, { ...defaultSendBody('whatsapp', t.voiceUrl, session), recipient: '14155550106' }),
      await accepted(t, a.testKey, { ...defaultSendBody('linkedin', t.voiceUrl), recipient: 'alex-6' }),
    ];
    // A follow-up in a day that stops when the recipient answers.
    const followUp = await accepted(t, a.testKey, telegram({ recipient: '1000006', send_at: inMs(DAY), cancel_on_reply: true }));
    const deliveredAt: number[] = [];
    for (const id of notes) deliveredAt.push(Date.parse((await t.waitForStatus(a.testKey, id, ['delivered'])).delivered_at));
    const quiet = await accepted(t, a.testKey, telegram({ recipient: '1000001' }));
    await t.waitForStatus(a.testKey, quiet, ['delivered']);

    const events = (await eventsAt(receiver, '/sandbox', 'voice_note.replied', 3)).map((e) => e.data);
    assert.deepEqual(events.map((e) => e.id).sort(), [...notes].sort());
    for (const [i, id] of notes.entries()) {
      const event = events.find((e) => e.id === id)!;
      assert.equal(event.reply.text, 'Thanks, got it!');
      assert.equal(event.reply.type, 'text');
      const after = Date.parse(event.reply.received_at) - deliveredAt[i]!;
      assert.ok(after >= 3_900 && after < 10_000, `answered ${after} ms after delivery`);
    }
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${followUp}`, key: a.testKey })).json().status, 'canceled');
    const [canceled] = await eventsAt(receiver, '/sandbox', 'voice_note.canceled', 1);
    assert.equal(canceled.data.id, followUp);
    assert.equal(canceled.data.cancel_reason, 'replied');
    const detail = (await t.request({ method: 'GET', url: `/api/v1/messages/${quiet}`, key: a.testKey })).json();
    assert.deepEqual(detail.replies, [], 'other recipients do not answer');
  });
});

describe(`cancel_on_reply (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let receiver: WebhookReceiver;

  before(async () => {
    receiver = await startWebhookReceiver();
    t = await startTestApp({ worker: false, webhooks: { retryDelaysMs: [20, 20, 20], pollMs: 50 } });
  });
  after(async () => {
    await t?.close();
    await receiver?.close();
  });

  const telegram = (overrides: Record<string, unknown> = {}) => ({ ...defaultSendBody('telegram', t.voiceUrl), ...overrides });

  /** A note to `recipient` delivered a second ago (no worker runs here: set as a worker's outcome would). */
  async function deliveredTo(key: string, recipient: string, overrides: Record<string, unknown> = {}): Promise<string> {
    const id = await accepted(t, key, telegram({ recipient, send_at: inMs(3 * DAY), ...overrides }));
    const at = Date.now() - 1_000;
    await t.app.services.db.kysely.updateTable('messages').set({ status: 'delivered', delivered_at: at, updated_at: at }).where('id', '=', id).execute();
    return id;
  }

  it('is taken only with send_at: otherwise 422 invalid_parameter naming cancel_on_reply', async () => {
    const a = await t.createAccount();
    for (const body of [telegram({ cancel_on_reply: true }), telegram({ cancel_on_reply: true, send_at: null })]) {
      const error = assertErrorEnvelope(await t.send(a.testKey, body), 422, 'invalid_parameter');
      assert.equal(error.details.field, 'cancel_on_reply');
    }
    assert.equal((await t.send(a.testKey, telegram({ cancel_on_reply: false }))).statusCode, 202);
    assert.equal((await t.send(a.testKey, telegram({ cancel_on_reply: null }))).statusCode, 202);
    const res = await t.send(a.testKey, telegram({ cancel_on_reply: true, send_at: inMs(DAY) }));
    assert.equal(res.statusCode, 202, res.body);
    assert.deepEqual(Object.keys(res.json()).sort(), ['created_at', 'id', 'platform', 'recipient', 'status'], "POST /send's answer keeps its fields");
  });

  it("a reply from the recipient cancels the waiting note: canceled, cancel_reason replied, given back to the quota; other notes stay", async () => {
    const a = await t.createAccount({ quota: 10 });
    const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: a.testKey, body: { url: receiver.url('/cancel') } });
    assert.equal(hook.statusCode, 201);
    const first = await deliveredTo(a.testKey, '2000001');
    const followUp = await accepted(t, a.testKey, telegram({ recipient: '2000001', send_at: inMs(3 * DAY), cancel_on_reply: true }));
    const plain = await accepted(t, a.testKey, telegram({ recipient: '2000001', send_at: inMs(3 * DAY) }));
    const elsewhere = await accepted(t, a.testKey, telegram({ recipient: '2000002', send_at: inMs(3 * DAY), cancel_on_reply: true }));
    const otherBot = await accepted(t, a.testKey, telegram({ recipient: '2000001', send_at: inMs(3 * DAY), cancel_on_reply: true, session: { bot_token: '987654321:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ' } }));
    const senderKey = await senderKeyOf(t, followUp);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey })).json().usage.total_sent, 5);

    // A message written before the note was accepted is no answer to it.
    await t.app.services.onHeard(heard(senderKey, '2000001', { at: Date.now() - 10 * MINUTE }));
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${followUp}`, key: a.testKey })).json().status, 'queued');

    await t.app.services.onHeard(heard(senderKey, '2000001'));
    const status = (await t.request({ method: 'GET', url: `/api/v1/status/${followUp}`, key: a.testKey })).json();
    assert.equal(status.status, 'canceled');
    for (const id of [plain, elsewhere, otherBot]) {
      assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: a.testKey })).json().status, 'queued', id);
    }
    const usage = await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey });
    assert.equal(usage.json().usage.total_sent, 4, 'not counted against the quota');
    assert.equal(usage.headers['x-usage-remaining'], '6');
    const [event] = await receiver.waitFor(1, 'voice_note.canceled');
    assert.deepEqual(JSON.parse(event!.body).data, { ...status, cancel_reason: 'replied' });
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/messages/${first}`, key: a.testKey })).json().replies.length, 1, 'the reply is on the delivered note');
  });

  it("a stranger's first message cancels nothing: only a reply to a delivered note does", async () => {
    const a = await t.createAccount();
    const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: a.testKey, body: { url: receiver.url('/stranger') } });
    assert.equal(hook.statusCode, 201);
    // A follow-up to someone no note has reached yet (the first note failed, or is still to go).
    const followUp = await accepted(t, a.testKey, telegram({ recipient: '2000301', send_at: inMs(DAY), cancel_on_reply: true }));
    const senderKey = await senderKeyOf(t, followUp);
    await t.app.services.onHeard(heard(senderKey, '2000301', { text: '/start' }));
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${followUp}`, key: a.testKey })).json().status, 'queued');
    assert.equal(await repliesStored(t, a.accountId), 0);
    await sleep(300);
    assert.deepEqual(receiver.received.filter((r) => r.path === '/stranger'), [], 'nothing announced');
  });

  it("a reply dated in the follow-up's own second (Telegram's whole seconds) still cancels it", async () => {
    const a = await t.createAccount();
    await deliveredTo(a.testKey, '2000401');
    const followUp = await accepted(t, a.testKey, telegram({ recipient: '2000401', send_at: inMs(DAY), cancel_on_reply: true }));
    const createdAt = Date.parse((await t.request({ method: 'GET', url: `/api/v1/status/${followUp}`, key: a.testKey })).json().created_at);
    // Written just after the note was accepted, stamped with the whole second before it (as Telegram dates are).
    await t.app.services.onHeard(heard(await senderKeyOf(t, followUp), '2000401', { at: createdAt - 900 }));
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/status/${followUp}`, key: a.testKey })).json().status, 'canceled');
  });

  it('a reply racing workers\' claims: every note is claimed or canceled, never both, on this storage', async (ctx) => {
    const a = await t.createAccount({ quota: 1000 });
    const recipients = Array.from({ length: 40 }, (_, i) => String(2100000 + i));
    const ids = new Map<string, string>();
    // Due at once (send_at just now): workers may take them while the replies arrive.
    // Each recipient got a note before: the replies answer it.
    for (const recipient of recipients) await deliveredTo(a.testKey, recipient);
    for (const recipient of recipients) ids.set(await accepted(t, a.testKey, telegram({ recipient, send_at: inMs(0), cancel_on_reply: true })), recipient);
    const senderKey = await senderKeyOf(t, [...ids.keys()][0]!);
    const { kysely, dialect } = t.app.services.db;
    const claimed = new Set<string>();
    const workers = ['w1', 'w2', 'w3'].map(async (worker) => {
      for (let turn = 0; turn < 25; turn++) {
        for (const row of await claimDueMessages(kysely, dialect, worker, { limit: 2, leaseMs: MINUTE })) {
          if (!ids.has(row.id)) continue;
          assert.ok(!claimed.has(row.id), `${row.id} claimed twice`);
          claimed.add(row.id);
        }
      }
    });
    const replies = recipients.map((recipient) => recordHeard(kysely, heard(senderKey, recipient)));
    const [recorded] = await Promise.all([Promise.all(replies), Promise.all(workers)]);
    const canceled = new Set(recorded.flatMap((r) => r.canceled.map((c) => c.message.id)));
    ctx.diagnostic(`${claimed.size} claimed, ${canceled.size} canceled`);
    for (const id of ids.keys()) assert.ok(claimed.has(id) !== canceled.has(id), `${id}: exactly one winner`);
    const rows = await kysely.selectFrom('messages').select(['id', 'status']).where('account_id', '=', a.accountId).where('status', '!=', 'delivered').execute();
    for (const row of rows) assert.equal(row.status, claimed.has(row.id) ? 'processing' : 'canceled', row.id);
    const usage = (await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey })).json();
    assert.equal(usage.usage.total_sent, claimed.size + recipients.length, 'each canceled note given back once');
  });
});

describe(`a reply heard by two processes or again after a restart is recorded once (${STORAGE_LABEL})`, () => {
  it('two processes on one storage hear the same message at once, then a restarted one hears it again', async () => {
    await withRestartableStorage(async (reuse) => {
      const receiver = await startWebhookReceiver();
      const first = await startTestApp({ reuse, webhooks: { retryDelaysMs: [20], pollMs: 50 } });
      let second: TestApp | undefined;
      try {
        const a = await first.createAccount();
        const hook = await first.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: a.testKey, body: { url: receiver.url('/twice'), events: ['voice_note.replied'] } });
        assert.equal(hook.statusCode, 201);
        const id = await accepted(first, a.testKey, { ...defaultSendBody('telegram', first.voiceUrl), recipient: '3000001' });
        await first.waitForStatus(a.testKey, id, ['delivered']);
        const senderKey = await senderKeyOf(first, id);
        second = await startTestApp({ reuse, worker: false, webhooks: { retryDelaysMs: [20], pollMs: 50 } });
        const message = heard(senderKey, '3000001', { platformId: 'offline-1' });
        // A rolling restart: the old process and the new one both hear it.
        await Promise.all([first.app.services.onHeard(message), second.app.services.onHeard(message)]);
        await first.close();
        // Offline messages re-delivered when the session reconnects in the new process.
        await second.app.services.onHeard(message);
        const detail = (await second.request({ method: 'GET', url: `/api/v1/messages/${id}`, key: a.testKey })).json();
        assert.equal(detail.replies.length, 1);
        await receiver.waitFor(1, 'voice_note.replied');
        await sleep(500);
        assert.equal(eventsOf(receiver, 'voice_note.replied').length, 1);
      } finally {
        await second?.close();
        await first.close().catch(() => undefined);
        await receiver.close();
      }
    });
  });
});
