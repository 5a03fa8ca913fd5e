import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe } from 'node:test';
import jsQRModule from 'jsqr';
import { PNG } from 'pngjs';
import { it } from './fixtures/timed.js';
import { closeSharedAudio, defaultSendBody, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, type TestApp } from './fixtures/app-harness.js';
import { originTokenFor } from '../src/platforms/linkedin/voyager-requests.js';
import { startLinkedinVoyagerFake } from './fakes/linkedin-voyager.js';
import { startTelegramApi } from './fakes/telegram-api.js';
import { FakeTelegram, type FakeAccount } from './fakes/telegram-mtproto.js';
import { eventually } from './fixtures/eventually.js';

/**
 * A reply tied to the note it quotes when the platform says so (a Telegram bot's reply_to_message, a
 * linked account's MessageReplyHeader, LinkedIn's repliedMessageContent): two notes to one person, and
 * the answer to the first lands on the first, not on the latest. A linked Telegram account's replies
 * typed like the others' (image, video, document, sticker, audio, voice).
 */

const API = '/api/v1';
const jsQR = ((jsQRModule as unknown as { default?: typeof jsQRModule }).default ?? jsQRModule) as unknown as (
  data: Uint8ClampedArray,
  width: number,
  height: number,
) => { data: string } | null;
const decodeQr = (qrCode: string): string => {
  const image = PNG.sync.read(Buffer.from(qrCode.split(',')[1]!, 'base64'));
  return jsQR(new Uint8ClampedArray(image.data.buffer, image.data.byteOffset, image.data.byteLength), image.width, image.height)!.data;
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

after(async () => {
  await closeSharedAudio();
});

async function accepted(t: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  const res = await t.send(key, body);
  assert.equal(res.statusCode, 202, res.body);
  return res.json().id as string;
}

const repliesOf = async (t: TestApp, key: string, id: string): Promise<any[]> => (await t.request({ method: 'GET', url: `${API}/messages/${id}`, key })).json().replies;
const texts = (replies: any[]) => replies.map((r) => [r.type, r.text]);

describe(`replies tied to the note they quote (${STORAGE_LABEL})`, () => {
  it("a bot's reply_to_message: the answer to the first of two notes lands on the first", async () => {
    const fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, platformTuning: { telegram: { listenScanMs: 100, listenPollSeconds: 1 } } });
    try {
      const a = await t.createAccount();
      const body = (extra: Record<string, unknown> = {}) => ({ ...defaultSendBody('telegram', t.voiceUrl), recipient: '559001', ...extra });
      const first = await accepted(t, a.liveKey, body({ listen: true }));
      await t.waitForStatus(a.liveKey, first, ['delivered']);
      const second = await accepted(t, a.liveKey, body());
      await t.waitForStatus(a.liveKey, second, ['delivered']);
      // Telegram's ids of the two notes in the chat, as its sendVoice answers gave them.
      const [firstId] = fake.callsForChat('559001').filter((c) => c.method === 'sendVoice' && c.reply.status === 200).map((c) => JSON.parse(c.reply.body).result.message_id as number);
      const date = Math.floor(Date.now() / 1000) + 1;
      const from = { id: 559001, is_bot: false, first_name: 'Jo' };
      const chat = { id: 559001, type: 'private' };
      // The Bot API gives the whole message answered (Message.reply_to_message), our note among them.
      fake.pushUpdate(TELEGRAM_TOKEN, { message: { message_id: 61, date, chat, from, text: 'About this one: yes', reply_to_message: { message_id: firstId, date: date - 5, chat, voice: { duration: 3 } } } });
      fake.pushUpdate(TELEGRAM_TOKEN, { message: { message_id: 62, date, chat, from, text: 'and hello' } });
      await eventually(async () => (await repliesOf(t, a.liveKey, second)).length === 1, 'the plain reply', 30_000);
      await eventually(async () => (await repliesOf(t, a.liveKey, first)).length === 1, 'the quoted reply', 30_000);
      assert.deepEqual(texts(await repliesOf(t, a.liveKey, first)), [['text', 'About this one: yes']]);
      assert.deepEqual(texts(await repliesOf(t, a.liveKey, second)), [['text', 'and hello']]);
    } finally {
      await t.close();
      await fake.close();
    }
  });

  it("a linked account's Reply lands on the note it answers; its photos, stickers, videos, files, music and voice are typed as such", async () => {
    const world = new FakeTelegram();
    const JANE: FakeAccount = { userId: 5_100_200_301n, username: 'jane_quoted', phone: '14155550124' };
    const BOB: FakeAccount = { userId: 7_000_000_011n, username: 'bob_quoted', phone: '447700900124' };
    world.people.push(BOB);
    const t = await startTestApp({
      env: { TELEGRAM_API_ID: String(world.apiId), TELEGRAM_API_HASH: world.apiHash },
      telegramClientFactory: world.factory('one'),
      telegramAccounts: { qrWaitMs: 3_000, leaseMs: 1_500, renewMs: 300, takeoverScanMs: 200 },
      platformTuning: { telegramAccount: { sendGapMs: 10, sendJitterMs: 10, actionEveryMs: 200 } },
    });
    try {
      const account = await t.createAccount();
      const key = account.liveKey;
      const created = (await t.request({ method: 'POST', url: `${API}/telegram/sessions`, key })).json();
      world.scan(decodeQr(created.qr_code), JANE);
      await eventually(async () => (await t.request({ method: 'GET', url: `${API}/telegram/sessions/${created.session_id}`, key })).json().status === 'connected', 'linking');
      const send = () => accepted(t, key, { platform: 'telegram', recipient: '@bob_quoted', audio_url: t.voiceUrl, session: { session_id: created.session_id } });
      const first = await send();
      assert.equal((await t.waitForStatus(key, first, ['delivered', 'failed'])).status, 'delivered');
      const firstOnTelegram = world.sent.at(-1)!.messageId;
      const second = await send();
      assert.equal((await t.waitForStatus(key, second, ['delivered', 'failed'])).status, 'delivered');

      world.write(BOB.userId, JANE.userId, { text: 'this one!', media: 'photo', replyToMsgId: firstOnTelegram });
      for (const media of ['sticker', 'video', 'round', 'document', 'audio', 'voice'] as const) world.write(BOB.userId, JANE.userId, { media });
      await eventually(async () => (await repliesOf(t, key, second)).length === 6, 'six replies on the latest note', 30_000);
      await eventually(async () => (await repliesOf(t, key, first)).length === 1, 'the quoted reply', 30_000);
      assert.deepEqual(texts(await repliesOf(t, key, first)), [['image', 'this one!']]);
      assert.deepEqual((await repliesOf(t, key, second)).map((r) => r.type).sort(), ['audio', 'document', 'sticker', 'video', 'video', 'voice']);
    } finally {
      await t.close();
    }
  });

  it("LinkedIn's repliedMessageContent: the answer quoting the first of two notes lands on the first", async () => {
    const JANE = { publicId: 'jane-smith-a1b2c3', urn: 'urn:li:fsd_profile:ACoAABjaneSmith01' };
    const fake = await startLinkedinVoyagerFake({ profiles: [JANE] });
    // The first look 5 s after the latest note (both are sent before it, so no look runs during a send), then one a second.
    const t = await startTestApp({ env: { LINKEDIN_API_ROOT: fake.apiRoot }, linkedinPace: { minMs: 0, maxMs: 0 }, platformTuning: { linkedinListen: { scanMs: 100, intervalsMs: [5_000], dailyMs: 1_000 } } });
    try {
      const a = await t.createAccount();
      const liAt = `AQEDAQ${randomBytes(18).toString('base64url')}`;
      const csrfToken = `ajax:${BigInt(`0x${randomBytes(8).toString('hex')}`).toString()}`;
      const profileUrn = `urn:li:fsd_profile:ACoAAB${randomBytes(6).toString('hex')}`;
      fake.addAccount({ liAt, csrfToken, profileUrn, cookies: { bcookie: '"v=2&abc"' } });
      const body = { ...defaultSendBody('linkedin', t.mp3Url), recipient: JANE.publicId, session: { li_at: liAt, csrf_token: csrfToken, cookies: 'bcookie="v=2&abc"' }, listen: true };
      const first = await accepted(t, a.liveKey, body);
      const second = await accepted(t, a.liveKey, body);
      assert.equal((await t.waitForStatus(a.liveKey, first, ['delivered', 'failed'])).status, 'delivered');
      assert.equal((await t.waitForStatus(a.liveKey, second, ['delivered', 'failed'])).status, 'delivered');
      // The first note as LinkedIn knows it: the createMessage that carried its origin token.
      const firstUrn = fake.messages.find((m) => m.body.message.originToken === originTokenFor(first))!.entityUrn;
      const conversation = fake.conversationWith(liAt, JANE.urn)!;
      fake.pushMessage(conversation, { from: JANE.urn, text: 'The first was better', quotes: firstUrn });
      await eventually(async () => (await repliesOf(t, a.liveKey, first)).length === 1, 'the quoted reply', 30_000);
      await sleep(300);
      assert.deepEqual(texts(await repliesOf(t, a.liveKey, first)), [['text', 'The first was better']]);
      assert.deepEqual(await repliesOf(t, a.liveKey, second), []);
      assert.deepEqual(fake.violations, []);
    } finally {
      await t.close();
      await fake.close();
    }
  });
});
