import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';
import { startLinkedinVoyagerFake, type LinkedinVoyagerFake, type VoyagerAccount } from './fakes/linkedin-voyager.js';
import { eventually } from './fixtures/eventually.js';
import { JANE, newLinkedinSession, USER_AGENT } from './fixtures/linkedin-account.js';

/**
 * LinkedIn conversations read as LinkedIn writes them: a follow-up that stops on a reply has its
 * conversation looked at once before it goes (a reply since the last look cancels it); LinkedIn's own
 * lines (SYSTEM) and messages taken back (RECALLED) answer nothing; a reply quoting our note is text, tied
 * to that note; a reply stamped a little before the note (the clocks differ) still answers it.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const inMs = (ms: number): string => new Date(Date.now() + ms).toISOString();

after(async () => {
  await closeSharedAudio();
});


async function start(listen: Record<string, unknown>): Promise<{ fake: LinkedinVoyagerFake; t: TestApp }> {
  const fake = await startLinkedinVoyagerFake({ profiles: [JANE] });
  const t = await startTestApp({ env: { LINKEDIN_API_ROOT: fake.apiRoot }, linkedinPace: { minMs: 0, maxMs: 0 }, platformTuning: { linkedinListen: listen } });
  return { fake, t };
}

function sendBody(t: TestApp, session: VoyagerAccount, extra: Record<string, unknown> = {}) {
  return {
    ...defaultSendBody('linkedin', t.mp3Url),
    recipient: JANE.publicId,
    session: { li_at: session.liAt, csrf_token: session.csrfToken, user_agent: USER_AGENT, cookies: `bcookie="v=2&abc"; lang=v=2&lang=en-us` },
    ...extra,
  };
}

async function accepted(t: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  const res = await t.send(key, body);
  assert.equal(res.statusCode, 202, res.body);
  return res.json().id as string;
}

const repliesOf = async (t: TestApp, key: string, id: string): Promise<any[]> => (await t.request({ method: 'GET', url: `/api/v1/messages/${id}`, key })).json().replies;

describe(`LinkedIn conversations read as LinkedIn writes them (${STORAGE_LABEL})`, () => {
  it('a cancel_on_reply follow-up: its conversation is looked at once before it goes, and a reply since the last look cancels it', async () => {
    // The intervals' first look is a minute after the note, and LinkedIn refuses the realtime stream
    // (a stream would hear the reply at once): only the look before the follow-up can hear the reply.
    const { fake, t } = await start({ scanMs: 100, intervalsMs: [60_000], dailyMs: 60_000, preSendLeadMs: 4_000 });
    fake.failNext('realtime', { status: 500, times: 1_000 });
    try {
      const a = await t.createAccount();
      const session = newLinkedinSession(fake);
      const note = await accepted(t, a.liveKey, sendBody(t, session, { listen: true }));
      assert.equal((await t.waitForStatus(a.liveKey, note, ['delivered', 'failed'])).status, 'delivered');
      const followUp = await accepted(t, a.liveKey, sendBody(t, session, { send_at: inMs(8_000), cancel_on_reply: true }));
      fake.pushMessage(fake.conversationWith(session.liAt, JANE.urn)!, { from: JANE.urn, text: 'Already answered you' });

      const status = await t.waitForStatus(a.liveKey, followUp, ['canceled', 'delivered', 'failed'], 30_000);
      assert.equal(status.status, 'canceled');
      assert.deepEqual((await repliesOf(t, a.liveKey, note)).map((r) => r.text), ['Already answered you']);
      assert.equal(fake.callsOf('createMessage', session.liAt).length, 1, 'the follow-up never went');
      await sleep(500);
      assert.equal(fake.callsOf('messages', session.liAt).length, 1, 'one look, before the follow-up');
      assert.deepEqual(fake.violations, []);
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it('SYSTEM and RECALLED messages answer nothing; a reply quoting our note is text; one stamped just before the note still answers it', async () => {
    const { fake, t } = await start({ scanMs: 100, intervalsMs: [400], dailyMs: 1_000 });
    try {
      const a = await t.createAccount();
      const session = newLinkedinSession(fake);
      const note = await accepted(t, a.liveKey, sendBody(t, session, { listen: true }));
      assert.equal((await t.waitForStatus(a.liveKey, note, ['delivered', 'failed'])).status, 'delivered');
      const conversation = fake.conversationWith(session.liAt, JANE.urn)!;
      const noteUrn = fake.callsOf('createMessage', session.liAt).length === 1 ? fake.messages.at(-1)!.entityUrn : '';
      const deliveredAt = Date.parse((await t.request({ method: 'GET', url: `/api/v1/status/${note}`, key: a.liveKey })).json().delivered_at);

      fake.pushMessage(conversation, { from: JANE.urn, text: 'Jane accepted your invitation', format: 'SYSTEM' });
      fake.pushMessage(conversation, { from: JANE.urn, text: 'oops, wrong chat', format: 'RECALLED' });
      // LinkedIn's clock a little behind ours: stamped 2 s before the note was delivered, written after it.
      fake.pushMessage(conversation, { from: JANE.urn, text: 'Hi!', deliveredAt: deliveredAt - 2_000 });
      fake.pushMessage(conversation, { from: JANE.urn, text: 'Loved this one', quotes: noteUrn });

      const replies = await eventually(async () => {
        const found = await repliesOf(t, a.liveKey, note);
        return found.length >= 2 ? found : undefined;
      }, 'the replies', 30_000);
      await sleep(300);
      assert.deepEqual(
        (await repliesOf(t, a.liveKey, note)).map((r) => [r.type, r.text]),
        [
          ['text', 'Hi!'],
          ['text', 'Loved this one'],
        ],
      );
      assert.equal(replies.length, 2);
      assert.deepEqual(fake.violations, []);
    } finally {
      await t.close();
      await fake.close();
    }
  });
});
