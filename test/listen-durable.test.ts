import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { sql } from 'kysely';
import { it } from './fixtures/timed.js';
import { dialectOf } from '../src/store/dialect.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, type TestApp } from './fixtures/app-harness.js';
import { captureLogs } from './fixtures/log-capture.js';
import { SANDBOX_REPLY_AFTER_MS } from '../src/inbound/sandbox-replies.js';
import { randomBytes } from 'node:crypto';
import { startLinkedinVoyagerFake } from './fakes/linkedin-voyager.js';
import { startTelegramApi, type TelegramFake } from './fakes/telegram-api.js';
import { eventually } from './fixtures/eventually.js';

/**
 * A reply that was heard is never lost: one carrying U+0000 (which PostgreSQL refuses in text) is
 * recorded without it, and one heard while the storage refuses to write it is recorded once the storage
 * takes writes again: a bot's update is asked for again (its offset not confirmed), a message pushed once
 * (the sandbox's answering recipients, as a socket's) is tried again in the process.
 */

const DAY = 86_400_000;
const inMs = (ms: number): string => new Date(Date.now() + ms).toISOString();

after(async () => {
  await closeSharedAudio();
});

/** The storage refuses every reply written, as a database that is down or full refuses a write, until `restore`. */
async function refuseReplies(t: TestApp): Promise<{ restore(): Promise<void> }> {
  const db = t.app.services.db.kysely;
  if (dialectOf(db) === 'sqlite') {
    await sql`create trigger refuse_replies before insert on message_replies begin select raise(abort, 'storage refuses writes'); end`.execute(db);
    return { restore: async () => void (await sql`drop trigger refuse_replies`.execute(db)) };
  }
  await sql`create function refuse_replies() returns trigger language plpgsql as $$ begin raise exception 'storage refuses writes'; end $$`.execute(db);
  await sql`create trigger refuse_replies before insert on message_replies for each row execute function refuse_replies()`.execute(db);
  return {
    restore: async () => {
      await sql`drop trigger refuse_replies on message_replies`.execute(db);
      await sql`drop function refuse_replies()`.execute(db);
    },
  };
}

const privateText = (chat: number, messageId: number, text: string) => ({
  message: { message_id: messageId, date: Math.floor(Date.now() / 1000) + 1, chat: { id: chat, type: 'private' }, from: { id: chat, is_bot: false, first_name: 'Jo' }, text },
});
const pollsWithOffset = (fake: TelegramFake, offset: number | undefined) =>
  fake.calls.filter((c) => c.method.toLowerCase() === 'getupdates' && (c.fields.offset === undefined ? undefined : Number(c.fields.offset)) === offset).length;

async function accepted(t: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  const res = await t.send(key, body);
  assert.equal(res.statusCode, 202, res.body);
  return res.json().id as string;
}

const detail = async (t: TestApp, key: string, id: string) => (await t.request({ method: 'GET', url: `/api/v1/messages/${id}`, key })).json();
const statusOf = async (t: TestApp, key: string, id: string) => (await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key })).json().status;

