import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import jsQRModule from 'jsqr';
import { PNG } from 'pngjs';
import { describeOggOpus } from './fixtures/ogg-opus-reader.js';
import { assertErrorEnvelope, closeSharedAudio, startTestApp, STORAGE_LABEL, TELEGRAM_TOKEN, type TestApp } from './fixtures/app-harness.js';
import { FakeTelegram, type FakeAccount } from './fakes/telegram-mtproto.js';
import { Api } from 'telegram';
import { RPCMessageToError } from 'telegram/errors/index.js';
import { classifyTelegramError } from '../src/platforms/telegram/account/errors.js';

const API = '/api/v1';
const jsQR = ((jsQRModule as unknown as { default?: typeof jsQRModule }).default ?? jsQRModule) as unknown as (
  data: Uint8ClampedArray,
  width: number,
  height: number,
) => { data: string } | null;

function decodeQr(qrCode: string): string {
  const image = PNG.sync.read(Buffer.from(qrCode.split(',')[1]!, 'base64'));
  return jsQR(new Uint8ClampedArray(image.data.buffer, image.data.byteOffset, image.data.byteLength), image.width, image.height)!.data;
}

/**
 * Reads a 5-bit packed waveform back, written apart from the encoder: the bytes as one little-endian
 * bit string, value i from bits 5i..5i+4.
 */
function unpack5bit(bytes: Buffer, count: number): number[] {
  let bits = '';
  for (const byte of bytes) bits += byte.toString(2).padStart(8, '0').split('').reverse().join('');
  return Array.from({ length: count }, (_, i) => parseInt(bits.slice(i * 5, i * 5 + 5).split('').reverse().join(''), 2));
}

