/**
 * Senders (docs/senders.md, "Senders"): each WhatsApp session, Telegram bot and LinkedIn cookie an account used,
 * with its health as the platforms told it; an expired one fails its notes without trying the platform,
 * a resting one holds them in the queue; `sender.updated` on every change of status.
 */
import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { startTelegramApi, type TelegramCall } from './fakes/telegram-api.js';
import { startWebhookReceiver } from './fakes/webhook-receiver.js';
import { eventually } from './fixtures/eventually.js';
import { FakeWhatsapp } from './fakes/whatsapp-network.js';
import { createVoicenoteClient, type RecipientCheck, type Sender, type SenderList } from '../clients/typescript/src/index.js';
import { runCli } from './fixtures/cli-process.js';
import { touchSender } from '../src/store/senders.js';
import { createDashboardAccount, FormClient } from './fixtures/dashboard-harness.js';
import {
  assertErrorEnvelope,
  closeSharedAudio,
  connectedSandboxSession,
  defaultSendBody,
  FAST_WHATSAPP,
  startTestApp,
  STORAGE_LABEL,
  TELEGRAM_TOKEN,
  withRestartableStorage,
  type TestApp,
} from './fixtures/app-harness.js';
import { linkedSession } from './fixtures/whatsapp-session.js';

after(closeSharedAudio);

const API = '/api/v1';
const OTHER_TOKEN = '987654321:BBHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ';
const isVoice = (c: TelegramCall): boolean => c.method.toLowerCase() === 'sendvoice';

async function accepted(t: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  const res = await t.send(key, body);
  assert.equal(res.statusCode, 202, res.body);
  return res.json().id;
}

