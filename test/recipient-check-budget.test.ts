/**
 * Recipient checks are no free oracle (README, "Recipients checked"): a fresh kept answer is given again
 * without asking the platform, and the checks that do ask count under the sender's daily budget, shown in
 * GET /senders; past it, 429 in the error envelope with the time it resets.
 */
import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { startTelegramApi } from './fakes/telegram-api.js';
import { eventually } from './fixtures/eventually.js';
import { FakeWhatsapp } from './fakes/whatsapp-network.js';
import { assertErrorEnvelope, closeSharedAudio, FAST_WHATSAPP, startTestApp, STORAGE_LABEL, TELEGRAM_TOKEN, type TestApp } from './fixtures/app-harness.js';

after(closeSharedAudio);

const API = '/api/v1';
const BUDGET = 50;
const check = (t: TestApp, key: string, body: unknown) => t.request({ method: 'POST', url: `${API}/recipients/check`, key, body });

async function checked(t: TestApp, key: string, body: Record<string, unknown>): Promise<any> {
  const res = await check(t, key, body);
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

const senderOf = async (t: TestApp, key: string): Promise<any> => (await t.request({ method: 'GET', url: `${API}/senders`, key })).json().data[0];

describe(`recipient checks: kept answers and a daily budget (${STORAGE_LABEL})`, () => {
  it('WhatsApp: a number checked again is answered from the kept check without a lookup; live lookups stop at the budget with 429 until the next UTC day', async () => {
    const world = new FakeWhatsapp();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('a'), whatsappLive: FAST_WHATSAPP });
    try {
      const account = await t.createAccount();
      const key = account.liveKey;
      const created = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions`, key });
      const sessionId: string = created.json().session_id;
      world.scan(sessionId, '14155550123');
      await eventually(async () => (await t.request({ method: 'GET', url: `${API}/whatsapp/sessions/${sessionId}`, key })).json().status === 'connected', 'connected');
      const session = { session_id: sessionId };
      world.absent.add('14155550699');

      assert.equal((await checked(t, key, { platform: 'whatsapp', recipient: '14155550600', session })).exists, true);
      assert.equal((await checked(t, key, { platform: 'whatsapp', recipient: '14155550699', session })).exists, false);
      // Again: the kept answers, WhatsApp not asked.
      assert.deepEqual(await checked(t, key, { platform: 'whatsapp', recipient: '14155550600', session }), { platform: 'whatsapp', recipient: '14155550600', exists: true, reason: null, suppressed: false });
      const again = await checked(t, key, { platform: 'whatsapp', recipient: '14155550699', session });
      assert.equal(again.exists, false);
      assert.match(again.reason, /not found/);
      assert.deepEqual(world.lookups, ['14155550600', '14155550699']);
      assert.deepEqual((await senderOf(t, key)).recipient_checks, { today: 2, daily_budget: BUDGET });

      for (let n = 2; n < BUDGET; n++) {
        assert.equal((await checked(t, key, { platform: 'whatsapp', recipient: `1415555${String(1000 + n)}`, session })).exists, true);
      }
      assert.equal(world.lookups.length, BUDGET);
      const over = await check(t, key, { platform: 'whatsapp', recipient: '14155559999', session });
      const error = assertErrorEnvelope(over, 429, 'rate_limited');
      const nextDay = new Date(Math.floor(Date.now() / 86_400_000 + 1) * 86_400_000).toISOString();
      assert.deepEqual(error.details, { daily_budget: BUDGET, resets_at: nextDay });
      const retryAfter = Number(over.headers['retry-after']);
      assert.ok(retryAfter > 0 && retryAfter <= 86_400, `Retry-After ${over.headers['retry-after']}`);
      assert.equal(world.lookups.length, BUDGET, 'not asked past the budget');
      assert.deepEqual((await senderOf(t, key)).recipient_checks, { today: BUDGET, daily_budget: BUDGET });
      // A kept answer costs nothing: still given.
      assert.equal((await checked(t, key, { platform: 'whatsapp', recipient: '14155550600', session })).exists, true);
    } finally {
      await t.close();
    }
  });

  it("Telegram: a chat the bot reaches is answered from the kept check; getChat is asked once", async () => {
    const fake = await startTelegramApi();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    try {
      const account = await t.createAccount();
      const session = { bot_token: TELEGRAM_TOKEN };
      for (let i = 0; i < 3; i++) assert.equal((await checked(t, account.liveKey, { platform: 'telegram', recipient: '410000010', session })).exists, true);
      assert.equal(fake.calls.filter((c) => c.method.toLowerCase() === 'getchat').length, 1);
      assert.equal((await senderOf(t, account.liveKey)).recipient_checks.today, 1);
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it("Telegram: checks asked at once take the bot's turns one flood-limit slot apart, as its sends do", async () => {
    const fake = await startTelegramApi();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    try {
      const account = await t.createAccount();
      const session = { bot_token: TELEGRAM_TOKEN };
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => checked(t, account.liveKey, { platform: 'telegram', recipient: String(420000000 + i), session })));
      assert.ok(answers.every((a) => a.exists === true));
      const times = fake.calls.filter((c) => c.method.toLowerCase() === 'getchat').map((c) => c.receivedAt).sort((a, b) => a - b);
      assert.equal(times.length, 8);
      // The Bot API's limit per bot is about 30 messages a second: its slots are 35 ms apart, seven gaps
      // (245 ms) from the first to the last. As they arrive, less: the first may wait on its connection
      // longer than the rest, and on a busy machine a late call arrives close to the next (146 ms was seen
      // at a load of 20). Unpaced, the eight arrive within a few milliseconds of each other.
      assert.ok(times.at(-1)! - times[0]! >= 4 * 35, `8 getChat calls within ${times.at(-1)! - times[0]!} ms`);
    } finally {
      await t.close();
      await fake.close();
    }
  });
});
