import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';
import { startLinkedinVoyagerFake, type LinkedinVoyagerFake, type VoyagerAccount } from './fakes/linkedin-voyager.js';
import { startWebhookReceiver, type WebhookReceiver } from './fakes/webhook-receiver.js';
import { eventually } from './fixtures/eventually.js';
import { JANE, newLinkedinSession, USER_AGENT } from './fixtures/linkedin-account.js';
import { ManualClock } from './fixtures/manual-clock.js';

/**
 * LinkedIn senders listened to through LinkedIn's realtime event stream: a reply pushed on the stream is
 * recorded at once (no look at the conversation is made for it) and cancels a `cancel_on_reply`
 * follow-up; a seen event of our note is its read receipt; a stream that broke is opened again after
 * its backoff (the test's clock says when) and what was said meanwhile is read by one look; a stream
 * refused with 401 expires the sender as a delivery's 401 does. The looks' intervals are an hour here:
 * none is due within a test.
 */

const HOUR = 3_600_000;
/** The first reconnect's wait after a failed opening (mautrix-linkedin realtime.go:184: attempts × 2 s). */
const FIRST_RECONNECT_WAIT_MS = 2_000;
const inMs = (ms: number): string => new Date(Date.now() + ms).toISOString();

after(async () => {
  await closeSharedAudio();
});

interface World {
  fake: LinkedinVoyagerFake;
  t: TestApp;
  clock: ManualClock;
  receiver: WebhookReceiver;
  key: string;
  session: VoyagerAccount;
}

async function start(): Promise<World> {
  const fake = await startLinkedinVoyagerFake({ profiles: [JANE] });
  const clock = new ManualClock();
  const t = await startTestApp({
    env: { LINKEDIN_API_ROOT: fake.apiRoot },
    linkedinPace: { minMs: 0, maxMs: 0 },
    platformTuning: { linkedinListen: { scanMs: 100, intervalsMs: [HOUR], dailyMs: 24 * HOUR, streamClock: clock } },
  });
  const receiver = await startWebhookReceiver();
  const a = await t.createAccount();
  const hook = await t.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: a.liveKey, body: { url: receiver.url() } });
  assert.equal(hook.statusCode, 201, hook.body);
  return { fake, t, clock, receiver, key: a.liveKey, session: newLinkedinSession(fake) };
}

async function stop(w: World): Promise<void> {
  await w.t.close();
  await w.receiver.close();
  await w.fake.close();
}

function sendBody(w: World, extra: Record<string, unknown> = {}) {
  return {
    ...defaultSendBody('linkedin', w.t.mp3Url),
    recipient: JANE.publicId,
    session: { li_at: w.session.liAt, csrf_token: w.session.csrfToken, user_agent: USER_AGENT, cookies: `bcookie="v=2&abc"; lang=v=2&lang=en-us` },
    ...extra,
  };
}

/** A listened note delivered, and the stream of its li_at open (LinkedIn took it: ClientConnection written). */
async function listenedNote(w: World): Promise<{ id: string; conversation: string }> {
  const res = await w.t.send(w.key, sendBody(w, { listen: true }));
  assert.equal(res.statusCode, 202, res.body);
  const id = res.json().id as string;
  assert.equal((await w.t.waitForStatus(w.key, id, ['delivered', 'failed'])).status, 'delivered');
  await eventually(() => w.fake.openStreams(w.session.liAt) === 1, 'the realtime stream open', 10_000);
  const conversation = w.fake.conversationWith(w.session.liAt, JANE.urn);
  assert.ok(conversation, 'the note went into a conversation');
  return { id, conversation };
}

const detail = async (w: World, id: string) => (await w.t.request({ method: 'GET', url: `/api/v1/messages/${id}`, key: w.key })).json();
const eventsOf = (w: World, type: string) => w.receiver.received.map((r) => JSON.parse(r.body)).filter((e) => e.type === type);

