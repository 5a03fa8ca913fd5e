import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { assertErrorEnvelope, closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, type TestApp } from './fixtures/app-harness.js';
import { startLinkedinVoyagerFake } from './fakes/linkedin-voyager.js';
import { startTelegramApi } from './fakes/telegram-api.js';
import { startWebhookReceiver } from './fakes/webhook-receiver.js';
import { eventually } from './fixtures/eventually.js';
import { JANE, newLinkedinSession, USER_AGENT } from './fixtures/linkedin-account.js';

/**
 * What a listener hears goes only where it belongs: a live listener's replies only to live notes of the
 * accounts that sent with that credential, never to a sandbox note sent with the same cookie or token;
 * a listener's state seen and ended only by the accounts and environment that asked for it; two accounts
 * sharing one bot each keep their own follow-ups.
 */

const DAY = 86_400_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const inMs = (ms: number): string => new Date(Date.now() + ms).toISOString();

after(async () => {
  await closeSharedAudio();
});


async function accepted(t: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  const res = await t.send(key, body);
  assert.equal(res.statusCode, 202, res.body);
  return res.json().id as string;
}

const detail = async (t: TestApp, key: string, id: string) => (await t.request({ method: 'GET', url: `/api/v1/messages/${id}`, key })).json();
const statusOf = async (t: TestApp, key: string, id: string) => (await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key })).json().status;