describe(`what is heard is recorded, whatever the storage says at first (${STORAGE_LABEL})`, () => {
  it('a reply carrying U+0000 is recorded without it and cancels its follow-up', async () => {
    const fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, platformTuning: { telegram: { listenScanMs: 100, listenPollSeconds: 1 } } });
    try {
      const a = await t.createAccount();
      const body = (extra: Record<string, unknown> = {}) => ({ ...defaultSendBody('telegram', t.voiceUrl), recipient: '558001', ...extra });
      const note = await accepted(t, a.liveKey, body({ listen: true }));
      await t.waitForStatus(a.liveKey, note, ['delivered']);
      const followUp = await accepted(t, a.liveKey, body({ send_at: inMs(DAY), cancel_on_reply: true }));
      fake.pushUpdate(TELEGRAM_TOKEN, privateText(558001, 41, 'see you\u0000 tomorrow'));
      const replies = await eventually(async () => {
        const found = (await detail(t, a.liveKey, note)).replies;
        return found.length > 0 ? found : undefined;
      }, 'the reply', 30_000);
      assert.deepEqual(replies.map((r: any) => r.text), ['see you tomorrow']);
      assert.equal(await statusOf(t, a.liveKey, followUp), 'canceled');
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it("a bot's reply heard while the storage refuses it is asked for again and recorded once it takes writes", async () => {
    const fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, platformTuning: { telegram: { listenScanMs: 100, listenPollSeconds: 1 } } });
    try {
      const a = await t.createAccount();
      const body = (extra: Record<string, unknown> = {}) => ({ ...defaultSendBody('telegram', t.voiceUrl), recipient: '558101', ...extra });
      const note = await accepted(t, a.liveKey, body({ listen: true }));
      await t.waitForStatus(a.liveKey, note, ['delivered']);
      const followUp = await accepted(t, a.liveKey, body({ send_at: inMs(DAY), cancel_on_reply: true }));
      const outage = await refuseReplies(t);
      const updateId = fake.pushUpdate(TELEGRAM_TOKEN, privateText(558101, 51, 'call me'));
      // Fetched, not recorded: the next polls ask from the same offset (the update is not confirmed).
      await eventually(() => fake.calls.some((c) => c.method.toLowerCase() === 'getupdates' && c.reply?.body?.includes('call me')), 'the update fetched', 30_000);
      const offsetBefore = (await t.app.services.db.kysely.selectFrom('telegram_listeners').select('update_offset').executeTakeFirstOrThrow()).update_offset;
      await eventually(() => pollsWithOffset(fake, offsetBefore === null ? undefined : Number(offsetBefore)) >= 2, 'polled again from the same offset', 30_000);
      assert.deepEqual((await detail(t, a.liveKey, note)).replies, []);
      assert.equal(await statusOf(t, a.liveKey, followUp), 'queued');

      await outage.restore();
      await eventually(async () => (await detail(t, a.liveKey, note)).replies.length === 1, 'recorded after the outage', 30_000);
      assert.equal(await statusOf(t, a.liveKey, followUp), 'canceled');
      await eventually(() => fake.calls.some((c) => c.method.toLowerCase() === 'getupdates' && Number(c.fields.offset) === updateId + 1), 'confirmed once recorded', 30_000);
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('a LinkedIn look that could not record is not counted: the conversation is read again and the reply recorded once the storage takes it', async () => {
    const JANE = { publicId: 'jane-smith-a1b2c3', urn: 'urn:li:fsd_profile:ACoAABjaneSmith01' };
    const fake = await startLinkedinVoyagerFake({ profiles: [JANE] });
    // One look 5 s after the note, the next ten minutes later: only a look made again can record it in time.
    const t = await startTestApp({ env: { LINKEDIN_API_ROOT: fake.apiRoot }, linkedinPace: { minMs: 0, maxMs: 0 }, platformTuning: { linkedinListen: { scanMs: 100, intervalsMs: [5_000, 600_000], dailyMs: 600_000 } } });
    try {
      const a = await t.createAccount();
      const liAt = `AQEDAQ${randomBytes(18).toString('base64url')}`;
      const csrfToken = `ajax:${BigInt(`0x${randomBytes(8).toString('hex')}`).toString()}`;
      fake.addAccount({ liAt, csrfToken, profileUrn: `urn:li:fsd_profile:ACoAAB${randomBytes(6).toString('hex')}`, cookies: { bcookie: '"v=2&abc"' } });
      const outage = await refuseReplies(t);
      const note = await accepted(t, a.liveKey, { ...defaultSendBody('linkedin', t.mp3Url), recipient: JANE.publicId, session: { li_at: liAt, csrf_token: csrfToken, cookies: 'bcookie="v=2&abc"' }, listen: true });
      assert.equal((await t.waitForStatus(a.liveKey, note, ['delivered', 'failed'])).status, 'delivered');
      assert.equal(fake.callsOf('messages', liAt).length, 0, 'written before the first look');
      fake.pushMessage(fake.conversationWith(liAt, JANE.urn)!, { from: JANE.urn, text: 'heard during the outage' });
      await eventually(() => fake.callsOf('messages', liAt).length >= 2, 'the conversation read again', 30_000);
      assert.deepEqual((await detail(t, a.liveKey, note)).replies, []);
      await outage.restore();
      const replies = await eventually(async () => {
        const found = (await detail(t, a.liveKey, note)).replies;
        return found.length > 0 ? found : undefined;
      }, 'recorded after the outage', 30_000);
      assert.deepEqual(replies.map((r: any) => r.text), ['heard during the outage']);
      assert.deepEqual(fake.violations, []);
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('a message pushed once (the sandbox recipient answering) while the storage refuses it is tried again and recorded', async () => {
    // The sandbox's clock: its recipient answers 4 s after the delivery by it, moved on below.
    let ahead = 0;
    const logs = captureLogs('warn');
    const t = await startTestApp({ now: () => Date.now() + ahead, logger: logs.logger });
    try {
      const a = await t.createAccount();
      const note = await accepted(t, a.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: '1000016' });
      const outage = await refuseReplies(t);
      await t.waitForStatus(a.testKey, note, ['delivered']);
      // The answer comes due while the storage still refuses it: it is tried, and refused.
      ahead = SANDBOX_REPLY_AFTER_MS;
      await eventually(() => logs.lines.some((line) => String(line.msg).startsWith('could not record what was heard')), 'the answer tried during the outage', 30_000);
      assert.deepEqual((await detail(t, a.testKey, note)).replies, []);
      await outage.restore();
      const replies = await eventually(async () => {
        const found = (await detail(t, a.testKey, note)).replies;
        return found.length > 0 ? found : undefined;
      }, 'recorded after the outage', 30_000);
      assert.deepEqual(replies.map((r: any) => r.text), ['Thanks, got it!']);
    } finally {
      await t.close();
    }
  });
});