describe(`LinkedIn's realtime event stream (${STORAGE_LABEL})`, () => {
  it('records a reply pushed on the stream at once, without a look, and it cancels a cancel_on_reply follow-up', async () => {
    const w = await start();
    try {
      const note = await listenedNote(w);
      const followUp = await w.t.send(w.key, sendBody(w, { send_at: inMs(HOUR), cancel_on_reply: true }));
      assert.equal(followUp.statusCode, 202, followUp.body);
      const looksBefore = w.fake.callsOf('messages', w.session.liAt).length;

      // Our own message on the stream answers nothing; the recipient's does.
      w.fake.pushMessage(note.conversation, { from: w.session.profileUrn, text: 'our own line' });
      w.fake.pushMessage(note.conversation, { from: JANE.urn, text: 'Heard it, thanks!' });
      const [replied] = await w.receiver.waitFor(1, 'voice_note.replied');
      const event = JSON.parse(replied!.body);
      assert.equal(event.data.id, note.id);
      assert.deepEqual([event.data.reply.type, event.data.reply.text], ['text', 'Heard it, thanks!']);
      const canceled = await w.t.waitForStatus(w.key, followUp.json().id, ['canceled', 'delivered', 'failed']);
      assert.equal(canceled.status, 'canceled');
      assert.equal((await detail(w, followUp.json().id)).cancel_reason, 'replied');
      assert.deepEqual((await detail(w, note.id)).replies.map((r: any) => r.text), ['Heard it, thanks!']);

      // Recorded from the stream: no conversation was read for it.
      assert.equal(w.fake.callsOf('messages', w.session.liAt).length, looksBefore);
      assert.equal(w.fake.callsOf('realtime', w.session.liAt).length, 1);
      // The stream posts the web app's heartbeat naming its realtime session (the fake checks it).
      await eventually(() => w.fake.callsOf('heartbeat', w.session.liAt).some((c) => c.status === 200), 'a heartbeat', 5_000);
      assert.deepEqual(w.fake.violations, []);
    } finally {
      await stop(w);
    }
  });

  it("turns the recipient's seen event of the note into its read receipt, with voice_note.read", async () => {
    const w = await start();
    try {
      const note = await listenedNote(w);
      const noteUrn = w.fake.messages.at(-1)!.entityUrn;
      // Our own session seeing the note says nothing of the recipient.
      w.fake.seeMessage(note.conversation, noteUrn, w.session.profileUrn);
      const seenAt = Date.now();
      w.fake.seeMessage(note.conversation, noteUrn, JANE.urn, seenAt);
      const [read] = await w.receiver.waitFor(1, 'voice_note.read');
      const event = JSON.parse(read!.body);
      assert.equal(event.data.id, note.id);
      assert.equal(event.timestamp, new Date(seenAt).toISOString());
      const receipts = (await detail(w, note.id)).receipts;
      assert.deepEqual([receipts.supported, receipts.reason], [true, null]);
      assert.equal(receipts.read_at, new Date(seenAt).toISOString());
      assert.equal(receipts.played_at, null);
      assert.equal(eventsOf(w, 'voice_note.read').length, 1);
      assert.deepEqual(w.fake.violations, []);
    } finally {
      await stop(w);
    }
  });

  it('opens a broken stream again after its backoff, and a reply written while it was closed is read then', async () => {
    const w = await start();
    try {
      const note = await listenedNote(w);
      const looksBefore = w.fake.callsOf('messages', w.session.liAt).length;
      // The connection breaks and the first opening after it fails: the stream waits its backoff.
      w.fake.failNext('realtime', { status: 500 });
      w.fake.dropStreams(w.session.liAt);
      await eventually(() => w.clock.waiting(FIRST_RECONNECT_WAIT_MS) === 1, 'the reconnect backoff', 10_000);
      assert.equal(w.fake.openStreams(w.session.liAt), 0);

      // Written while no stream is open: nothing pushes it.
      w.fake.pushMessage(note.conversation, { from: JANE.urn, text: 'Written during the gap' });
      assert.equal(eventsOf(w, 'voice_note.replied').length, 0);

      assert.equal(w.clock.release(FIRST_RECONNECT_WAIT_MS), 1);
      await eventually(() => w.fake.openStreams(w.session.liAt) === 1, 'the stream open again', 30_000);
      const [replied] = await w.receiver.waitFor(1, 'voice_note.replied');
      assert.equal(JSON.parse(replied!.body).data.reply.text, 'Written during the gap');
      // Read by the look made when the stream opened again (three openings: first, failed, again).
      assert.ok(w.fake.callsOf('messages', w.session.liAt).length > looksBefore);
      assert.deepEqual(w.fake.callsOf('realtime', w.session.liAt).map((c) => c.status), [200, 500, 200]);
      assert.deepEqual((await detail(w, note.id)).replies.map((r: any) => r.text), ['Written during the gap']);
      assert.deepEqual(w.fake.violations, []);
    } finally {
      await stop(w);
    }
  });

  it("expires the sender when the stream is refused with 401, as a delivery's 401 does, and ends listening", async () => {
    const w = await start();
    try {
      const note = await listenedNote(w);
      w.fake.expire(w.session.liAt, 'unauthorized');
      w.fake.dropStreams(w.session.liAt);
      const [updated] = await w.receiver.waitFor(1, 'sender.updated');
      const sender = JSON.parse(updated!.body).data;
      assert.equal(sender.platform, 'linkedin');
      assert.equal(sender.status, 'expired');
      assert.match(sender.reason, /session is expired or invalid/);
      const listed = (await w.t.request({ method: 'GET', url: '/api/v1/senders', key: w.key })).json().data;
      assert.deepEqual(listed.map((s: any) => [s.platform, s.status]), [['linkedin', 'expired']]);
      await eventually(async () => (await detail(w, note.id)).listening === null, 'listening ended', 5_000);
      assert.deepEqual(w.fake.callsOf('realtime', w.session.liAt).map((c) => c.status), [200, 401]);
      // The next note of that session fails at once, without a call to LinkedIn.
      const calls = w.fake.calls.length;
      const next = await w.t.send(w.key, sendBody(w));
      assert.equal(next.statusCode, 202, next.body);
      const failed = await w.t.waitForStatus(w.key, next.json().id, ['delivered', 'failed']);
      assert.equal(failed.error.code, 'session_expired');
      assert.equal(w.fake.calls.length, calls);
    } finally {
      await stop(w);
    }
  });
});
