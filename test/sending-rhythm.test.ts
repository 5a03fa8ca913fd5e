import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { allowanceOn, DAY_MS, indicatorMs, MAX_INDICATOR_MS, nextDayStart, parseWarmup, utcDay } from '../src/core/rhythm.js';
import { saveRhythm } from '../src/store/rhythm.js';
import {
  assertErrorEnvelope,
  closeSharedAudio,
  defaultSendBody,
  FAST_WHATSAPP,
  startTestApp,
  STORAGE_LABEL,
  TELEGRAM_TOKEN,
  withRestartableStorage,
  type TestApp,
} from './fixtures/app-harness.js';
import { linkedSession } from './fixtures/whatsapp-session.js';
import { startTelegramApi, type TelegramCall } from './fakes/telegram-api.js';
import { eventually } from './fixtures/eventually.js';
import { FakeWhatsapp } from './fakes/whatsapp-network.js';
import { createDashboardAccount, FormClient } from './fixtures/dashboard-harness.js';

after(async () => {
  await closeSharedAudio();
});

const API = '/api/v1';
// The fixture voice.ogg lasts 3 s: its indicator shows 2.4–3.6 s.
const NOTE_MS = 3_000;

const detail = async (t: TestApp, key: string, id: string): Promise<any> => {
  const res = await t.request({ method: 'GET', url: `${API}/messages/${id}`, key });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
};

async function accepted(t: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  const res = await t.send(key, body);
  assert.equal(res.statusCode, 202, res.body);
  return res.json().id;
}

const isAction = (c: TelegramCall): boolean => c.method.toLowerCase() === 'sendchataction';
const isVoice = (c: TelegramCall): boolean => c.method.toLowerCase() === 'sendvoice' && c.reply.status === 200;

describe('sending like a person: the rules', () => {
  it('a warm-up starts low and rises evenly to the cap; no cap means no limit', () => {
    const rhythm = { dailyCap: 15, warmup: { start: 5, days: 5 } };
    const day0 = utcDay(Date.UTC(2026, 10, 20, 13));
    assert.deepEqual(
      [0, 1, 2, 4, 5, 30].map((d) => allowanceOn(rhythm, day0, day0 + d * DAY_MS)),
      [5, 7, 9, 13, 15, 15],
    );
    assert.equal(allowanceOn({ dailyCap: 3, warmup: null }, day0, day0), 3);
    assert.equal(allowanceOn({ dailyCap: null, warmup: { start: 1, days: 3 } }, day0, day0), null);
  });

  it('a day is a UTC day; a capped note comes back in the first minutes of the next one', () => {
    const at = Date.UTC(2026, 10, 20, 23, 59, 59);
    assert.equal(utcDay(at), Date.UTC(2026, 10, 20));
    assert.equal(nextDayStart(at, () => 0), Date.UTC(2026, 10, 21));
    assert.ok(nextDayStart(at, () => 0.999) < Date.UTC(2026, 10, 21, 0, 10));
  });

  it('the indicator lasts about the note (±20 %), at most 30 s', () => {
    assert.equal(indicatorMs(10, () => 0), 8_000);
    assert.equal(indicatorMs(10, () => 1), 12_000);
    assert.equal(indicatorMs(120, () => 0.5), MAX_INDICATOR_MS);
    assert.deepEqual(parseWarmup('5:7'), { start: 5, days: 7 });
    assert.equal(parseWarmup('5'), undefined);
  });
});

