/**
 * Recipients checked (docs/senders.md, "Recipients checked"): POST /recipients/check asks the platform as the
 * sender; a live WhatsApp send asks before its first note to a number (kept 30 days), and a number not on
 * WhatsApp fails without a message sent. Sandbox: recipients ending in 7 do not exist.
 */
import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { startTelegramApi } from './fakes/telegram-api.js';
import { startLinkedinVoyagerFake } from './fakes/linkedin-voyager.js';
import { eventually } from './fixtures/eventually.js';
import { FakeWhatsapp } from './fakes/whatsapp-network.js';
import {
  assertErrorEnvelope,
  closeSharedAudio,
  connectedSandboxSession,
  defaultSendBody,
  FAST_WHATSAPP,
  startTestApp,
  STORAGE_LABEL,
  TELEGRAM_TOKEN,
  type TestApp,
  LINKEDIN_SESSION,
} from './fixtures/app-harness.js';

after(closeSharedAudio);

const API = '/api/v1';
const check = (t: TestApp, key: string, body: unknown) => t.request({ method: 'POST', url: `${API}/recipients/check`, key, body });

async function checked(t: TestApp, key: string, body: Record<string, unknown>): Promise<any> {
  const res = await check(t, key, body);
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

describe(`POST /recipients/check (${STORAGE_LABEL})`, () => {
  it('sandbox: recipients ending in 7 do not exist on any platform (and a send to one fails recipient_not_found); bad input is refused in the envelope', async () => {
    const t = await startTestApp();
    try {
      const account = await t.createAccount();
      const key = account.testKey;
      const sessionId = await connectedSandboxSession(t, key);
      const bodies = {
        telegram: { platform: 'telegram', session: { bot_token: TELEGRAM_TOKEN } },
        whatsapp: { platform: 'whatsapp', session: { session_id: sessionId } },
        linkedin: { platform: 'linkedin', session: defaultSendBody('linkedin', t.voiceUrl).session },
      };
      const recipients = { telegram: ['123456787', '123456788'], whatsapp: ['14155550107', '14155550108'], linkedin: ['jane-smith-a1b2c7', 'jane-smith-a1b2c8'] };
      for (const [platform, body] of Object.entries(bodies)) {
        const [absent, present] = recipients[platform as keyof typeof recipients];
        const no = await checked(t, key, { ...body, recipient: absent });
        assert.deepEqual(Object.keys(no).sort(), ['exists', 'platform', 'reason', 'recipient', 'suppressed']);
        assert.deepEqual([no.platform, no.recipient, no.exists], [platform, absent, false]);
        assert.match(no.reason, /7/);
        assert.deepEqual(await checked(t, key, { ...body, recipient: present }), { platform, recipient: present, exists: true, reason: null, suppressed: false });
      }

      const sent = await t.send(key, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '123456787' });
      assert.equal(sent.statusCode, 202, sent.body);
      const status = await t.waitForStatus(key, sent.json().id, ['delivered', 'failed']);
      assert.equal(status.error?.code, 'recipient_not_found');
      // The sandbox's other recipients keep their outcomes.
      const expired = await t.send(key, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '10000000001' });
      assert.equal((await t.waitForStatus(key, expired.json().id, ['delivered', 'failed'])).error?.code, 'session_expired');

      assert.equal(assertErrorEnvelope(await check(t, key, { platform: 'fax', recipient: '1', session: {} }), 400, 'invalid_request').details.field, 'platform');
      assert.equal(assertErrorEnvelope(await check(t, key, { ...bodies.telegram, recipient: 'not a chat' }), 422, 'invalid_parameter').details.field, 'recipient');
      assert.equal(assertErrorEnvelope(await check(t, key, { ...bodies.telegram, recipient: '1234', extra: 1 }), 400, 'invalid_request').details.field, 'extra');
      assert.equal(assertErrorEnvelope(await check(t, key, { platform: 'telegram', recipient: '1234', session: {} }), 422, 'invalid_parameter').details.field, 'session.bot_token');
      assertErrorEnvelope(await check(t, key, { platform: 'whatsapp', recipient: '14155550100', session: { session_id: 'ws_nope' } }), 422, 'invalid_parameter');
    } finally {
      await t.close();
    }
  });

  it('live Telegram: getChat says whether the bot reaches the chat (a user who never started it: exists false, with why)', async () => {
    const fake = await startTelegramApi();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    try {
      const account = await t.createAccount();
      fake.unstartedChats.add('410000001');
      const session = { bot_token: TELEGRAM_TOKEN };
      const no = await checked(t, account.liveKey, { platform: 'telegram', recipient: '410000001', session });
      assert.equal(no.exists, false);
      assert.match(no.reason, /started/);
      assert.deepEqual(await checked(t, account.liveKey, { platform: 'telegram', recipient: '410000002', session }), {
        platform: 'telegram',
        recipient: '410000002',
        exists: true,
        reason: null,
        suppressed: false,
      });
      const asked = fake.calls.filter((c) => c.method.toLowerCase() === 'getchat').map((c) => c.fields.chat_id);
      assert.deepEqual(asked, ['410000001', '410000002']);
      fake.failForToken(TELEGRAM_TOKEN, { kind: 'server_error' }, 1);
      const unsure = await checked(t, account.liveKey, { platform: 'telegram', recipient: '410000003', session });
      assert.equal(unsure.exists, null);
      assert.ok(!JSON.stringify(unsure).includes(TELEGRAM_TOKEN), 'no token in the answer');
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('a Telegram bot that is resting or has expired is not made to ask: exists null, with why, and getChat is not called', async () => {
    const fake = await startTelegramApi();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    try {
      const account = await t.createAccount();
      const session = { bot_token: TELEGRAM_TOKEN };
      // Asked now, the bot would be told the user never started it: exists false.
      fake.unstartedChats.add('420000009');
      const getChats = () => fake.calls.filter((c) => c.method.toLowerCase() === 'getchat').length;
      const note = async (recipient: string) => (await t.send(account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient, session })).json().id;

      // A flood wait rests the bot (its note waits out the minute).
      fake.failForChat('420000001', { kind: 'rate_limited', retryAfter: 60 }, 1);
      await note('420000001');
      const sender = async () => (await t.request({ method: 'GET', url: `${API}/senders`, key: account.liveKey })).json().data[0];
      // The note is converted and sent first: slow on a loaded machine.
      await eventually(async () => (await sender())?.status === 'resting', 'the bot to rest', 60_000);
      const asked = getChats();
      const resting = await checked(t, account.liveKey, { platform: 'telegram', recipient: '420000009', session });
      assert.equal(resting.exists, null, 'a resting bot does not say');
      assert.match(resting.reason, /resting until/);

      // A revoked token expires the bot.
      await t.app.services.db.kysely.updateTable('sender_records').set({ status: 'ok', until: null, reason: null }).where('id', '=', (await sender()).id).execute();
      fake.failForToken(TELEGRAM_TOKEN, { kind: 'unauthorized' }, 1);
      const revoked = await note('420000002');
      assert.equal((await t.waitForStatus(account.liveKey, revoked, ['delivered', 'failed'])).error?.code, 'invalid_session');
      await eventually(async () => (await sender())?.status === 'expired', 'the bot to expire', 30_000);
      const expired = await checked(t, account.liveKey, { platform: 'telegram', recipient: '420000009', session });
      assert.equal(expired.exists, null, 'an expired bot does not say');
      assert.match(expired.reason, /expired/);
      assert.equal(getChats(), asked, 'Telegram was not asked');
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('live Telegram: a reason that echoes the bot token has every copy of it, and its secret part alone, scrubbed', async () => {
    const fake = await startTelegramApi();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    try {
      const account = await t.createAccount();
      const secret = TELEGRAM_TOKEN.slice(TELEGRAM_TOKEN.indexOf(':') + 1);
      // A front proxy or a self-hosted Bot API server that quotes the request back: the path holds the token.
      fake.failForToken(TELEGRAM_TOKEN, { kind: 'bad_request', description: `Bad Request: /bot${TELEGRAM_TOKEN}/getChat refused; again /bot${TELEGRAM_TOKEN}/getChat; secret ${secret}` }, 1);
      const unsure = await checked(t, account.liveKey, { platform: 'telegram', recipient: '410000004', session: { bot_token: TELEGRAM_TOKEN } });
      assert.equal(unsure.exists, null);
      assert.equal(unsure.reason, 'Telegram did not say (400: Bad Request: /bot<bot token>/getChat refused; again /bot<bot token>/getChat; secret <bot token>)');
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('live LinkedIn: the recipient is resolved as a send resolves it (own profile, then the public id), and nothing is sent', async () => {
    const jane = { publicId: 'jane-smith-a1b2c3', urn: 'urn:li:fsd_profile:ACoAABjaneSmith01' };
    const fake = await startLinkedinVoyagerFake({
      profiles: [jane],
      accounts: [{ liAt: LINKEDIN_SESSION.li_at, csrfToken: LINKEDIN_SESSION.csrf_token, profileUrn: 'urn:li:fsd_profile:ACoAABownMailbox1' }],
    });
    const t = await startTestApp({ env: { LINKEDIN_API_ROOT: fake.apiRoot } });
    try {
      const account = await t.createAccount();
      const session = defaultSendBody('linkedin', t.voiceUrl).session;
      assert.deepEqual(await checked(t, account.liveKey, { platform: 'linkedin', recipient: 'https://www.linkedin.com/in/jane-smith-a1b2c3/', session }), {
        platform: 'linkedin',
        recipient: 'https://www.linkedin.com/in/jane-smith-a1b2c3/',
        exists: true,
        reason: null,
        suppressed: false,
      });
      const no = await checked(t, account.liveKey, { platform: 'linkedin', recipient: 'nobody-here-9x', session });
      assert.equal(no.exists, false);
      assert.match(no.reason, /public id/);
      assert.deepEqual(
        fake.callsOf('profile').map((c) => new URL(c.path, 'http://x').searchParams.get('memberIdentity')),
        ['jane-smith-a1b2c3', 'nobody-here-9x'],
      );
      assert.equal(fake.callsOf('createMessage').length + fake.callsOf('uploadMetadata').length, 0, 'nothing sent');
      assert.ok(!JSON.stringify(no).includes(LINKEDIN_SESSION.li_at), 'no cookie in the answer');
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('live WhatsApp: the session asks onWhatsApp; a send asks before its first note to a number only, and one not on WhatsApp fails without a message', async () => {
    const world = new FakeWhatsapp();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('a'), whatsappLive: FAST_WHATSAPP });
    try {
      const account = await t.createAccount();
      const created = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key: account.liveKey });
      const sessionId: string = created.json().session_id;
      world.scan(sessionId, '14155550123');
      await eventually(async () => (await t.request({ method: 'GET', url: `${API}/whatsapp/sessions/${sessionId}`, key: account.liveKey })).json().status === 'connected', 'connected');
      world.absent.add('14155550999');
      const session = { session_id: sessionId };
      const no = await checked(t, account.liveKey, { platform: 'whatsapp', recipient: '14155550999', session });
      assert.deepEqual([no.exists, no.reason], [false, '14155550999 is not on WhatsApp']);
      assert.equal((await checked(t, account.liveKey, { platform: 'whatsapp', recipient: '14155550100', session })).exists, true);
      assert.deepEqual(world.lookups, ['14155550999', '14155550100']);

      // A send to a number the check found: the kept answer (and JID) serve; WhatsApp is not asked again.
      const body = (recipient: string) => ({ ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient });
      const first = await t.send(account.liveKey, body('14155550101'));
      assert.equal((await t.waitForStatus(account.liveKey, first.json().id, ['delivered', 'failed'])).status, 'delivered');
      const second = await t.send(account.liveKey, body('14155550101'));
      assert.equal((await t.waitForStatus(account.liveKey, second.json().id, ['delivered', 'failed'])).status, 'delivered');
      assert.deepEqual(world.lookups.slice(2), ['14155550101'], 'asked once, before the first note to the number');
      assert.equal(world.sent.filter((s) => s.jid === '14155550101@s.whatsapp.net').length, 2);

      const sentBefore = world.sent.length;
      const absent = await t.send(account.liveKey, body('14155550999'));
      const failed = await t.waitForStatus(account.liveKey, absent.json().id, ['delivered', 'failed']);
      assert.equal(failed.error?.code, 'recipient_not_found');
      assert.equal(world.sent.length, sentBefore, 'no message sent');
      assert.equal(world.lookups.filter((n) => n === '14155550999').length, 1, 'the check answered for the send');
    } finally {
      await t.close();
    }
  });
});