async function eventually<T>(probe: () => T | undefined | null | false | Promise<T | undefined | null | false>, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const JANE: FakeAccount = { userId: 5_100_200_300n, username: 'jane_doe', phone: '14155550123' };
const BOB: FakeAccount = { userId: 7_000_000_001n, username: 'bob_builder', phone: '447700900123' };
const CAROL: FakeAccount = { userId: 7_000_000_002n, phone: '33612345678' };
const DAVE: FakeAccount = { userId: 7_000_000_003n, username: 'dave_private', refusesVoiceFromStrangers: 'PRIVACY_PREMIUM_REQUIRED' };

after(closeSharedAudio);

async function liveWorld(extra: { builtInRhythm?: boolean } = {}): Promise<{ t: TestApp; world: FakeTelegram; key: string; accountId: string; sessionId: string }> {
  const world = new FakeTelegram();
  world.people.push(BOB, CAROL, DAVE);
  const t = await startTestApp({
    env: { TELEGRAM_API_ID: String(world.apiId), TELEGRAM_API_HASH: world.apiHash },
    telegramClientFactory: world.factory('one'),
    telegramAccounts: { qrWaitMs: 3_000, leaseMs: 1_500, renewMs: 300, takeoverScanMs: 200 },
    platformTuning: { telegramAccount: { sendGapMs: 10, sendJitterMs: 10, actionEveryMs: 200 } },
    ...extra,
  });
  const account = await t.createAccount();
  const created = (await t.request({ method: 'POST', url: `${API}/telegram/sessions`, key: account.liveKey })).json();
  world.scan(decodeQr(created.qr_code), JANE);
  await eventually(async () => (await t.request({ method: 'GET', url: `${API}/telegram/sessions/${created.session_id}`, key: account.liveKey })).json().status === 'connected', 'linking');
  return { t, world, key: account.liveKey, accountId: account.accountId, sessionId: created.session_id };
}

const sendFrom = (t: TestApp, key: string, sessionId: string, recipient: string, extra: Record<string, unknown> = {}) =>
  t.send(key, { platform: 'telegram', recipient, audio_url: t.voiceUrl, session: { session_id: sessionId }, ...extra });

describe("Telegram's errors, by the name Telegram gives them (unit)", () => {
  /** What `messages.sendMedia` throws for `name`: GramJS's own error class, as its sender builds it from Telegram's rpc_error. */
  const rpcError = (code: number, name: string) => RPCMessageToError(new Api.RpcError({ errorCode: code, errorMessage: name }), new Api.help.GetConfig());
  const outcome = (error: unknown): string => {
    const r = classifyTelegramError(error, 'the voice note');
    if (r.kind === 'fail') return `${r.error.code}${r.error.transient ? ' (retried)' : ''}`;
    return r.kind === 'flood_wait' ? `flood_wait ${r.seconds}` : r.kind;
  };

  it('maps each to what the sending code does: wait, rest, session_expired, or the failure the README names', () => {
    const table: ReadonlyArray<[code: number, name: string, outcome: string]> = [
      [420, 'FLOOD_WAIT_7', 'flood_wait 7'],
      [420, 'SLOWMODE_WAIT_3', 'flood_wait 3'],
      [400, 'PEER_FLOOD', 'peer_flood'],
      [401, 'AUTH_KEY_UNREGISTERED', 'revoked'],
      [401, 'SESSION_REVOKED', 'revoked'],
      [403, 'USER_PRIVACY_RESTRICTED', 'recipient_blocked'],
      [403, 'PRIVACY_PREMIUM_REQUIRED', 'recipient_blocked'],
      [403, 'VOICE_MESSAGES_FORBIDDEN', 'recipient_blocked'],
      [400, 'USER_IS_BLOCKED', 'recipient_blocked'],
      [400, 'YOU_BLOCKED_USER', 'recipient_blocked'],
      [400, 'USERNAME_NOT_OCCUPIED', 'recipient_not_found'],
      [400, 'PEER_ID_INVALID', 'recipient_not_found'],
      [400, 'INPUT_USER_DEACTIVATED', 'recipient_not_found'],
      [500, 'RPC_CALL_FAIL', 'platform_error (retried)'],
    ];
    for (const [code, name, expected] of table) assert.equal(outcome(rpcError(code, name)), expected, name);
    const privacy = classifyTelegramError(rpcError(403, 'USER_PRIVACY_RESTRICTED'), 'the voice note');
    assert.ok(privacy.kind === 'fail');
    assert.match(privacy.error.message, /USER_PRIVACY_RESTRICTED/, 'the message names what Telegram said');
    // No answer of Telegram's at all (the connection dropped): tried again.
    assert.equal(outcome(new Error('socket closed')), 'platform_error (retried)');
  });
});

describe(`sending from a linked Telegram account (${STORAGE_LABEL})`, () => {
  it('acceptance: a ts_ session beside bot_token, both together 422, an unknown one 422, one not connected 422 session_not_connected', async () => {
    const t = await startTestApp({ env: { SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    try {
      const account = await t.createAccount();
      const id = (await t.request({ method: 'POST', url: `${API}/telegram/sessions`, key: account.testKey })).json().session_id;
      const notYet = assertErrorEnvelope(await sendFrom(t, account.testKey, id, '@bob_builder'), 422, 'session_not_connected');
      assert.equal(notYet.details.status, 'qr_pending');
      await t.request({ method: 'POST', url: `${API}/telegram/sessions/${id}/simulate`, key: account.testKey, body: { event: 'scan' } });
      const both = assertErrorEnvelope(
        await t.send(account.testKey, { platform: 'telegram', recipient: '@bob_builder', audio_url: t.voiceUrl, session: { session_id: id, bot_token: TELEGRAM_TOKEN } }),
        422,
        'invalid_parameter',
      );
      assert.equal(both.details.field, 'session');
      const unknown = assertErrorEnvelope(await sendFrom(t, account.testKey, 'ts_000000000000000000000000', '@bob_builder'), 422, 'invalid_parameter');
      assert.equal(unknown.details.field, 'session.session_id');
      assertErrorEnvelope(await sendFrom(t, account.testKey, 'ws_000000000000000000000000', '@bob_builder'), 422, 'invalid_parameter');
      const accepted = await sendFrom(t, account.testKey, id, '@bob_builder');
      assert.equal(accepted.statusCode, 202, accepted.body);
      const done = await t.waitForStatus(account.testKey, accepted.json().id, ['delivered', 'failed']);
      assert.equal(done.status, 'delivered');
      const bot = await t.send(account.testKey, { platform: 'telegram', recipient: '123456789', audio_url: t.voiceUrl, session: { bot_token: TELEGRAM_TOKEN } });
      assert.equal(bot.statusCode, 202, 'bots are as before');
    } finally {
      await t.close();
    }
  });

  it('@username: messages.sendMedia with the uploaded Ogg Opus as audio/ogg, voice, its duration, the 100-bar waveform and the caption', async () => {
    const { t, world, key, sessionId } = await liveWorld();
    try {
      const accepted = await sendFrom(t, key, sessionId, '@bob_builder', { caption: 'Hi Bob, a quick note' });
      assert.equal(accepted.statusCode, 202, accepted.body);
      const done = await t.waitForStatus(key, accepted.json().id, ['delivered', 'failed']);
      assert.equal(done.status, 'delivered', JSON.stringify(done));
      assert.equal(world.sent.length, 1);
      const note = world.sent[0]!;
      assert.equal(note.from, JANE.userId);
      assert.equal(note.to, BOB.userId);
      assert.equal(note.mimeType, 'audio/ogg');
      assert.equal(note.voice, true);
      assert.equal(note.caption, 'Hi Bob, a quick note');
      const ogg = describeOggOpus(note.bytes);
      assert.equal(ogg.channels, 1);
      assert.equal(note.duration, Math.max(1, Math.round(Number(ogg.lastGranule - BigInt(ogg.preSkip)) / 48_000)), 'duration in whole seconds of the file sent');
      assert.equal(note.waveform.length, 63);
      const bars = unpack5bit(note.waveform, 100);
      assert.ok(bars.every((v) => v >= 0 && v <= 31));
      // The fixture is a steady tone: Telegram Desktop's scaling (against 1.8 × the mean) draws it at 31 / 1.8 ≈ 17.
      assert.ok(bars.every((v) => v === 16 || v === 17), `a steady tone's bars: ${bars.join(',')}`);
      const parts = world.requests.filter((r) => r.className === 'upload.SaveFilePart');
      assert.ok(parts.length >= 1, 'uploaded with upload.saveFilePart');
      assert.equal(world.requests.filter((r) => r.className === 'messages.SendMedia').length, 1);
      // The senders list names the account as people know it, as it names a bot.
      const senders = (await t.request({ method: 'GET', url: '/api/v1/senders', key })).json().data;
      assert.deepEqual(senders.map((s: any) => [s.kind, s.label]), [['telegram_account', `@${JANE.username}`]]);
    } finally {
      await t.close();
    }
  });

  it('a phone number is resolved with contacts.resolvePhone (no contact imported); a user id is found among the chats; the fake refuses what Telegram refuses', async () => {
    const { t, world, key, sessionId } = await liveWorld();
    try {
      const byPhone = await sendFrom(t, key, sessionId, '33612345678');
      assert.equal((await t.waitForStatus(key, byPhone.json().id, ['delivered', 'failed'])).status, 'delivered');
      assert.equal(world.sent.at(-1)!.to, CAROL.userId);
      assert.ok(world.requests.some((r) => r.className === 'contacts.ResolvePhone'));
      assert.ok(!world.requests.some((r) => r.className === 'contacts.ImportContacts'), 'no stranger imported as a contact');
      assert.equal(world.contacts.get(JANE.userId)?.size ?? 0, 0, 'no stranger left in the contacts');

      // Carol is now a chat of the account: her user id finds her without importing anything.
      const imports = world.requests.filter((r) => r.className === 'contacts.ImportContacts').length;
      const byId = await sendFrom(t, key, sessionId, String(CAROL.userId));
      assert.equal((await t.waitForStatus(key, byId.json().id, ['delivered', 'failed'])).status, 'delivered');
      assert.equal(world.sent.at(-1)!.to, CAROL.userId);
      assert.equal(world.requests.filter((r) => r.className === 'contacts.ImportContacts').length, imports);

      const nobody = await sendFrom(t, key, sessionId, '@nobody_here');
      const failed = await t.waitForStatus(key, nobody.json().id, ['delivered', 'failed']);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error.code, 'recipient_not_found');
      assert.deepEqual(world.refusals, [], 'every note the service sent passed the fake’s checks');
    } finally {
      await t.close();
    }
  });

  it('recording_indicator: "recording a voice message" before the note, "sending a voice message" while it uploads', async () => {
    const { t, world, key, sessionId } = await liveWorld();
    try {
      const accepted = await sendFrom(t, key, sessionId, '@bob_builder', { recording_indicator: true });
      assert.equal((await t.waitForStatus(key, accepted.json().id, ['delivered', 'failed'], 30_000)).status, 'delivered');
      const actions = world.requests
        .filter((r) => r.className === 'messages.SetTyping' || r.className === 'messages.SendMedia')
        .map((r) => (r.className === 'messages.SendMedia' ? 'send' : (r.request as unknown as { action: { className: string } }).action.className));
      assert.equal(actions[0], 'SendMessageRecordAudioAction');
      const upload = actions.indexOf('SendMessageUploadAudioAction');
      assert.ok(upload > 0 && upload < actions.indexOf('send'), `upload action before the send: ${actions.join(', ')}`);
    } finally {
      await t.close();
    }
  });

  it('receipts: updateReadHistoryOutbox is voice_note.read, updateReadMessagesContents is voice_note.played; the message detail shows them', async () => {
    const { t, world, key, sessionId } = await liveWorld();
    try {
      await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key, body: { url: 'https://hooks.example.com/t', events: ['voice_note.read', 'voice_note.played', 'voice_note.replied'] } });
      const accepted = await sendFrom(t, key, sessionId, '@bob_builder');
      const id = accepted.json().id;
      assert.equal((await t.waitForStatus(key, id, ['delivered', 'failed'])).status, 'delivered');
      const detail = async () => (await t.request({ method: 'GET', url: `${API}/messages/${id}`, key })).json();
      assert.deepEqual((await detail()).receipts, { supported: true, reason: null, delivered_to_device_at: null, read_at: null, played_at: null });
      const note = world.sent.at(-1)!;
      world.read(BOB.userId, JANE.userId, note.messageId);
      const read = await eventually(async () => (await detail()).receipts.read_at, 'read');
      assert.ok(read);
      assert.equal((await detail()).receipts.played_at, null);
      world.played(JANE.userId, note.messageId);
      await eventually(async () => (await detail()).receipts.played_at, 'played');
      const types = (await t.app.services.db.kysely.selectFrom('webhook_events').select(['type', 'payload']).execute()).filter((e) => JSON.parse(e.payload).data.id === id).map((e) => e.type);
      assert.deepEqual(types.sort(), ['voice_note.played', 'voice_note.read']);

      // What the account itself writes to Bob from its phone comes back to it as Bob's chat, marked `out`: no reply.
      world.wrote(JANE.userId, BOB.userId, 'my own follow-up', 'short');
      world.wrote(JANE.userId, BOB.userId, 'my own follow-up, in full', 'full');
      // A reply from Bob is recorded on the note (the one inbound road); a stranger's message is not.
      const replyId = world.reply(BOB.userId, JANE.userId, 'Thanks, got it!');
      world.reply(CAROL.userId, JANE.userId, 'who is this?');
      const replies = await eventually(async () => {
        const found = (await detail()).replies;
        return found?.length > 0 ? found : undefined;
      }, 'the reply');
      await new Promise((r) => setTimeout(r, 200));
      assert.deepEqual(
        (await detail()).replies.map((r: any) => [r.type, r.text]),
        [['text', 'Thanks, got it!']],
        'only people a note went to, and only what they wrote',
      );
      assert.match(replies[0].id, /^rpl_/);
      assert.ok((await detail()).first_replied_at);
      const replied = (await t.app.services.db.kysely.selectFrom('webhook_events').select(['type', 'payload']).execute()).filter((e) => e.type === 'voice_note.replied');
      assert.deepEqual(
        replied.map((e) => [JSON.parse(e.payload).data.id, JSON.parse(e.payload).data.reply.text]),
        [[id, 'Thanks, got it!']],
        'voice_note.replied, once, on the note',
      );
      assert.ok(replyId);
    } finally {
      await t.close();
    }
  });

  it("errors as Telegram words them: FLOOD_WAIT waits, PEER_FLOOD rests the account and fails nothing, privacy is recipient_blocked, a revoked key is session_expired", async () => {
    const { t, world, key, sessionId } = await liveWorld();
    try {
      world.failNext.push({ className: 'messages.SendMedia', errorMessage: 'FLOOD_WAIT_2' });
      const started = Date.now();
      const flooded = await sendFrom(t, key, sessionId, '@bob_builder');
      const paced = await t.waitForStatus(key, flooded.json().id, ['delivered', 'failed'], 20_000);
      assert.equal(paced.status, 'delivered', 'paced, not failed');
      assert.ok(Date.now() - started >= 2_000, 'waited the seconds Telegram said');
      // The retry is the same message to Telegram: the same random_id, so Telegram could never post it twice.
      const sends = world.requests.filter((r) => r.className === 'messages.SendMedia').map((r) => String((r.request as Api.messages.SendMedia).randomId));
      assert.equal(sends.length, 2, 'refused once, then sent');
      assert.equal(sends[1], sends[0], 'the retry carries the random_id of the refused send');

      const blocked = await sendFrom(t, key, sessionId, '@dave_private');
      const refused = await t.waitForStatus(key, blocked.json().id, ['delivered', 'failed']);
      assert.equal(refused.status, 'failed');
      assert.equal(refused.error.code, 'recipient_blocked');
      assert.match(refused.error.message, /PRIVACY_PREMIUM_REQUIRED/);

      world.failNext.push({ className: 'messages.SendMedia', errorMessage: 'PEER_FLOOD' });
      const rested = await sendFrom(t, key, sessionId, '@bob_builder');
      const restingRow = await eventually(async () => {
        const row = await t.app.services.db.kysely.selectFrom('telegram_sessions').select('resting_until').where('id', '=', sessionId).executeTakeFirst();
        return row?.resting_until ? Number(row.resting_until) : undefined;
      }, 'the account to rest');
      assert.ok(restingRow > Date.now() + 60 * 60_000, 'rests for hours');
      // Back in the queue once the attempt has settled: PEER_FLOOD fails nothing, the note waits out the rest.
      const waiting = await eventually(async () => {
        const now = (await t.request({ method: 'GET', url: `${API}/status/${rested.json().id}`, key })).json();
        return now.status !== 'processing' ? now : undefined;
      }, 'the attempt to settle');
      assert.equal(waiting.status, 'queued', 'PEER_FLOOD fails nothing: the note waits');
      const nextAttempt = (await t.request({ method: 'GET', url: `${API}/messages/${rested.json().id}`, key })).json().next_attempt_at;
      assert.ok(Date.parse(nextAttempt) > Date.now() + 60 * 60_000, `the note comes back after the rest, beyond the retry window: ${nextAttempt}`);
      const sender = (await t.request({ method: 'GET', url: `${API}/senders`, key })).json().data[0];
      assert.equal(sender.status, 'resting', 'GET /senders says the account rests');
      assert.ok(Date.parse(sender.until) > Date.now() + 60 * 60_000, 'until the rest is over');
      // Another note during the rest is not sent: it waits out the rest too.
      const sentBefore = world.requests.filter((r) => r.className === 'messages.SendMedia').length;
      const during = await sendFrom(t, key, sessionId, '@bob_builder');
      const held = await eventually(async () => {
        const now = (await t.request({ method: 'GET', url: `${API}/messages/${during.json().id}`, key })).json();
        if (now.status === 'delivered' || now.status === 'failed') return now;
        return now.status === 'queued' && Date.parse(now.next_attempt_at) > Date.now() + 60 * 60_000 ? now : undefined;
      }, 'the note sent during the rest to be looked at');
      assert.equal(held.status, 'queued', 'a note sent during the rest waits for its end');
      assert.equal(world.requests.filter((r) => r.className === 'messages.SendMedia').length, sentBefore, 'nothing sent to Telegram during the rest');
      // The rest ended early, by hand, for the rest of this test.
      await t.app.services.db.kysely.updateTable('telegram_sessions').set({ resting_until: null }).where('id', '=', sessionId).execute();
      await t.app.services.db.kysely.updateTable('sender_records').set({ until: Date.now() - 1 }).where('sender_key', '=', sessionId).execute();

      world.failNext.push({ className: 'messages.SendMedia', errorMessage: 'AUTH_KEY_UNREGISTERED' });
      const revoked = await sendFrom(t, key, sessionId, '@bob_builder');
      const expired = await t.waitForStatus(key, revoked.json().id, ['delivered', 'failed']);
      assert.equal(expired.status, 'failed');
      assert.equal(expired.error.code, 'session_expired');
      assert.equal((await t.request({ method: 'GET', url: `${API}/telegram/sessions/${sessionId}`, key })).json().status, 'disconnected');
    } finally {
      await t.close();
    }
  });

  it('a daily rhythm of its own for accounts (bots keep none): 5 notes on the first day, then the next waits for the day after', async () => {
    const { t, key, sessionId } = await liveWorld({ builtInRhythm: true });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) ids.push((await sendFrom(t, key, sessionId, '@bob_builder')).json().id);
      // Which five go first is the claim's choice: five are delivered and one waits for the cap.
      const details = await eventually(async () => {
        const all = await Promise.all(ids.map(async (id) => (await t.request({ method: 'GET', url: `${API}/messages/${id}`, key })).json()));
        const delivered = all.filter((d) => d.status === 'delivered').length;
        const capped = all.filter((d) => d.status === 'queued' && d.waiting_for === 'daily_cap').length;
        return delivered === 5 && capped === 1 ? all : undefined;
      }, 'five delivered and one waiting for the cap', 30_000);
      assert.equal(details.length, 6);
    } finally {
      await t.close();
    }
  });
});

describe('a Telegram account error that is not Telegram\'s own', () => {
  it('a socket error is named by its code, never by the address it tried; other errors by their text', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.20.30.40:443'), { code: 'ECONNREFUSED' });
    const wrapped = new Error('Connection to 10.20.30.40:443 failed', { cause: refused });
    for (const error of [refused, wrapped]) {
      const outcome = classifyTelegramError(error, 'the voice note');
      assert.equal(outcome.kind, 'fail');
      assert.equal(outcome.kind === 'fail' && outcome.error.message, 'Telegram did not answer the voice note: ECONNREFUSED');
    }
    const plain = classifyTelegramError(new Error('Not connected'), 'the voice note');
    assert.equal(plain.kind === 'fail' && plain.error.message, 'Telegram did not answer the voice note: Not connected');
  });
});
