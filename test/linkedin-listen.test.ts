import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { saveRhythm } from '../src/store/rhythm.js';
import { assertErrorEnvelope, closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';
import { startLinkedinVoyagerFake, type LinkedinVoyagerFake, type VoyagerAccount } from './fakes/linkedin-voyager.js';
import { startWebhookReceiver } from './fakes/webhook-receiver.js';
import { createDashboardAccount, FormClient } from './fixtures/dashboard-harness.js';
import { eventually } from './fixtures/eventually.js';
import { JANE, newLinkedinSession, USER_AGENT } from './fixtures/linkedin-account.js';

/**
 * LinkedIn senders listened to (`listen: true`): each conversation a note went into is read with the
 * web app's messages query at growing intervals after the note (tuned short here), a message from the
 * recipient recorded once as a reply, a 999 pausing the looks, a signed-out session and the end of the
 * 14-day window erasing the kept session.
 */

/** Looks 400 ms and 1.6 s after a note, then one a minute (never within a test). */
const LISTEN = { scanMs: 100, intervalsMs: [400, 1_600], dailyMs: 60_000 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The looks' clock: real time, plus what a test moved it ahead by, so a look due later is due at once
 * instead of after a sleep. It counts its reads: every scan reads it three times or more (a look a few
 * more), so a test knows the listener has scanned several times since it moved the clock.
 */
class LookClock {
  ahead = 0;
  reads = 0;
  readonly now = (): number => {
    this.reads += 1;
    return Date.now() + this.ahead;
  };

  /** Moves the clock ahead, then waits until the listener has read it 30 times more (several scans). */
  async moveAhead(ms: number): Promise<void> {
    this.ahead += ms;
    const reads = this.reads;
    await eventually(() => this.reads >= reads + 30, 'several scans after the clock moved', 10_000);
  }
}

after(async () => {
  await closeSharedAudio();
});


async function start(): Promise<{ fake: LinkedinVoyagerFake; t: TestApp; clock: LookClock }> {
  const fake = await startLinkedinVoyagerFake({ profiles: [JANE] });
  const clock = new LookClock();
  const t = await startTestApp({ env: { LINKEDIN_API_ROOT: fake.apiRoot }, linkedinPace: { minMs: 0, maxMs: 0 }, platformTuning: { linkedinListen: { ...LISTEN, now: clock.now } } });
  return { fake, t, clock };
}

async function sendListened(t: TestApp, key: string, session: VoyagerAccount): Promise<string> {
  const body = {
    ...defaultSendBody('linkedin', t.mp3Url),
    recipient: JANE.publicId,
    session: { li_at: session.liAt, csrf_token: session.csrfToken, user_agent: USER_AGENT, cookies: `bcookie="v=2&abc"; lang=v=2&lang=en-us` },
    listen: true,
  };
  const res = await t.send(key, body);
  assert.equal(res.statusCode, 202, res.body);
  const id = res.json().id as string;
  assert.equal((await t.waitForStatus(key, id, ['delivered', 'failed'])).status, 'delivered');
  return id;
}

const listenerRows = (t: TestApp) => t.app.services.db.kysely.selectFrom('linkedin_listeners').selectAll().execute();
const conversationRows = (t: TestApp) => t.app.services.db.kysely.selectFrom('linkedin_listened_conversations').selectAll().execute();

describe(`LinkedIn senders listened to (${STORAGE_LABEL})`, () => {
  it('reads the conversation at growing intervals after the note and records the recipient\'s message once', async () => {
    const { fake, t, clock } = await start();
    const receiver = await startWebhookReceiver();
    try {
      const a = await createDashboardAccount(t);
      const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: a.liveKey, body: { url: receiver.url(), events: ['voice_note.replied'] } });
      assert.equal(hook.statusCode, 201, hook.body);
      const session = newLinkedinSession(fake);
      const note = await sendListened(t, a.liveKey, session);
      const [kept] = await listenerRows(t);
      assert.ok(kept && !kept.jar.includes(session.liAt) && !kept.jar.includes('bcookie'), 'the kept session is sealed');
      const conversation = fake.conversationWith(session.liAt, JANE.urn);
      assert.ok(conversation, 'the note went into a conversation');
      const sentAt = fake.callsOf('createMessage', session.liAt)[0]!.at;

      // Before the note, and our own messages: no reply. The recipient's message after it: the reply.
      fake.pushMessage(conversation, { from: JANE.urn, text: 'an old message', deliveredAt: Date.now() - 60_000 });
      fake.pushMessage(conversation, { from: session.profileUrn, text: 'our own follow-up' });
      const replyUrn = fake.pushMessage(conversation, { from: JANE.urn, text: 'Thanks, will listen tonight' });
      const [event] = await receiver.waitFor(1, 'voice_note.replied');
      const payload = JSON.parse(event!.body);
      assert.equal(payload.data.id, note);
      assert.equal(payload.data.reply.type, 'text');
      assert.equal(payload.data.reply.text, 'Thanks, will listen tonight');
      const shown = (await t.request({ method: 'GET', url: `/api/v1/messages/${note}`, key: a.liveKey })).json();
      assert.deepEqual(shown.replies.map((r: any) => [r.type, r.text]), [['text', 'Thanks, will listen tonight']]);
      assert.equal(shown.listening.status, 'listening');
      assert.ok(Date.parse(shown.listening.until) > Date.now() + 13 * 86_400_000);

      // The second look (1.6 s after the note) reads the same message again: still one reply, one event.
      fake.pushMessage(conversation, { from: JANE.urn, content: 'audio' });
      await eventually(() => fake.callsOf('messages', session.liAt).length >= 2, 'second look', 5_000);
      await sleep(300);
      const looks = fake.callsOf('messages', session.liAt);
      assert.ok(looks[0]!.at - sentAt >= 400, `first look ${looks[0]!.at - sentAt} ms after the note`);
      assert.ok(looks[1]!.at - sentAt >= 1_600, `second look ${looks[1]!.at - sentAt} ms after the note`);
      // Recorded once the look's answer is read: on a busy machine, later than the look itself.
      const replies = await eventually(async () => {
        const shownNow = (await t.request({ method: 'GET', url: `/api/v1/messages/${note}`, key: a.liveKey })).json().replies;
        return shownNow.length >= 2 ? shownNow : undefined;
      }, 'the second reply', 5_000);
      assert.deepEqual(replies.map((r: any) => r.type), ['text', 'voice']);
      assert.equal((await t.app.services.db.kysely.selectFrom('message_replies').select('platform_reply_id').where('platform_reply_id', '=', replyUrn).execute()).length, 1);
      // The next look is a day away (a minute here): none in the 50 s after the second.
      await clock.moveAhead(50_000);
      assert.equal(fake.callsOf('messages', session.liAt).length, 2);
      assert.deepEqual(fake.violations, []);

      // The dashboard's message page says so.
      const client = new FormClient(t, '10.9.0.9');
      assert.equal((await client.signIn(a.email, a.password)).statusCode, 303);
      const page = await client.get(`/dashboard/messages/${note}?env=live`);
      assert.match(page.body, /data-listening="listening">This LinkedIn session's conversations are read for replies until/);

      // Deleting the listening erases the kept session.
      const stop = await t.request({ method: 'DELETE', url: `/api/v1/messages/${note}/listening`, key: a.liveKey });
      assert.deepEqual(stop.json(), { deleted: true });
      assert.equal((await listenerRows(t)).length, 0);
      assert.equal((await conversationRows(t)).length, 0);
      assertErrorEnvelope(await t.request({ method: 'DELETE', url: `/api/v1/messages/${note}/listening`, key: a.liveKey }), 404, 'not_found');
    } finally {
      await t.close();
      await receiver.close();
      await fake.close();
    }
  });

  it("counts each look under the sender's daily cap, as a note; when the day's places are taken the looks wait for the next day", async () => {
    const { fake, t, clock } = await start();
    try {
      const a = await t.createAccount();
      // Two places a day on LinkedIn for this account: the note takes one, the first look the other.
      await saveRhythm(t.app.services.db.kysely, a.accountId, 'linkedin', { dailyCap: 2, warmup: null });
      const session = newLinkedinSession(fake);
      await sendListened(t, a.liveKey, session);
      await eventually(() => fake.callsOf('messages', session.liAt).length >= 1, 'first look', 5_000);
      // The second look is due 1.6 s after the note: no place is left today, so it waits (no call).
      await clock.moveAhead(2_000);
      assert.equal(fake.callsOf('messages', session.liAt).length, 1, 'no look over the cap');
      // GET /senders counts notes, not looks.
      const senders = (await t.request({ method: 'GET', url: '/api/v1/senders', key: a.liveKey })).json();
      const sender = senders.data.find((s: any) => s.platform === 'linkedin');
      assert.deepEqual([sender.sent_today, sender.daily_cap], [1, 2]);
      const [row] = await listenerRows(t);
      assert.ok(Number(row!.next_check_at) >= Math.floor(Date.now() / 86_400_000 + 1) * 86_400_000, 'the next look is tomorrow (UTC)');
      assert.deepEqual(fake.violations, []);
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('pauses the looks while the li_at rests after a 999; a signed-out session and 14 days without a note erase the kept session', async () => {
    const { fake, t, clock } = await start();
    try {
      const a = await t.createAccount();
      // A sandbox key never reaches LinkedIn: listen is accepted and nothing is kept.
      assert.equal((await t.send(a.testKey, { ...defaultSendBody('linkedin', t.mp3Url), listen: true })).statusCode, 202);
      assert.equal((await listenerRows(t)).length, 0);
      const resting = newLinkedinSession(fake);
      await sendListened(t, a.liveKey, resting);
      fake.flagAutomated(resting.liAt);
      await eventually(() => fake.calls.some((c) => c.status === 999), 'a look refused as automated', 5_000);
      // The realtime stream's opening may meet the 999 at the same moment as the look (both in flight
      // before either rests the li_at, and on a busy machine one answered well after the other): one
      // refusal of each at most. A look while the li_at rests (the next was due 1.6 s after the note)
      // would be a second refused look: the clock moves past the second look's time.
      await clock.moveAhead(2_000);
      const refused = fake.calls.filter((c) => c.status === 999).map((c) => c.step);
      assert.equal(new Set(refused).size, refused.length, `no look while the li_at rests (refused: ${refused.join(', ')})`);
      assert.equal((await listenerRows(t)).length, 1, 'still listened to');

      const expired = newLinkedinSession(fake);
      const note = await sendListened(t, a.liveKey, expired);
      const key = (await t.app.services.db.kysely.selectFrom('messages').select('sender_key').where('id', '=', note).executeTakeFirstOrThrow()).sender_key;
      fake.expire(expired.liAt, 'login-redirect');
      await eventually(async () => (await listenerRows(t)).every((r) => r.sender_key !== key), 'kept session erased', 5_000);
      assert.equal((await listenerRows(t)).length, 1);
      assert.ok((await conversationRows(t)).every((r) => r.sender_key !== key));
      assert.equal((await t.request({ method: 'GET', url: `/api/v1/messages/${note}`, key: a.liveKey })).json().listening, null);

      // 14 days without a note: the window ends, the session is erased.
      await t.app.services.db.kysely.updateTable('linkedin_listeners').set({ listen_until: Date.now() - 1 }).execute();
      await eventually(async () => (await listenerRows(t)).length === 0 && (await conversationRows(t)).length === 0, 'window ended', 5_000);
    } finally {
      await t.close();
      await fake.close();
    }
  });
});