async function senders(t: TestApp, key: string, query = ''): Promise<any> {
  const res = await t.request({ method: 'GET', url: `${API}/senders${query}`, key });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

const telegramNote = (t: TestApp, recipient: string, token = TELEGRAM_TOKEN) => ({ ...defaultSendBody('telegram', t.voiceUrl), recipient, session: { bot_token: token } });

/** The statuses sender.updated reported, in the order they happened (deliveries may arrive out of order: an endpoint takes two at once). */
function statusesInOrder(hooks: Array<{ body: string }>): string[] {
  return hooks
    .map((hook) => JSON.parse(hook.body))
    .sort((a, b) => Date.parse(a.timestamp) - Date.parse(b.timestamp))
    .map((event) => event.data.status);
}

/** A sender's health as GET /senders shows it: status, reason, and whether it has an until. */
const pick = (sender: { status: string; reason: string | null; until: string | null }) => [sender.status, sender.reason, sender.until !== null];

describe(`senders (${STORAGE_LABEL})`, () => {
  it('GET /senders lists the senders used, with exactly the documented fields; paged; scoped to the account and environment', async () => {
    const fake = await startTelegramApi();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    try {
      const account = await t.createAccount();
      const other = await t.createAccount();
      assert.deepEqual(await senders(t, account.liveKey), { data: [], has_more: false });
      const first = await accepted(t, account.liveKey, telegramNote(t, '310000001'));
      assert.equal((await t.waitForStatus(account.liveKey, first, ['delivered', 'failed'])).status, 'delivered');
      const second = await accepted(t, account.liveKey, telegramNote(t, '310000002'));
      assert.equal((await t.waitForStatus(account.liveKey, second, ['delivered', 'failed'])).status, 'delivered');
      const third = await accepted(t, account.liveKey, telegramNote(t, '310000003', OTHER_TOKEN));
      assert.equal((await t.waitForStatus(account.liveKey, third, ['delivered', 'failed'])).status, 'delivered');

      const list = await senders(t, account.liveKey);
      assert.equal(list.has_more, false);
      assert.equal(list.data.length, 2, JSON.stringify(list));
      const [newer, older] = list.data;
      assert.deepEqual(Object.keys(older).sort(), ['daily_cap', 'id', 'kind', 'label', 'last_sent_at', 'new_chat_cap', 'platform', 'proxy', 'reason', 'recipient_checks', 'sent_today', 'status', 'until'].sort());
      assert.match(older.id, /^snd_[0-9A-Za-z]{24}$/);
      assert.deepEqual(
        { platform: older.platform, kind: older.kind, status: older.status, reason: older.reason, until: older.until, sent_today: older.sent_today, daily_cap: older.daily_cap, new_chat_cap: older.new_chat_cap, recipient_checks: older.recipient_checks },
        { platform: 'telegram', kind: 'telegram_bot', status: 'ok', reason: null, until: null, sent_today: 2, daily_cap: null, new_chat_cap: null, recipient_checks: { today: 0, daily_budget: 50 } },
      );
      assert.ok(Date.parse(older.last_sent_at) > Date.now() - 60_000, older.last_sent_at);
      assert.equal(newer.sent_today, 1);
      // The bot's @username, as Telegram named the sender of the note it took; never the token.
      assert.equal(older.label, '@voicenote_test_bot');
      assert.ok(!JSON.stringify(list).includes(TELEGRAM_TOKEN.split(':')[1]!), 'no credential in the answer');

      const one = await t.request({ method: 'GET', url: `${API}/senders/${older.id}`, key: account.liveKey });
      assert.equal(one.statusCode, 200, one.body);
      assert.deepEqual(one.json(), older);

      const page = await senders(t, account.liveKey, '?limit=1');
      assert.deepEqual([page.data.map((s: any) => s.id), page.has_more], [[newer.id], true]);
      const next = await senders(t, account.liveKey, `?limit=1&starting_after=${newer.id}`);
      assert.deepEqual([next.data.map((s: any) => s.id), next.has_more], [[older.id], false]);
      const back = await senders(t, account.liveKey, `?limit=1&ending_before=${older.id}`);
      assert.deepEqual(back.data.map((s: any) => s.id), [newer.id]);
      assert.equal(assertErrorEnvelope(await t.request({ method: 'GET', url: `${API}/senders?starting_after=msg_1`, key: account.liveKey }), 422, 'invalid_parameter').details.field, 'starting_after');
      assert.equal(assertErrorEnvelope(await t.request({ method: 'GET', url: `${API}/senders?limit=0`, key: account.liveKey }), 422, 'invalid_parameter').details.field, 'limit');

      // Another environment of the same account, another account: not there.
      assert.deepEqual((await senders(t, account.testKey)).data, []);
      assertErrorEnvelope(await t.request({ method: 'GET', url: `${API}/senders/${older.id}`, key: account.testKey }), 404, 'not_found');
      assertErrorEnvelope(await t.request({ method: 'GET', url: `${API}/senders/${older.id}`, key: other.liveKey }), 404, 'not_found');
      // The read bucket: its rate-limit headers are the read ones.
      const limited = await t.request({ method: 'GET', url: `${API}/senders`, key: account.liveKey });
      const sent = await t.request({ method: 'GET', url: `${API}/usage`, key: account.liveKey });
      assert.equal(limited.headers['x-ratelimit-limit'], sent.headers['x-ratelimit-limit']);
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it("a sender's last send only moves forward: notes settled out of their order (outcome batches commit in another order) do not set it back", async () => {
    const t = await startTestApp({ worker: false });
    try {
      const account = await t.createAccount();
      const ref = { accountId: account.accountId, env: 'test', platform: 'telegram', senderKey: 'telegram:bot:out-of-order' };
      const db = t.app.services.db.kysely;
      const latest = Date.now() - 1_000;
      // The later note's outcome commits first; the earlier one's after it.
      await touchSender(db, ref, 'telegram_bot', { delivered: true, at: latest });
      await touchSender(db, ref, 'telegram_bot', { delivered: true, at: latest - 13 });
      const [sender] = (await senders(t, account.testKey)).data;
      assert.equal(Date.parse(sender.last_sent_at), latest);
      assert.equal(sender.sent_today, 2);
    } finally {
      await t.close();
    }
  });

  it('a revoked bot token: the sender is expired (sender.updated), its later notes fail invalid_session without reaching Telegram; a new token is a new sender', async () => {
    const fake = await startTelegramApi();
    const receiver = await startWebhookReceiver();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, webhooks: { pollMs: 100 } });
    try {
      const account = await t.createAccount();
      const hook = await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key: account.liveKey, body: { url: receiver.url(), events: ['sender.updated'] } });
      assert.equal(hook.statusCode, 201, hook.body);
      fake.failForToken(TELEGRAM_TOKEN, { kind: 'unauthorized' });
      const first = await accepted(t, account.liveKey, telegramNote(t, '320000001'));
      const failed = await t.waitForStatus(account.liveKey, first, ['delivered', 'failed']);
      assert.equal(failed.error.code, 'invalid_session');

      const [event] = await receiver.waitFor(1, 'sender.updated');
      const body = JSON.parse(event!.body);
      assert.equal(body.type, 'sender.updated');
      assert.equal(body.data.status, 'expired');
      assert.equal(body.data.kind, 'telegram_bot');
      assert.match(body.data.reason, /revoked/);
      const [listed] = (await senders(t, account.liveKey)).data;
      assert.deepEqual({ ...listed, last_sent_at: null }, { ...body.data, last_sent_at: null });

      const callsBefore = fake.calls.filter(isVoice).length;
      const later = await accepted(t, account.liveKey, telegramNote(t, '320000002'));
      const laterStatus = await t.waitForStatus(account.liveKey, later, ['delivered', 'failed']);
      assert.equal(laterStatus.error.code, 'invalid_session');
      assert.match(laterStatus.error.message, /revoked/);
      assert.equal(fake.calls.filter(isVoice).length, callsBefore, 'Telegram was not asked again');

      const fresh = await accepted(t, account.liveKey, telegramNote(t, '320000003', OTHER_TOKEN));
      assert.equal((await t.waitForStatus(account.liveKey, fresh, ['delivered', 'failed'])).status, 'delivered');
      const statuses = (await senders(t, account.liveKey)).data.map((s: any) => s.status);
      assert.deepEqual(statuses, ['ok', 'expired']);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(receiver.received.length, 1, 'one event: the status changed once');
    } finally {
      await t.close();
      await fake.close();
      await receiver.close();
    }
  });

  it("a flood wait: the bot rests until retry_after ends (waiting_for sender_rest on its other notes), then sends them; sender.updated at the start and the end", async () => {
    const fake = await startTelegramApi();
    const receiver = await startWebhookReceiver();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, webhooks: { pollMs: 100 } });
    try {
      const account = await t.createAccount();
      await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key: account.liveKey, body: { url: receiver.url(), events: ['sender.updated'] } });
      fake.failForChat('330000001', { kind: 'rate_limited', retryAfter: 3 }, 1);
      const first = await accepted(t, account.liveKey, telegramNote(t, '330000001'));
      await eventually(async () => (await senders(t, account.liveKey)).data[0]?.status === 'resting', 'the sender to rest');
      const [resting] = (await senders(t, account.liveKey)).data;
      const until = Date.parse(resting.until);
      assert.ok(until > Date.now() && until < Date.now() + 4_000, resting.until);
      assert.match(resting.reason, /too fast/);

      const second = await accepted(t, account.liveKey, telegramNote(t, '330000002'));
      await eventually(async () => {
        const detail = (await t.request({ method: 'GET', url: `${API}/messages/${second}`, key: account.liveKey })).json();
        return detail.waiting_for === 'sender_rest' && detail.status === 'queued';
      }, 'the other note to wait for the rest');
      for (const id of [first, second]) assert.equal((await t.waitForStatus(account.liveKey, id, ['delivered', 'failed'], 20_000)).status, 'delivered');
      const voice = fake.callsForChat('330000002').filter(isVoice);
      assert.equal(voice.length, 1);
      assert.ok(voice[0]!.receivedAt >= until - 50, 'not sent before the rest ended');

      const events = (await receiver.waitFor(2, 'sender.updated')).map((e) => JSON.parse(e.body).data);
      assert.deepEqual(
        events.map((d) => [d.status, d.until === null]),
        [
          ['resting', false],
          ['ok', true],
        ],
      );
      assert.equal((await senders(t, account.liveKey)).data[0].status, 'ok');
    } finally {
      await t.close();
      await fake.close();
      await receiver.close();
    }
  });

  it('two processes on one storage: a sender expired by one is seen by the other, whose notes for it fail without reaching the platform', async () => {
    const fake = await startTelegramApi();
    try {
      await withRestartableStorage(async (reuse) => {
        const env = { TELEGRAM_API_ROOT: fake.apiRoot };
        const worker = await startTestApp({ env, reuse });
        const front = await startTestApp({ env, reuse, worker: false });
        try {
          const account = await worker.createAccount();
          fake.failForToken(TELEGRAM_TOKEN, { kind: 'unauthorized' }, 1);
          const first = await accepted(front, account.liveKey, telegramNote(front, '340000001'));
          assert.equal((await front.waitForStatus(account.liveKey, first, ['delivered', 'failed'])).error?.code, 'invalid_session');
          await eventually(async () => (await senders(front, account.liveKey)).data[0]?.status === 'expired', 'the other process to see it expired');
          const calls = fake.calls.filter(isVoice).length;
          // Telegram would take it now (the failure answered once): the stored status alone stops it.
          const later = await accepted(front, account.liveKey, telegramNote(front, '340000002'));
          assert.equal((await front.waitForStatus(account.liveKey, later, ['delivered', 'failed'])).error?.code, 'invalid_session');
          assert.equal(fake.calls.filter(isVoice).length, calls);
        } finally {
          await front.close();
          await worker.close();
        }
      });
    } finally {
      await fake.close();
    }
  });

  it('a rest or a lock whose until has passed shows ok, with no reason and no until, though no worker has written its end', async () => {
    const fake = await startTelegramApi();
    try {
      await withRestartableStorage(async (reuse) => {
        const env = { TELEGRAM_API_ROOT: fake.apiRoot };
        const worker = await startTestApp({ env, reuse });
        const front = await startTestApp({ env, reuse, worker: false });
        let workerRuns = true;
        try {
          const account = await worker.createAccount();
          const first = await accepted(front, account.liveKey, telegramNote(front, '345000001'));
          assert.equal((await front.waitForStatus(account.liveKey, first, ['delivered', 'failed'])).status, 'delivered');
          await worker.close();
          workerRuns = false;
          // No worker left to notice the end: only the view can say the sender is ok again.
          const [sender] = (await senders(front, account.liveKey)).data;
          const setHealth = (status: string, until: number) =>
            front.app.services.db.kysely.updateTable('sender_records').set({ status, until, reason: `${status} for a test` }).where('id', '=', sender.id).execute();
          await setHealth('resting', Date.now() + 60_000);
          assert.deepEqual(pick((await senders(front, account.liveKey)).data[0]), ['resting', 'resting for a test', true], 'a rest still running shows');
          for (const status of ['resting', 'restricted']) {
            await setHealth(status, Date.now() - 1_000);
            assert.deepEqual(pick((await senders(front, account.liveKey)).data[0]), ['ok', null, false], `a ${status} state that ended`);
            const one = await front.request({ method: 'GET', url: `${API}/senders/${sender.id}`, key: account.liveKey });
            assert.deepEqual(pick(one.json()), ['ok', null, false], `GET /senders/{id}: a ${status} state that ended`);
          }
        } finally {
          await front.close();
          if (workerRuns) await worker.close();
        }
      });
    } finally {
      await fake.close();
    }
  });

  it('WhatsApp: the session id and phone number as label; logged out from the phone, the sender is expired (sender.updated)', async () => {
    const world = new FakeWhatsapp();
    const receiver = await startWebhookReceiver();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('a'), whatsappLive: FAST_WHATSAPP, webhooks: { pollMs: 100 } });
    try {
      const account = await t.createAccount();
      await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key: account.liveKey, body: { url: receiver.url(), events: ['sender.updated'] } });
      const sessionId = await linkedSession(t, world, account.liveKey);
      const first = await accepted(t, account.liveKey, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient: '14155550100' });
      assert.equal((await t.waitForStatus(account.liveKey, first, ['delivered', 'failed'])).status, 'delivered');
      const [sender] = (await senders(t, account.liveKey)).data;
      assert.deepEqual(
        { kind: sender.kind, label: sender.label, status: sender.status, sent_today: sender.sent_today },
        { kind: 'whatsapp_session', label: `${sessionId} +14155550123`, status: 'ok', sent_today: 1 },
      );

      world.current(sessionId)!.closeWith(401, 'Stream Errored (conflict)');
      const [event] = await receiver.waitFor(1, 'sender.updated');
      const data = JSON.parse(event!.body).data;
      assert.deepEqual([data.id, data.status, data.reason], [sender.id, 'expired', 'the device was logged out from the phone']);
      const [after] = (await senders(t, account.liveKey)).data;
      assert.equal(after.status, 'expired');
    } finally {
      await t.close();
      await receiver.close();
    }
  });

  it("WhatsApp's reachout lock (463): the refused note fails, the sender is restricted until the lock ends, other notes to new numbers wait (sender_restricted) while existing chats go on; sender.updated at its start and end, also when Baileys announces it", async () => {
    const world = new FakeWhatsapp();
    const receiver = await startWebhookReceiver();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('a'), whatsappLive: FAST_WHATSAPP, webhooks: { pollMs: 100 } });
    try {
      const account = await t.createAccount();
      const key = account.liveKey;
      await t.request({ method: 'POST', url: `${API}/webhook_endpoints`, key, body: { url: receiver.url(), events: ['sender.updated'] } });
      const sessionId = await linkedSession(t, world, key);
      const note = (recipient: string) => accepted(t, key, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient });
      const known = '14155550100';
      assert.equal((await t.waitForStatus(key, await note(known), ['delivered', 'failed'])).status, 'delivered');

      const until = new Date(Date.now() + 6_000);
      world.reachoutLock = { until };
      const refused = await note('14155550201');
      const [started] = await receiver.waitFor(1, 'sender.updated');
      const restricted = JSON.parse(started!.body).data;
      assert.deepEqual([restricted.status, restricted.until], ['restricted', until.toISOString()]);
      assert.match(restricted.reason, /new chats/);
      const detail = async (id: string) => (await t.request({ method: 'GET', url: `${API}/messages/${id}`, key })).json();
      // WhatsApp took it and refused it in its acknowledgement: failed, and never sent again by itself.
      assert.equal((await t.waitForStatus(key, refused, ['failed'])).error.code, 'platform_refused');

      // Another new number waits without being tried; an existing chat goes on.
      const other = await note('14155550202');
      await eventually(async () => (await detail(other)).waiting_for === 'sender_restricted', 'the other new note to wait');
      assert.equal((await t.waitForStatus(key, await note(known), ['delivered', 'failed'])).status, 'delivered');
      assert.ok(Date.now() < until.getTime(), 'the existing chat was written to during the lock');
      assert.deepEqual(world.refusedNewChats, ['14155550201@s.whatsapp.net'], 'WhatsApp refused one note; the other never went');

      assert.equal((await t.waitForStatus(key, other, ['delivered', 'failed'], 20_000)).status, 'delivered');
      assert.ok(world.sent.some((s) => s.jid === '14155550202@s.whatsapp.net'), 'sent once the lock ended');
      assert.equal((await detail(refused)).status, 'failed');
      assert.deepEqual(world.refusals.map((r) => r.jid), ['14155550201@s.whatsapp.net'], 'the refused note was not sent again');
      const events = statusesInOrder(await receiver.waitFor(2, 'sender.updated'));
      assert.deepEqual(events, ['restricted', 'ok']);

      // Baileys announces a lock (and its end) in connection.update: the sender follows without a send.
      world.reachoutLock = { until: new Date(Date.now() + 60_000) };
      world.announceReachoutLock(sessionId);
      await eventually(async () => (await senders(t, key)).data[0].status === 'restricted', 'restricted by the announcement');
      world.reachoutLock = undefined;
      world.announceReachoutLock(sessionId);
      await eventually(async () => (await senders(t, key)).data[0].status === 'ok', 'lifted by the announcement');
      assert.deepEqual(statusesInOrder(await receiver.waitFor(4, 'sender.updated')), ['restricted', 'ok', 'restricted', 'ok']);

      // A lock that simply runs out, with no note waiting and no announcement: its end is written all the same.
      world.reachoutLock = { until: new Date(Date.now() + 1_500) };
      world.announceReachoutLock(sessionId);
      const all = (await receiver.waitFor(6, 'sender.updated', 20_000)).map((e) => JSON.parse(e.body).data);
      assert.deepEqual(all.slice(4).map((d) => [d.status, d.until === null]), [['restricted', false], ['ok', true]]);
    } finally {
      await t.close();
      await receiver.close();
    }
  });

  it('the dashboard Senders page lists them with status, why, until and today against the cap; each row follows its sender (a sandbox session disconnected shows at once)', async () => {
    const t = await startTestApp();
    try {
      const account = await createDashboardAccount(t);
      const sessionId = await connectedSandboxSession(t, account.testKey);
      const id = await accepted(t, account.testKey, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient: '14155550100' });
      assert.equal((await t.waitForStatus(account.testKey, id, ['delivered', 'failed'])).status, 'delivered');
      const [sender] = (await senders(t, account.testKey)).data;
      assert.equal(sender.label, `${sessionId} +15550000000`);

      const client = new FormClient(t, '10.28.0.1');
      assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
      const pageRes = await client.get('/dashboard/senders');
      assert.equal(pageRes.statusCode, 200);
      assert.match(pageRes.body, /<a href="\/dashboard\/senders" aria-current="page">Senders<\/a>/);
      const row = pageRes.body.slice(pageRes.body.indexOf(`data-sender-id="${sender.id}"`), pageRes.body.indexOf('</tr>', pageRes.body.indexOf(`data-sender-id="${sender.id}"`)));
      assert.match(row, /data-status="ok"/);
      assert.match(row, new RegExp(`${sessionId} \\+15550000000`));
      assert.match(row, /<td data-field="today">1<\/td>/, 'sandbox senders count against no cap');

      const simulate = await t.request({ method: 'POST', url: `${API}/whatsapp/sessions/${sessionId}/simulate`, key: account.testKey, body: { event: 'disconnect' } });
      assert.equal(simulate.statusCode, 200, simulate.body);
      const polled = await client.get(`/dashboard/senders/${sender.id}/status`);
      assert.equal(polled.statusCode, 200, polled.body);
      const live = JSON.parse(polled.body);
      assert.deepEqual([live.status, live.status_text, live.reason, live.today_text], ['disconnected', 'disconnected', 'the WhatsApp session is disconnected', '1']);
      assert.equal((await client.get('/dashboard/senders/snd_nope/status')).statusCode, 404);
    } finally {
      await t.close();
    }
  });

  it('voicenote senders list [--json]: the same senders through the HTTP API', async () => {
    const t = await startTestApp();
    try {
      const url = `${await t.listen()}/api/v1`;
      const account = await t.createAccount();
      const id = await accepted(t, account.testKey, telegramNote(t, '123450001'));
      assert.equal((await t.waitForStatus(account.testKey, id, ['delivered', 'failed'])).status, 'delivered');
      const expected = (await senders(t, account.testKey)).data;
      assert.equal(expected.length, 1);

      const asJson = await runCli(['senders', 'list', '--key', account.testKey, '--url', url, '--json'], {});
      assert.equal(asJson.code, 0, asJson.stderr);
      assert.deepEqual(JSON.parse(asJson.stdout), { data: expected });
      const plain = await runCli(['senders', 'list', '--url', url], { VOICENOTE_KEY: account.testKey });
      assert.equal(plain.code, 0, plain.stderr);
      assert.match(plain.stdout, new RegExp(`^${expected[0].id}\\s+telegram\\s+telegram_bot\\s+1 today\\s+ok$`, 'm'));
      const noKey = await runCli(['senders', 'list', '--url', url], {});
      assert.notEqual(noKey.code, 0);
      assert.match(noKey.stderr, /--key/);
    } finally {
      await t.close();
    }
  });

  it('the typed client: GET /senders, GET /senders/{id} and POST /recipients/check, typed from the OpenAPI document', async () => {
    const t = await startTestApp();
    try {
      const base = await t.listen();
      const account = await t.createAccount();
      const id = await accepted(t, account.testKey, telegramNote(t, '123450002'));
      assert.equal((await t.waitForStatus(account.testKey, id, ['delivered', 'failed'])).status, 'delivered');
      const client = createVoicenoteClient({ baseUrl: base, apiKey: account.testKey });
      const list: SenderList | undefined = (await client.GET('/api/v1/senders', { params: { query: { limit: '10' } } })).data;
      assert.equal(list?.data.length, 1);
      const one: Sender | undefined = (await client.GET('/api/v1/senders/{sender_id}', { params: { path: { sender_id: list!.data[0]!.id } } })).data;
      assert.deepEqual(one, list!.data[0]);
      const checked: RecipientCheck | undefined = (
        await client.POST('/api/v1/recipients/check', { body: { platform: 'telegram', recipient: '123450007', session: { bot_token: TELEGRAM_TOKEN } } })
      ).data;
      assert.deepEqual([checked?.exists, checked?.platform], [false, 'telegram']);
    } finally {
      await t.close();
    }
  });

  it('a sender that expires fails its notes waiting in the queue at once, with the error that killed it, without trying the platform', async () => {
    const world = new FakeWhatsapp();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('a'), whatsappLive: FAST_WHATSAPP });
    try {
      const account = await t.createAccount();
      const key = account.liveKey;
      const sessionId = await linkedSession(t, world, key);
      // Locked out of new chats for a minute: a note to someone new waits for that minute.
      world.reachoutLock = { until: new Date(Date.now() + 60_000) };
      world.announceReachoutLock(sessionId);
      await eventually(async () => (await senders(t, key)).data[0]?.status === 'restricted', 'the lock on the sender');
      const waiting = await accepted(t, key, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient: '14155550301' });
      await eventually(async () => (await t.request({ method: 'GET', url: `${API}/messages/${waiting}`, key })).json().waiting_for === 'sender_restricted', 'the note to wait');

      const started = Date.now();
      world.current(sessionId)!.closeWith(401, 'Stream Errored (conflict)');
      const failed = await t.waitForStatus(key, waiting, ['delivered', 'failed'], 15_000);
      assert.deepEqual([failed.status, failed.error.code, failed.error.message], ['failed', 'session_expired', 'the device was logged out from the phone']);
      assert.ok(Date.now() - started < 15_000, 'not at the end of the lock');
      assert.equal(world.sent.length, 0, 'nothing was sent');
      assert.deepEqual(world.refusedNewChats, [], 'WhatsApp was not asked');
    } finally {
      await t.close();
    }
  });
});
