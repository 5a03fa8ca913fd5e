import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { acceptedMessageId, assertErrorEnvelope, closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, type TestAccount, type TestApp } from './fixtures/app-harness.js';
import { createDashboardAccount, FormClient } from './fixtures/dashboard-harness.js';

const inADay = (): string => new Date(Date.now() + 86_400_000).toISOString();

/**
 * What a newcomer hears in the first minutes (issue 40, "the first five minutes"): each wrong step
 * answered with the question that is really wrong, in the documented error envelope.
 */
describe(`the first answers (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  before(async () => {
    t = await startTestApp({ env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    account = await t.createAccount();
  });
  after(async () => {
    await t?.close();
    await closeSharedAudio();
  });

  it('an unknown field is named before a required one is missed: {"audioUrl": …} is not "audio_url is required"', async () => {
    const res = await t.send(account.testKey, { platform: 'telegram', recipient: '123456789', audioUrl: t.voiceUrl, session: { bot_token: TELEGRAM_TOKEN } });
    const error = assertErrorEnvelope(res, 400, 'invalid_request');
    assert.equal(error.details.field, 'audioUrl');
    assert.match(error.message, /^unknown field audioUrl; known fields are platform, recipient, audio_url/);
  });

  it('an unknown platform is named before its missing session', async () => {
    const res = await t.send(account.testKey, { platform: 'signal', recipient: '123456789', audio_url: t.voiceUrl });
    const error = assertErrorEnvelope(res, 400, 'invalid_request');
    assert.equal(error.details.field, 'platform');
    assert.equal(error.message, 'platform must be one of linkedin, telegram, whatsapp');
  });

  it('POST /recipients/check asks the same questions in the same order', async () => {
    const check = (body: Record<string, unknown>) => t.request({ method: 'POST', url: '/api/v1/recipients/check', key: account.testKey, body });
    assert.equal(assertErrorEnvelope(await check({ platform: 'telegram', recipientId: '1', session: {} }), 400, 'invalid_request').details.field, 'recipientId');
    assert.equal(assertErrorEnvelope(await check({ platform: 'signal', recipient: '1' }), 400, 'invalid_request').details.field, 'platform');
  });

  it('a key sent without "Bearer " is told how to send it, not that it is missing', async () => {
    const bare = await t.request({ method: 'GET', url: '/api/v1/usage', headers: { authorization: account.testKey } });
    const error = assertErrorEnvelope(bare, 401, 'unauthorized');
    assert.match(error.message, /^the Authorization header must be "Bearer <API_KEY>"/);
    assert.ok(!bare.body.includes(account.testKey), 'the key is not echoed');
    const none = await t.request({ method: 'GET', url: '/api/v1/usage' });
    assert.match(assertErrorEnvelope(none, 401, 'unauthorized').message, /^missing API key/);
  });

  it('a note canceled by a reply says so in GET /messages/{id} and on its dashboard page; GET /status keeps its documented fields', async () => {
    const owner = await createDashboardAccount(t);
    const body = { ...defaultSendBody('telegram', t.voiceUrl), recipient: '3000001', send_at: inADay(), cancel_on_reply: true };
    const answered = await acceptedMessageId(t, owner.testKey, body);
    const requested = await acceptedMessageId(t, owner.testKey, { ...body, cancel_on_reply: false });
    const row = await t.app.services.db.kysely.selectFrom('messages').select('sender_key').where('id', '=', answered).executeTakeFirstOrThrow();
    // A note delivered to them first: a reply answers a note, and only then cancels follow-ups.
    const first = await acceptedMessageId(t, owner.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '3000001' });
    await t.waitForStatus(owner.testKey, first, ['delivered']);
    // The recipient answers the sender, as a platform's listener reports it.
    await t.app.services.onHeard({ kind: 'reply', platform: 'telegram', senderKey: row.sender_key!, from: '3000001', reply: { platformId: 'r1', type: 'text', text: 'no thanks', at: Date.now() } });
    assert.equal((await t.request({ method: 'POST', url: `/api/v1/messages/${requested}/cancel`, key: owner.testKey })).statusCode, 200);

    const detail = (await t.request({ method: 'GET', url: `/api/v1/messages/${answered}`, key: owner.testKey })).json();
    assert.equal(detail.status, 'canceled');
    assert.equal(detail.cancel_reason, 'replied');
    assert.equal(detail.cancel_on_reply, true);
    assert.deepEqual(detail.attempts, []);
    const other = (await t.request({ method: 'GET', url: `/api/v1/messages/${requested}`, key: owner.testKey })).json();
    assert.equal(other.cancel_reason, 'requested');
    assert.equal(other.cancel_on_reply, false);
    const status = (await t.request({ method: 'GET', url: `/api/v1/status/${answered}`, key: owner.testKey })).json();
    assert.deepEqual(Object.keys(status).sort(), ['created_at', 'delivered_at', 'error', 'id', 'platform', 'recipient', 'status']);

    const client = new FormClient(t, '10.9.0.3');
    assert.equal((await client.signIn(owner.email, owner.password)).statusCode, 303);
    const page = (await client.get(`/dashboard/messages/${answered}`)).body;
    assert.match(page, /data-field="cancel_reason">the recipient replied before it was sent \(cancel_on_reply\)</);
    assert.match(page, /data-field="cancel_on_reply">asked/);
    assert.match(page, /No attempt: the note was canceled before it was sent, and never will be\./);
    assert.match(page, /No audio: the note was canceled before its first attempt/);
    assert.doesNotMatch(page, /No attempt yet|fetched and converted at the first attempt/);
    assert.match((await client.get(`/dashboard/messages/${requested}`)).body, /data-field="cancel_reason">canceled on request/);
  });

  it('a linked Telegram account has its @username as its label on the senders list, as a bot has', async () => {
    const created = await t.request({ method: 'POST', url: '/api/v1/telegram/sessions', key: account.testKey });
    const id = created.json().session_id as string;
    await t.request({ method: 'POST', url: `/api/v1/telegram/sessions/${id}/simulate`, key: account.testKey, body: { event: 'scan' } });
    const sent = await acceptedMessageId(t, account.testKey, { platform: 'telegram', recipient: '3000021', audio_url: t.voiceUrl, session: { session_id: id } });
    assert.equal((await t.waitForStatus(account.testKey, sent, ['delivered', 'failed'])).status, 'delivered');
    const senders = (await t.request({ method: 'GET', url: '/api/v1/senders', key: account.testKey })).json().data;
    const linked = senders.find((s: any) => s.kind === 'telegram_account');
    assert.ok(linked, JSON.stringify(senders));
    assert.equal(linked.label, '@voicenote_sandbox');
  });
});