describe(`recording_indicator on POST /send (${STORAGE_LABEL})`, () => {
  it('LinkedIn has no indicator: 422 invalid_parameter; a mistyped value is a 400; false and null are fine', async () => {
    const t = await startTestApp();
    try {
      const account = await t.createAccount();
      const linkedin = await t.send(account.testKey, { ...defaultSendBody('linkedin', t.voiceUrl), recording_indicator: true });
      assert.equal(assertErrorEnvelope(linkedin, 422, 'invalid_parameter').details.field, 'recording_indicator');
      const typo = await t.send(account.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recording_indicator: 'yes' });
      assert.equal(assertErrorEnvelope(typo, 400, 'invalid_request').details.field, 'recording_indicator');
      for (const value of [false, null]) {
        const res = await t.send(account.testKey, { ...defaultSendBody('linkedin', t.voiceUrl), recording_indicator: value });
        assert.equal(res.statusCode, 202, res.body);
      }
    } finally {
      await t.close();
    }
  });

  it('Telegram: record_voice repeated in the chat for about the note, then the note; the worker slot is free meanwhile', async () => {
    const fake = await startTelegramApi();
    // One slot: a note sent during the other's indicator is delivered during it.
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot, WORKER_CONCURRENCY: '1' }, platformTuning: { telegram: { chatActionEveryMs: 1_000 } } });
    try {
      const account = await t.createAccount();
      const withIndicator = await accepted(t, account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '310000001', recording_indicator: true });
      const [first] = await fake.waitForCalls(1, isAction);
      const other = await accepted(t, account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '310000002' });
      assert.equal((await t.waitForStatus(account.liveKey, other, ['delivered', 'failed'])).status, 'delivered');
      const [voice] = await fake.waitForCalls(1, (c) => isVoice(c) && c.chatId === '310000001');
      assert.equal((await t.waitForStatus(account.liveKey, withIndicator, ['delivered', 'failed'])).status, 'delivered');

      const actions = fake.calls.filter(isAction);
      assert.ok(actions.length >= 2, `record_voice repeated while the indicator shows: ${actions.length} calls`);
      for (const a of actions) {
        assert.equal(a.fields.action, 'record_voice');
        assert.equal(a.chatId, '310000001');
        assert.equal(a.token, TELEGRAM_TOKEN);
        assert.equal(a.reply.status, 200);
        assert.ok(a.at <= voice!.at, 'every chat action comes before the note');
      }
      for (let i = 1; i < actions.length; i++) assert.ok(actions[i]!.at - actions[i - 1]!.at >= 900, 'repeated about every interval, not in a burst');
      assert.ok(voice!.at - first!.at >= NOTE_MS * 0.8 - 50, `the note comes after about its own length of "recording…" (${voice!.at - first!.at} ms)`);
      const otherVoice = fake.calls.find((c) => isVoice(c) && c.chatId === '310000002')!;
      assert.ok(otherVoice.at < voice!.at, 'the other note went out during the indicator: no slot was held');

      const shown = await detail(t, account.liveKey, withIndicator);
      assert.ok(shown.recording_indicator.shown_at, JSON.stringify(shown.recording_indicator));
      assert.ok(shown.recording_indicator.seconds >= 2.4 && shown.recording_indicator.seconds <= 3.6, String(shown.recording_indicator.seconds));
      assert.equal(shown.waiting_for, null);
      assert.equal(shown.attempt_count, 1, 'the wait is not an attempt');
      assert.equal((await detail(t, account.liveKey, other)).recording_indicator, null);
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('the sandbox shows the indicator as live does: written on the message, and the note waits its length', async () => {
    const t = await startTestApp();
    try {
      const account = await createDashboardAccount(t);
      const id = await accepted(t, account.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recording_indicator: true });
      assert.equal((await t.waitForStatus(account.testKey, id, ['delivered', 'failed'])).status, 'delivered');
      const sent = await detail(t, account.testKey, id);
      assert.ok(sent.recording_indicator.shown_at, JSON.stringify(sent.recording_indicator));
      assert.ok(sent.recording_indicator.seconds >= 2.4 && sent.recording_indicator.seconds <= 3.6, String(sent.recording_indicator.seconds));
      const waited = Date.parse(sent.delivered_at) - Date.parse(sent.recording_indicator.shown_at);
      assert.ok(waited >= sent.recording_indicator.seconds * 1000 - 100, `the note went ${waited} ms after the indicator`);
      assert.equal(sent.attempt_count, 1, 'the wait is not an attempt');

      // A note that failed before its indicator could show: its page says so, not that it is still to come.
      t.audio.route('/page.html', { kind: 'bytes', body: '<!doctype html><title>Not audio</title>', contentType: 'text/html' });
      const lost = await accepted(t, account.testKey, { ...defaultSendBody('telegram', t.audio.url('/page.html')), recording_indicator: true });
      assert.equal((await t.waitForStatus(account.testKey, lost, ['delivered', 'failed'])).status, 'failed');
      const client = new FormClient(t);
      assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
      for (const [message, text] of [[id, /shown at/], [lost, /not shown: the note failed first/]] as const) {
        const page = (await client.get(`/dashboard/messages/${message}`)).body;
        const field = /data-field="recording_indicator">([\s\S]*?)<\/dd>/.exec(page)?.[1] ?? '';
        assert.match(field, text, message);
        assert.doesNotMatch(field, /not shown yet/, message);
      }
    } finally {
      await t.close();
    }
  });

  it("Telegram: record_voice calls and notes share their bot's flood limit: many chats at once, no 429, every note delivered", async () => {
    const fake = await startTelegramApi();
    // Telegram counts chat actions against the bot's ~30 calls a second. More lenient here (the service
    // paces ~28 a second) so that the fake judges pacing, not a busy machine's scheduling noise: with
    // test files running side by side, calls paced apart could leave together (33 refused 4 of 90 once).
    // Unpaced, the 60 notes and 30 actions of this test would go in about a second: far over either.
    fake.enforceFloodLimits({ perChatMs: 500, perBotPerSecond: 38 });
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    try {
      const account = await t.createAccount({ plan: 'growth' });
      // Notes with the indicator and notes without, each to its own chat, all at once: the indicators'
      // chat actions go out in the same seconds as the plain notes, through the same bot.
      const ids: string[] = [];
      for (let i = 0; i < 60; i++) {
        const indicator = i % 2 === 0;
        ids.push(await accepted(t, account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: String(350000000 + i), recording_indicator: indicator }));
      }
      for (const id of ids) assert.equal((await t.waitForStatus(account.liveKey, id, ['delivered', 'failed'], 60_000)).status, 'delivered');

      const refused = fake.calls.filter((c) => c.reply.status === 429).map((c) => `${c.method} ${c.chatId}`);
      assert.deepEqual(refused, [], 'Telegram never had to refuse a chat action or a note for flooding');
      assert.equal(fake.floodRefusals, 0);
      const actions = fake.calls.filter(isAction);
      assert.ok(actions.length > 0, 'the indicators were shown');
      for (const a of actions) assert.equal(a.reply.status, 200, a.reply.body);
      const voices = fake.calls.filter(isVoice);
      assert.equal(voices.length, ids.length, 'every note delivered once');
      assert.equal(new Set(voices.map((v) => v.chatId)).size, ids.length, 'each to its own chat');
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('a restart during the indicator neither shows it twice nor loses the note', async () => {
    const fake = await startTelegramApi();
    try {
      await withRestartableStorage(async (reuse) => {
        // No repetition within the note's time: every record_voice seen is a showing of the indicator.
        const options = { env: { TELEGRAM_API_ROOT: fake.apiRoot }, reuse, platformTuning: { telegram: { chatActionEveryMs: 60_000 } } };
        const first = await startTestApp(options);
        const account = await first.createAccount();
        const id = await accepted(first, account.liveKey, { ...defaultSendBody('telegram', first.voiceUrl), recording_indicator: true });
        await fake.waitForCalls(1, isAction);
        await eventually(async () => (await detail(first, account.liveKey, id)).waiting_for === 'recording_indicator', 'the wait to be written');
        await first.close();
        const second = await startTestApp(options);
        try {
          assert.equal((await second.waitForStatus(account.liveKey, id, ['delivered', 'failed'])).status, 'delivered');
          assert.equal(fake.calls.filter(isAction).length, 1, 'shown once');
          assert.equal(fake.calls.filter(isVoice).length, 1, 'delivered once');
        } finally {
          await second.close();
        }
      });
    } finally {
      await fake.close();
    }
  });

  it('WhatsApp: presence "recording" in the chat, then the note, then "paused"', async () => {
    const world = new FakeWhatsapp();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('a'), whatsappLive: FAST_WHATSAPP });
    try {
      const account = await t.createAccount();
      const sessionId = await linkedSession(t, world, account.liveKey);
      const id = await accepted(t, account.liveKey, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recording_indicator: true });
      assert.equal((await t.waitForStatus(account.liveKey, id, ['delivered', 'failed'])).status, 'delivered');
      await eventually(() => world.presences.length >= 2, 'the paused presence');
      assert.deepEqual(
        world.presences.map((p) => [p.type, p.jid, p.sentBefore]),
        [
          ['recording', '14155550100@s.whatsapp.net', 0],
          ['paused', '14155550100@s.whatsapp.net', 1],
        ],
      );
      assert.ok(world.sent.length === 1 && world.violations.length === 0, world.violations.join('; '));
      assert.ok((await detail(t, account.liveKey, id)).recording_indicator.shown_at);
    } finally {
      await t.close();
    }
  });
});