describe(`replies and listening stay within their environment and accounts (${STORAGE_LABEL})`, () => {
  it("a live LinkedIn reply lands on the live note only: never on the same account's sandbox note, nor on another account's sent with the same cookie", async () => {
    const fake = await startLinkedinVoyagerFake({ profiles: [JANE] });
    const t = await startTestApp({
      env: { LINKEDIN_API_ROOT: fake.apiRoot },
      linkedinPace: { minMs: 0, maxMs: 0 },
      // A look every second after the first: one comes after the reply however slow the sandbox deliveries are.
      platformTuning: { linkedinListen: { scanMs: 100, intervalsMs: [400], dailyMs: 1_000 } },
    });
    const receiver = await startWebhookReceiver();
    try {
      const session = newLinkedinSession(fake);
      const liSession = { li_at: session.liAt, csrf_token: session.csrfToken, user_agent: USER_AGENT, cookies: `bcookie="v=2&abc"; lang=v=2&lang=en-us` };
      const body = (extra: Record<string, unknown> = {}) => ({ ...defaultSendBody('linkedin', t.mp3Url), recipient: JANE.publicId, session: liSession, ...extra });
      const a = await t.createAccount();
      const b = await t.createAccount();
      const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: b.testKey, body: { url: receiver.url('/b-sandbox') } });
      assert.equal(hook.statusCode, 201, hook.body);

      const live = await accepted(t, a.liveKey, body({ listen: true }));
      assert.equal((await t.waitForStatus(a.liveKey, live, ['delivered', 'failed'])).status, 'delivered');
      // Delivered after the live note, so each would be "the latest note" if environments mixed.
      const sandboxOfA = await accepted(t, a.testKey, body());
      await t.waitForStatus(a.testKey, sandboxOfA, ['delivered']);
      const sandboxOfB = await accepted(t, b.testKey, body());
      await t.waitForStatus(b.testKey, sandboxOfB, ['delivered']);
      const followUpOfB = await accepted(t, b.testKey, body({ send_at: inMs(DAY), cancel_on_reply: true }));

      const conversation = fake.conversationWith(session.liAt, JANE.urn)!;
      fake.pushMessage(conversation, { from: JANE.urn, text: 'Got it, thanks' });
      const replies = await eventually(async () => {
        const found = (await detail(t, a.liveKey, live)).replies;
        return found.length > 0 ? found : undefined;
      }, 'the reply on the live note', 30_000);
      assert.deepEqual(replies.map((r: any) => r.text), ['Got it, thanks']);
      assert.deepEqual((await detail(t, a.testKey, sandboxOfA)).replies, []);
      assert.deepEqual((await detail(t, b.testKey, sandboxOfB)).replies, []);
      assert.equal(await statusOf(t, b.testKey, followUpOfB), 'queued', "the other account's follow-up stays");
      // B's sandbox note's own event arrives (the outbox sends it when it polls), and no reply or cancel after it.
      await receiver.waitFor(1, 'voice_note.delivered');
      await sleep(300);
      assert.deepEqual(receiver.received.filter((r) => r.path === '/b-sandbox').map((r) => JSON.parse(r.body).type), ['voice_note.delivered']);
    } finally {
      await t.close();
      await receiver.close();
      await fake.close();
    }
  });

  it("a sandbox note sent with a live bot's token neither shows nor ends its listener; each account ends only its own listening", async () => {
    const fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, platformTuning: { telegram: { listenScanMs: 100, listenPollSeconds: 1 } } });
    const bots = () => t.app.services.db.kysely.selectFrom('telegram_listeners').select('sender_key').execute();
    const listening = async (key: string, id: string) => (await detail(t, key, id)).listening;
    try {
      const a = await t.createAccount();
      const b = await t.createAccount();
      const body = (recipient: string, extra: Record<string, unknown> = {}) => ({ ...defaultSendBody('telegram', t.voiceUrl), recipient, ...extra });
      const liveOfA = await accepted(t, a.liveKey, body('556001', { listen: true }));
      await t.waitForStatus(a.liveKey, liveOfA, ['delivered']);
      const sandboxOfA = await accepted(t, a.testKey, body('556001'));
      const sandboxOfB = await accepted(t, b.testKey, body('556002'));
      const liveOfB = await accepted(t, b.liveKey, body('556002'));
      await t.waitForStatus(b.liveKey, liveOfB, ['delivered']);
      assert.equal((await listening(a.liveKey, liveOfA)).status, 'listening');

      // The sandbox, and a live account that never asked, see nothing of A's listener and cannot end it.
      for (const [key, id] of [[a.testKey, sandboxOfA], [b.testKey, sandboxOfB], [b.liveKey, liveOfB]] as const) {
        assert.equal(await listening(key, id), null, id);
        assertErrorEnvelope(await t.request({ method: 'DELETE', url: `/api/v1/messages/${id}/listening`, key }), 404, 'not_found');
      }
      assert.equal((await bots()).length, 1, 'the live token is still kept');
      assert.equal((await listening(a.liveKey, liveOfA)).status, 'listening');

      // B asks too: both listen to the one bot; B ending its listening leaves A's (and the token).
      const listenedOfB = await accepted(t, b.liveKey, body('556002', { listen: true }));
      await t.waitForStatus(b.liveKey, listenedOfB, ['delivered']);
      assert.equal((await listening(b.liveKey, listenedOfB)).status, 'listening');
      const stopB = await t.request({ method: 'DELETE', url: `/api/v1/messages/${listenedOfB}/listening`, key: b.liveKey });
      assert.deepEqual(stopB.json(), { deleted: true });
      assert.equal(await listening(b.liveKey, listenedOfB), null);
      assert.equal((await listening(a.liveKey, liveOfA)).status, 'listening');
      assert.equal((await bots()).length, 1);
      const stopA = await t.request({ method: 'DELETE', url: `/api/v1/messages/${liveOfA}/listening`, key: a.liveKey });
      assert.deepEqual(stopA.json(), { deleted: true });
      assert.equal((await bots()).length, 0, 'the token is erased with the last listening');
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('two accounts sharing one bot: a reply lands on the latest note to that chat and cancels only that account\'s follow-ups', async () => {
    const fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, platformTuning: { telegram: { listenScanMs: 100, listenPollSeconds: 1 } } });
    try {
      const a = await t.createAccount();
      const b = await t.createAccount();
      const body = (extra: Record<string, unknown> = {}) => ({ ...defaultSendBody('telegram', t.voiceUrl), recipient: '557001', ...extra });
      const noteOfA = await accepted(t, a.liveKey, body({ listen: true }));
      await t.waitForStatus(a.liveKey, noteOfA, ['delivered']);
      const noteOfB = await accepted(t, b.liveKey, body({ listen: true }));
      await t.waitForStatus(b.liveKey, noteOfB, ['delivered']);
      const followUpOfA = await accepted(t, a.liveKey, body({ send_at: inMs(DAY), cancel_on_reply: true }));
      const followUpOfB = await accepted(t, b.liveKey, body({ send_at: inMs(DAY), cancel_on_reply: true }));

      fake.pushUpdate(TELEGRAM_TOKEN, {
        message: { message_id: 31, date: Math.floor(Date.now() / 1000) + 1, chat: { id: 557001, type: 'private' }, from: { id: 557001, is_bot: false, first_name: 'Jo' }, text: 'yes' },
      });
      await eventually(async () => (await statusOf(t, b.liveKey, followUpOfB)) === 'canceled', "B's follow-up canceled", 30_000);
      assert.deepEqual((await detail(t, b.liveKey, noteOfB)).replies.map((r: any) => r.text), ['yes']);
      assert.deepEqual((await detail(t, a.liveKey, noteOfA)).replies, []);
      assert.equal(await statusOf(t, a.liveKey, followUpOfA), 'queued', "A's follow-up is A's: not canceled by a reply to B's note");
    } finally {
      await t.close();
      await fake.close();
    }
  });
});
