import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { it } from './fixtures/timed.js';
import { startWorker } from '../src/app.js';
import { assertErrorEnvelope, closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';
import { startWebhookReceiver, type WebhookReceiver } from './fakes/webhook-receiver.js';

/**
 * The suppression list and opt-outs by reply, as a caller sees them: the list over HTTP, sends refused
 * (422 recipient_suppressed), notes waiting canceled (cancel_reason "suppressed", quota back), a sandbox
 * "STOP" that opts its sender out (recipient.opted_out), and the worker's own check before the platform.
 */

const API = '/api/v1';
const DAY = 86_400_000;
const inMs = (ms: number): string => new Date(Date.now() + ms).toISOString();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

after(async () => {
  await closeSharedAudio();
});

/** A clock the test moves (the sandbox's answering recipients wait 4 s on it). */
function testClock(): { now: () => number; advance(ms: number): void } {
  let offset = 0;
  return { now: () => Date.now() + offset, advance: (ms) => void (offset += ms) };
}

async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe(`the suppression list and opt-outs (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let receiver: WebhookReceiver;
  const clock = testClock();

  before(async () => {
    receiver = await startWebhookReceiver();
    t = await startTestApp({ now: clock.now, webhooks: { retryDelaysMs: [20, 20, 20], pollMs: 50 } });
  });
  after(async () => {
    await t?.close();
    await receiver?.close();
  });

  const telegram = (overrides: Record<string, unknown> = {}) => ({ ...defaultSendBody('telegram', t.voiceUrl), ...overrides });
  const add = (key: string, recipients: unknown[], extra: Record<string, unknown> = {}) => t.request({ method: 'POST', url: `${API}/suppressions`, key, body: { recipients, ...extra } });
  const list = (key: string, query = '') => t.request({ method: 'GET', url: `${API}/suppressions${query}`, key });
  const usageSent = async (key: string): Promise<number> => (await t.request({ method: 'GET', url: `${API}/usage`, key })).json().usage.total_sent;
  const status = async (key: string, id: string) => (await t.request({ method: 'GET', url: `${API}/messages/${id}`, key })).json();
  async function accepted(key: string, body: Record<string, unknown>): Promise<string> {
    const res = await t.send(key, body);
    assert.equal(res.statusCode, 202, res.body);
    return res.json().id;
  }
  async function hook(key: string, path: string): Promise<string> {
    const res = await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key, body: { url: receiver.url(path) } });
    assert.equal(res.statusCode, 201, res.body);
    return res.json().secret;
  }
  const eventsAt = (path: string, type: string) => receiver.received.filter((r) => r.path === path).filter((r) => JSON.parse(r.body).type === type);

  it('lists recipients as their platform names them: each once, any form, every platform with "*"', async () => {
    const a = await t.createAccount();
    const res = await add(a.testKey, [
      { platform: 'whatsapp', recipient: '+1 (415) 555-0100', note: 'asked by phone' },
      { platform: 'telegram', recipient: '@Jane_Doe' },
      { platform: 'linkedin', recipient: 'https://www.linkedin.com/in/Jane-Smith-A1B2C3/?trk=x' },
      { platform: '*', recipient: '+44 20 7946 0958' },
      { platform: 'whatsapp', recipient: '14155550100' },
    ]);
    assert.equal(res.statusCode, 201, res.body);
    const data = res.json().data;
    assert.deepEqual(
      data.map((d: any) => [d.platform, d.recipient, d.source, d.note]),
      [
        ['whatsapp', '14155550100', 'api', 'asked by phone'],
        ['telegram', '@jane_doe', 'api', null],
        ['linkedin', 'jane-smith-a1b2c3', 'api', null],
        ['*', '442079460958', 'api', null],
      ],
    );
    assert.deepEqual(Object.keys(data[0]), ['id', 'platform', 'recipient', 'source', 'reply_id', 'note', 'created_at']);
    assert.match(data[0].id, /^sup_[0-9A-Za-z]{24}$/);
    // Listed again: returned as it is, not twice.
    const again = await add(a.testKey, [{ platform: 'telegram', recipient: '@JANE_DOE' }]);
    assert.equal(again.statusCode, 201);
    assert.deepEqual(again.json().data, [data[1]]);

    // Every form of a listed recipient is refused at send, with the documented error.
    const session = { session: { bot_token: '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ' } };
    const refused = assertErrorEnvelope(await t.send(a.testKey, telegram({ recipient: '@jane_DOE', ...session })), 422, 'recipient_suppressed');
    assert.equal(refused.details.suppression_id, data[1].id);
    assert.equal(refused.details.field, 'recipient');
    assertErrorEnvelope(await t.send(a.testKey, { ...defaultSendBody('linkedin', t.voiceUrl), recipient: 'JANE-SMITH-A1B2C3' }), 422, 'recipient_suppressed');
    // "*" holds on every platform.
    assertErrorEnvelope(await t.send(a.testKey, telegram({ recipient: '442079460958' })), 422, 'recipient_suppressed');
    assertErrorEnvelope(await t.send(a.testKey, { ...defaultSendBody('linkedin', t.voiceUrl), recipient: 'https://uk.linkedin.com/in/jane-smith-a1b2c3' }), 422, 'recipient_suppressed');
    // The recipient check says so.
    const check = await t.request({ method: 'POST', url: `${API}/recipients/check`, key: a.testKey, body: { platform: 'telegram', recipient: '@Jane_Doe', session: session.session } });
    assert.equal(check.statusCode, 200, check.body);
    assert.equal(check.json().suppressed, true);
    const other = await t.request({ method: 'POST', url: `${API}/recipients/check`, key: a.testKey, body: { platform: 'telegram', recipient: '@someone_else', session: session.session } });
    assert.equal(other.json().suppressed, false);

    // Another account's list, or the same account's other environment, never applies.
    const b = await t.createAccount();
    assert.equal((await t.send(b.testKey, telegram({ recipient: '@jane_doe' }))).statusCode, 202);
    assert.deepEqual((await list(b.testKey)).json(), { data: [], has_more: false });
    assert.deepEqual((await list(a.liveKey)).json(), { data: [], has_more: false });
    assert.equal((await t.request({ method: 'DELETE', url: `${API}/suppressions/${data[1].id}`, key: b.testKey })).statusCode, 404);

    // Taken off the list: sends are accepted again.
    const removed = await t.request({ method: 'DELETE', url: `${API}/suppressions/${data[1].id}`, key: a.testKey });
    assert.equal(removed.statusCode, 204);
    assert.equal(removed.body, '');
    assertErrorEnvelope(await t.request({ method: 'DELETE', url: `${API}/suppressions/${data[1].id}`, key: a.testKey }), 404, 'not_found');
    assert.equal((await t.send(a.testKey, telegram({ recipient: '@jane_doe' }))).statusCode, 202);
  });

  it('refuses bad entries naming the field, and pages and filters the list', async () => {
    const a = await t.createAccount();
    const field = async (body: unknown, status: number, code: string) => assertErrorEnvelope(await t.request({ method: 'POST', url: `${API}/suppressions`, key: a.testKey, body }), status, code).details?.field;
    assert.equal(await field({ recipients: [] }, 422, 'invalid_parameter'), 'recipients');
    assert.equal(await field({ recipients: Array.from({ length: 1001 }, (_, i) => ({ platform: '*', recipient: `x${i}` })) }, 422, 'invalid_parameter'), 'recipients');
    assert.equal(await field({ recipients: [{ platform: 'fax', recipient: '1' }] }, 422, 'invalid_parameter'), 'recipients[0].platform');
    assert.equal(await field({ recipients: [{ platform: '*', recipient: 'a' }, { platform: 'whatsapp', recipient: 'jane' }] }, 422, 'invalid_parameter'), 'recipients[1].recipient');
    assert.equal(await field({ recipients: [{ platform: '*', recipient: '  ' }] }, 422, 'invalid_parameter'), 'recipients[0].recipient');
    assert.equal(await field({ recipients: [{ platform: '*', recipient: 'a', colour: 'red' }] }, 400, 'invalid_request'), 'recipients[0].colour');
    await field({ recipients: [{ platform: '*', recipient: 'a' }], source: 'reply' }, 400, 'invalid_request');
    assert.deepEqual((await list(a.testKey)).json().data, [], 'nothing of a refused call is listed');

    const numbers = Array.from({ length: 25 }, (_, i) => ({ platform: 'whatsapp', recipient: `+4915112345${String(i).padStart(3, '0')}` }));
    assert.equal((await add(a.testKey, numbers)).statusCode, 201);
    assert.equal((await add(a.testKey, [{ platform: 'telegram', recipient: '@imported_one' }], { source: 'import' })).statusCode, 201);
    const first = (await list(a.testKey, '?limit=10')).json();
    assert.equal(first.data.length, 10);
    assert.equal(first.has_more, true);
    assert.equal(first.data[0].recipient, '@imported_one', 'newest first');
    const second = (await list(a.testKey, `?limit=10&starting_after=${first.data[9].id}`)).json();
    assert.equal(second.data.length, 10);
    assert.ok(second.data.every((d: any) => !first.data.some((f: any) => f.id === d.id)));
    const back = (await list(a.testKey, `?limit=10&ending_before=${second.data[0].id}`)).json();
    assert.deepEqual(back.data.map((d: any) => d.id), first.data.map((d: any) => d.id));
    assert.deepEqual((await list(a.testKey, '?source=import')).json().data.map((d: any) => d.recipient), ['@imported_one']);
    assert.equal((await list(a.testKey, '?platform=whatsapp&limit=100')).json().data.length, 25);
    assert.deepEqual((await list(a.testKey, `?recipient=${encodeURIComponent('+49 151 12345 007')}`)).json().data.map((d: any) => d.recipient), ['4915112345007']);
    assert.equal(assertErrorEnvelope(await list(a.testKey, '?source=mail'), 422, 'invalid_parameter').details.field, 'source');
    assert.equal(assertErrorEnvelope(await list(a.testKey, '?platform=fax'), 422, 'invalid_parameter').details.field, 'platform');
    assert.equal(assertErrorEnvelope(await list(a.testKey, '?limit=0'), 422, 'invalid_parameter').details.field, 'limit');
    assert.equal(assertErrorEnvelope(await list(a.testKey, '?starting_after=msg_1'), 422, 'invalid_parameter').details.field, 'starting_after');
  });

  it('cancels the notes waiting for a recipient once listed (scheduled, or waiting for a send window): cancel_reason "suppressed", voice_note.canceled, quota back', async () => {
    const a = await t.createAccount();
    await hook(a.testKey, '/listed');
    const later = await accepted(a.testKey, telegram({ recipient: '@Waiting_One', send_at: inMs(DAY) }));
    const otherRecipient = await accepted(a.testKey, telegram({ recipient: '@someone_else', send_at: inMs(DAY) }));
    // And one waiting for the account's send window, closed now (every day, two hours after this hour, UTC).
    const hour = new Date(clock.now()).getUTCHours();
    const hh = (h: number) => `${String(h % 24).padStart(2, '0')}:00`;
    const window = { days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'], start: hh(hour + 2), end: hh(hour + 3), time_zone: 'UTC' };
    assert.equal((await t.request({ method: 'PATCH', url: `${API}/rhythm/telegram`, key: a.testKey, body: { send_window: window } })).statusCode, 200);
    const waiting = await accepted(a.testKey, telegram({ recipient: '@WAITING_one' }));
    assert.equal((await t.request({ method: 'GET', url: `${API}/status/${waiting}`, key: a.testKey })).json().waiting_for, 'send_window');
    const sentBefore = await usageSent(a.testKey);
    assert.equal((await add(a.testKey, [{ platform: 'telegram', recipient: '@waiting_one' }])).statusCode, 201);
    for (const id of [later, waiting]) {
      const detail = await status(a.testKey, id);
      assert.deepEqual([detail.status, detail.cancel_reason], ['canceled', 'suppressed'], id);
    }
    assert.equal((await status(a.testKey, otherRecipient)).status, 'queued');
    assert.equal(await usageSent(a.testKey), sentBefore - 2, 'given back to the quota');
    const events = await eventually('two voice_note.canceled', async () => (eventsAt('/listed', 'voice_note.canceled').length >= 2 ? eventsAt('/listed', 'voice_note.canceled') : undefined));
    const bodies = events.map((e) => JSON.parse(e.body).data);
    assert.deepEqual(bodies.map((d) => d.id).sort(), [later, waiting].sort());
    assert.ok(bodies.every((d) => d.cancel_reason === 'suppressed'));
  });

  it('a sandbox recipient ending in 5 answers "STOP" 4 s after delivery: listed, follow-up canceled, recipient.opted_out, later sends refused', async () => {
    const a = await t.createAccount();
    const secret = await hook(a.testKey, '/stop');
    const note = await accepted(a.testKey, telegram({ recipient: '1000005' }));
    // A follow-up that would also stop on any reply: an opt-out cancels it as suppressed, not merely replied.
    const followUp = await accepted(a.testKey, telegram({ recipient: '1000005', send_at: inMs(2 * DAY), cancel_on_reply: true }));
    const otherFollowUp = await accepted(a.testKey, telegram({ recipient: '1000005', send_at: inMs(3 * DAY) }));
    await t.waitForStatus(a.testKey, note, ['delivered']);
    const sentBefore = await usageSent(a.testKey);
    // Nothing is heard before 4 s on the sandbox's clock.
    clock.advance(3_000);
    await sleep(400);
    assert.deepEqual((await list(a.testKey)).json().data, []);
    clock.advance(1_100);
    const [hooked] = await eventually('recipient.opted_out', async () => (eventsAt('/stop', 'recipient.opted_out').length > 0 ? eventsAt('/stop', 'recipient.opted_out') : undefined));
    const event = new Webhook(secret).verify(hooked!.body, hooked!.headers as Record<string, string>) as any;
    assert.equal(event.type, 'recipient.opted_out');
    assert.deepEqual(Object.keys(event.data), ['platform', 'recipient', 'suppression', 'reply', 'canceled']);
    assert.equal(event.data.platform, 'telegram');
    assert.equal(event.data.recipient, '1000005');
    assert.equal(event.data.reply.text, 'STOP');
    assert.equal(event.data.reply.message_id, note);
    assert.match(event.data.reply.id, /^rpl_/);
    assert.deepEqual([...event.data.canceled].sort(), [followUp, otherFollowUp].sort());
    assert.equal(event.data.suppression.source, 'reply');
    assert.equal(event.data.suppression.reply_id, event.data.reply.id);

    const listed = (await list(a.testKey, '?source=reply')).json().data;
    assert.deepEqual(listed, [event.data.suppression]);
    for (const id of [followUp, otherFollowUp]) {
      const detail = await status(a.testKey, id);
      assert.equal(detail.status, 'canceled');
      assert.equal(detail.cancel_reason, 'suppressed');
    }
    assert.equal(await usageSent(a.testKey), sentBefore - 2, 'both given back');
    const refused = assertErrorEnvelope(await t.send(a.testKey, telegram({ recipient: '1000005' })), 422, 'recipient_suppressed');
    assert.match(refused.message, /opted out by reply/);
  });

  it('a reply in another language ("¡Baja!") takes the same path: listed, follow-up canceled, quota back, recipient.opted_out, later sends refused', async () => {
    const a = await t.createAccount();
    await hook(a.testKey, '/baja');
    const note = await accepted(a.testKey, telegram({ recipient: '1000024' }));
    const followUp = await accepted(a.testKey, telegram({ recipient: '1000024', send_at: inMs(2 * DAY) }));
    await t.waitForStatus(a.testKey, note, ['delivered']);
    const row = await t.app.services.db.kysely.selectFrom('messages').select(['sender_key', 'account_id', 'env']).where('id', '=', note).executeTakeFirstOrThrow();
    const sentBefore = await usageSent(a.testKey);
    // Heard as the sandbox's answering recipients are heard (src/inbound/sandbox-replies.ts), in Spanish.
    await t.app.services.onHeard({
      kind: 'reply',
      platform: 'telegram',
      senderKey: row.sender_key!,
      from: '1000024',
      accountId: row.account_id,
      env: row.env,
      reply: { platformId: `es-${note}`, type: 'text', text: '¡Baja!', at: clock.now() },
    });
    const [hooked] = await eventually('recipient.opted_out', async () => (eventsAt('/baja', 'recipient.opted_out').length > 0 ? eventsAt('/baja', 'recipient.opted_out') : undefined));
    const event = JSON.parse(hooked!.body);
    assert.equal(event.data.reply.text, '¡Baja!');
    assert.deepEqual(event.data.canceled, [followUp]);
    assert.equal(event.data.suppression.source, 'reply');
    const detail = await status(a.testKey, followUp);
    assert.deepEqual([detail.status, detail.cancel_reason], ['canceled', 'suppressed']);
    assert.equal(await usageSent(a.testKey), sentBefore - 1, 'given back to the quota');
    assertErrorEnvelope(await t.send(a.testKey, telegram({ recipient: '1000024' })), 422, 'recipient_suppressed');
  });

  it('the worker checks again before the platform call: a note claimed before its recipient was listed is never sent', async () => {
    const quiet = await startTestApp({ worker: false });
    try {
      const a = await quiet.createAccount();
      const res = await quiet.send(a.testKey, { ...defaultSendBody('telegram', quiet.voiceUrl), recipient: '1000021' });
      assert.equal(res.statusCode, 202, res.body);
      const id = res.json().id;
      // Listed behind the note's back (as when a listing lands while a worker holds it): only the worker's own check stands.
      await quiet.app.services.db.kysely
        .insertInto('suppressions')
        .values({ id: 'sup_00000000000000000000test', account_id: a.accountId, env: 'test', platform: '*', recipient_key: '1000021', source: 'api', reply_id: null, note: null, created_at: Date.now() })
        .execute();
      const sentBefore = (await quiet.request({ method: 'GET', url: `${API}/usage`, key: a.testKey })).json().usage.total_sent;
      const worker = startWorker(quiet.app.services, { pollMs: 50 });
      try {
        const settled = await quiet.waitForStatus(a.testKey, id, ['canceled', 'delivered']);
        assert.equal(settled.status, 'canceled');
        assert.equal((await quiet.request({ method: 'GET', url: `${API}/messages/${id}`, key: a.testKey })).json().cancel_reason, 'suppressed');
        assert.equal((await quiet.request({ method: 'GET', url: `${API}/usage`, key: a.testKey })).json().usage.total_sent, sentBefore - 1);
      } finally {
        await worker.stop();
      }
    } finally {
      await quiet.close();
    }
  });
});

describe(`opt-out keywords (${STORAGE_LABEL})`, () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp({ worker: false });
  });
  after(async () => {
    await t?.close();
  });

  /** A note to `recipient` delivered a second ago (no worker here: set as a worker's outcome would), and its sender key. */
  async function deliveredTo(key: string, recipient: string): Promise<{ id: string; senderKey: string }> {
    const res = await t.send(key, { ...defaultSendBody('telegram', t.voiceUrl), recipient });
    assert.equal(res.statusCode, 202, res.body);
    const id = res.json().id;
    const at = Date.now() - 1_000;
    const row = await t.app.services.db.kysely.updateTable('messages').set({ status: 'delivered', delivered_at: at, updated_at: at }).where('id', '=', id).returning('sender_key').executeTakeFirstOrThrow();
    return { id, senderKey: row.sender_key! };
  }
  const reply = (senderKey: string, from: string, text: string) =>
    t.app.services.onHeard({ kind: 'reply', platform: 'telegram', senderKey, from, reply: { platformId: `m${Math.random()}`, type: 'text', text, at: Date.now() } });
  const listed = async (key: string): Promise<string[]> => (await t.request({ method: 'GET', url: `${API}/suppressions`, key })).json().data.map((d: any) => d.recipient);

  it('opts out on a whole-message keyword in any listed language, folded; never on a sentence that contains one', async () => {
    const a = await t.createAccount();
    const cases: Array<[string, boolean]> = [
      ['  Désabonner! ', true],
      ['BAJA', true],
      ['Abmelden.', true],
      ['cancellami', true],
      ['opt-out', true],
      ['please stop', true],
      ["please don't stop", false],
      ["don't stop", false],
      ['stop by tomorrow', false],
      ['Thanks, got it!', false],
    ];
    for (const [i, [text, optsOut]] of cases.entries()) {
      const recipient = `20000${String(i).padStart(2, '0')}`;
      const { senderKey } = await deliveredTo(a.testKey, recipient);
      await reply(senderKey, recipient, text);
      assert.equal((await listed(a.testKey)).includes(recipient), optsOut, `${JSON.stringify(text)} ${optsOut ? 'opts out' : 'opts nobody out'}`);
    }
  });

  it("takes the account's own keywords and can be turned off (GET and PATCH /opt_out_settings)", async () => {
    const a = await t.createAccount();
    const settings = await t.request({ method: 'GET', url: `${API}/opt_out_settings`, key: a.testKey });
    assert.equal(settings.statusCode, 200);
    assert.equal(settings.json().enabled, true);
    assert.deepEqual(settings.json().keywords, []);
    assert.ok(settings.json().built_in_keywords.sms.includes('stop'));
    for (const language of ['en', 'es', 'pt', 'fr', 'de', 'it']) assert.ok(settings.json().built_in_keywords[language].length > 0, language);

    const patched = await t.request({ method: 'PATCH', url: `${API}/opt_out_settings`, key: a.testKey, body: { keywords: ['Nein Danke!', 'nein danke'] } });
    assert.equal(patched.statusCode, 200, patched.body);
    assert.deepEqual(patched.json().keywords, ['nein danke']);
    const own = await deliveredTo(a.testKey, '3000001');
    await reply(own.senderKey, '3000001', 'NEIN, DANKE');
    assert.deepEqual(await listed(a.testKey), ['3000001']);

    assert.equal((await t.request({ method: 'PATCH', url: `${API}/opt_out_settings`, key: a.testKey, body: { enabled: false } })).json().enabled, false);
    const off = await deliveredTo(a.testKey, '3000002');
    await reply(off.senderKey, '3000002', 'STOP');
    assert.deepEqual(await listed(a.testKey), ['3000001'], 'off: nobody opted out');
    // The other environment keeps its own settings.
    assert.equal((await t.request({ method: 'GET', url: `${API}/opt_out_settings`, key: a.liveKey })).json().enabled, true);

    assert.equal(assertErrorEnvelope(await t.request({ method: 'PATCH', url: `${API}/opt_out_settings`, key: a.testKey, body: { keywords: ['ok', '!!!'] } }), 422, 'invalid_parameter').details.field, 'keywords[1]');
    assert.equal(assertErrorEnvelope(await t.request({ method: 'PATCH', url: `${API}/opt_out_settings`, key: a.testKey, body: { enabld: true } }), 400, 'invalid_request').details.field, 'enabld');
  });

  it('an import of 10,000 recipients is listed and applies to the next send', async () => {
    const a = await t.createAccount();
    const numbers = Array.from({ length: 10_000 }, (_, i) => `4917${String(10_000_000 + i)}`);
    for (let start = 0; start < numbers.length; start += 1_000) {
      const chunk = numbers.slice(start, start + 1_000).map((n) => ({ platform: 'telegram', recipient: n }));
      const res = await t.request({ method: 'POST', url: `${API}/suppressions`, key: a.testKey, body: { recipients: chunk, source: 'import' } });
      assert.equal(res.statusCode, 201, res.body);
      assert.equal(res.json().data.length, 1_000);
    }
    assertErrorEnvelope(await t.send(a.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: numbers[9_999] }), 422, 'recipient_suppressed');
    assert.equal((await t.request({ method: 'GET', url: `${API}/suppressions?source=import&recipient=${numbers[0]}`, key: a.testKey })).json().data.length, 1);
  });
});