describe(`each sender's daily rhythm (${STORAGE_LABEL})`, () => {
  it('a cap of N: N notes delivered, the next waits for the next UTC day (not failed), shown as a cap\'s wait', async () => {
    const fake = await startTelegramApi();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    try {
      const account = await t.createAccount();
      await saveRhythm(t.app.services.db.kysely, account.accountId, 'telegram', { dailyCap: 2, warmup: null });
      const ids: string[] = [];
      for (const chat of ['320000001', '320000002', '320000003']) ids.push(await accepted(t, account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: chat }));
      // Delivered concurrently: whichever two take the day's places go, the third waits.
      const all = await eventually(async () => {
        const seen = await Promise.all(ids.map((id) => detail(t, account.liveKey, id)));
        return seen.filter((d) => d.status === 'delivered').length === 2 && seen.some((d) => d.waiting_for === 'daily_cap') ? seen : undefined;
      }, 'two delivered and one waiting for the cap');
      const waiting = all.find((d) => d.waiting_for === 'daily_cap');
      assert.equal(waiting.status, 'queued');
      assert.equal(waiting.error, null);
      const nextDay = utcDay(Date.now()) + DAY_MS;
      const due = Date.parse(waiting.next_attempt_at);
      assert.ok(due >= nextDay && due < nextDay + DAY_MS, `due the next UTC day: ${waiting.next_attempt_at}`);
      assert.equal(fake.calls.filter(isVoice).length, 2, 'the platform saw two notes');
      // Another bot of the same account is another sender: its own count.
      const otherBot = '987654321:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ';
      const other = await accepted(t, account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '320000004', session: { bot_token: otherBot } });
      assert.equal((await t.waitForStatus(account.liveKey, other, ['delivered', 'failed'])).status, 'delivered');
      assert.equal(waiting.attempt_count, 0, 'the wait is not an attempt');
      // Senders are named by a hash of their credential: no token, nor its secret half, in the database's counts.
      const db = t.app.services.db.kysely;
      const keys = [...(await db.selectFrom('senders').select('sender_key').execute()), ...(await db.selectFrom('sender_days').select('sender_key').execute())].map((r) => r.sender_key);
      assert.ok(keys.length >= 2, keys.join(', '));
      for (const key of keys) for (const secret of [TELEGRAM_TOKEN, TELEGRAM_TOKEN.split(':')[1]!, otherBot.split(':')[1]!]) assert.ok(!key.includes(secret), key);
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('a note that fails for good gives its place back: a cap of 2, one recipient_not_found, then two more delivered the same day', async () => {
    const fake = await startTelegramApi();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    try {
      const account = await t.createAccount();
      await saveRhythm(t.app.services.db.kysely, account.accountId, 'telegram', { dailyCap: 2, warmup: null });
      const note = (chat: string) => accepted(t, account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: chat });
      fake.failForChat('321000001', { kind: 'chat_not_found' });
      const lost = await t.waitForStatus(account.liveKey, await note('321000001'), ['delivered', 'failed']);
      assert.deepEqual([lost.status, lost.error?.code], ['failed', 'recipient_not_found']);
      for (const chat of ['321000002', '321000003']) {
        const id = await note(chat);
        const settled = await eventually(async () => {
          const d = await detail(t, account.liveKey, id);
          return d.status === 'delivered' || d.status === 'failed' || d.waiting_for === 'daily_cap' ? d : undefined;
        }, `the note to ${chat} to go or wait`);
        assert.deepEqual([settled.status, settled.waiting_for], ['delivered', null], `the note to ${chat} is one of the day's two`);
      }
      for (const chat of ['321000002', '321000003']) assert.equal(fake.callsForChat(chat).filter(isVoice).length, 1, `Telegram got the note to ${chat}`);
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('WhatsApp by default: a new session warms up (5 notes on its first day); with caps off every note goes', async () => {
    const world = new FakeWhatsapp();
    const t = await startTestApp({ whatsappSocketFactory: world.factory('a'), whatsappLive: FAST_WHATSAPP, builtInRhythm: true });
    try {
      const account = await t.createAccount();
      const sessionId = await linkedSession(t, world, account.liveKey);
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) ids.push(await accepted(t, account.liveKey, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient: `1415555020${i}` }));
      const delivered = await eventually(async () => {
        const all = await Promise.all(ids.map((id) => detail(t, account.liveKey, id)));
        const done = all.filter((d) => d.status === 'delivered').length;
        const waiting = all.filter((d) => d.waiting_for === 'daily_cap').length;
        return done === 5 && waiting === 1 ? all : undefined;
      }, 'five delivered and one waiting for the next day', 20_000);
      assert.equal(world.sent.length, 5);
      assert.ok(delivered.every((d) => d.status !== 'failed'));

      // Caps off for WhatsApp: the next notes go today.
      await saveRhythm(t.app.services.db.kysely, account.accountId, 'whatsapp', { dailyCap: null, warmup: null });
      const more = [];
      for (let i = 0; i < 2; i++) more.push(await accepted(t, account.liveKey, { ...defaultSendBody('whatsapp', t.voiceUrl, sessionId), recipient: `1415555030${i}` }));
      for (const id of more) assert.equal((await t.waitForStatus(account.liveKey, id, ['delivered', 'failed'])).status, 'delivered');
      assert.equal(world.sent.length, 7);
    } finally {
      await t.close();
    }
  });

  it('two processes on one database count one cap: of 8 notes sent through both, exactly 3 go', async () => {
    const fake = await startTelegramApi();
    try {
      await withRestartableStorage(async (reuse) => {
        const options = { env: { TELEGRAM_API_ROOT: fake.apiRoot }, reuse };
        const apps = [await startTestApp(options), await startTestApp(options)];
        try {
          const account = await apps[0]!.createAccount({ plan: 'growth' });
          await saveRhythm(apps[0]!.app.services.db.kysely, account.accountId, 'telegram', { dailyCap: 3, warmup: null });
          const ids: string[] = [];
          for (let i = 0; i < 8; i++) {
            const t = apps[i % 2]!;
            ids.push(await accepted(t, account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: `34000000${i}` }));
          }
          const seen = await eventually(async () => {
            const all = await Promise.all(ids.map((id) => detail(apps[0]!, account.liveKey, id)));
            const settled = all.filter((d) => d.status === 'delivered' || d.waiting_for === 'daily_cap');
            return settled.length === 8 ? all : undefined;
          }, 'every note delivered or waiting', 30_000);
          assert.equal(seen.filter((d) => d.status === 'delivered').length, 3);
          assert.equal(fake.calls.filter(isVoice).length, 3, 'the platform saw three notes');
        } finally {
          for (const t of apps) await t.close();
        }
      });
    } finally {
      await fake.close();
    }
  });

  it('the sandbox is not capped (no real notes are sent)', async () => {
    const t = await startTestApp();
    try {
      const account = await t.createAccount();
      await saveRhythm(t.app.services.db.kysely, account.accountId, 'telegram', { dailyCap: 1, warmup: null });
      const ids = [await accepted(t, account.testKey, defaultSendBody('telegram', t.voiceUrl)), await accepted(t, account.testKey, defaultSendBody('telegram', t.voiceUrl))];
      for (const id of ids) assert.equal((await t.waitForStatus(account.testKey, id, ['delivered', 'failed'])).status, 'delivered');
    } finally {
      await t.close();
    }
  });
});
