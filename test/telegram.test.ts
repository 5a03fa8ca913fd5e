import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeAll } from './fixtures/close-all.js';
import { MockAgent } from 'undici';
import { DeliveryError, type DeliveryJob } from '../src/platforms/platform.js';
import { createTelegramAdapter } from '../src/platforms/telegram/adapter.js';
import { probeWithFfmpeg, sharedFixtures, testFfmpegPath } from './fixtures/audio-fixtures.js';
import { describeOggOpus } from './fixtures/ogg-opus-reader.js';
import {
  closeSharedAudio,
  defaultSendBody,
  STORAGE_LABEL,
  startTestApp,
  TELEGRAM_TOKEN,
  withRestartableStorage,
  type TestAccount,
  type TestApp,
} from './fixtures/app-harness.js';
import { startTelegramApi, type TelegramCall, type TelegramFailure, type TelegramFake } from './fakes/telegram-api.js';

/**
 * Live Telegram delivery (`sk_live_` keys) end to end: HTTP API → worker → audio pipeline → the
 * adapter → a local Bot API that parses the upload as Telegram does. What is checked is what a user
 * sees (the status body) and what Telegram would have received (the multipart fields and bytes).
 */

const STATUS_FIELDS = ['created_at', 'delivered_at', 'error', 'id', 'platform', 'recipient', 'status'];
// Well-formed tokens (the API checks the format) that the fake Bot API does not know, or refuses.
const UNKNOWN_TOKEN = '987654321:ZZunknownTokenSecretPart_0123456789-abc';

function assertNoToken(text: string, token: string): void {
  assert.ok(!text.includes(token), `the bot token leaked: ${text}`);
  assert.ok(!text.includes(token.slice(token.indexOf(':') + 1)), `the bot token's secret leaked: ${text}`);
}

async function probeBytes(ffmpegPath: string, bytes: Buffer): Promise<Awaited<ReturnType<typeof probeWithFfmpeg>>> {
  const dir = await mkdtemp(join(tmpdir(), 'voicenote-tg-'));
  try {
    const path = join(dir, 'received.ogg');
    await writeFile(path, bytes);
    return await probeWithFfmpeg(ffmpegPath, path);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

after(async () => {
  await closeSharedAudio();
});

describe(`telegram live delivery through the API (${STORAGE_LABEL})`, () => {
  let fake: TelegramFake;
  let t: TestApp;
  let ffmpegPath: string;

  before(async () => {
    ffmpegPath = await testFfmpegPath();
    fake = await startTelegramApi({ knownTokens: [TELEGRAM_TOKEN] });
    t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
  });

  after(() => closeAll(t, fake));

  async function sendLive(app: TestApp, account: TestAccount, overrides: Record<string, unknown>): Promise<string> {
    const res = await app.send(account.liveKey, { ...defaultSendBody('telegram', app.mp3Url), ...overrides });
    assert.equal(res.statusCode, 202, res.body);
    return res.json<{ id: string }>().id;
  }

  async function finalStatus(app: TestApp, account: TestAccount, id: string): Promise<{ body: any; text: string }> {
    const body = await app.waitForStatus(account.liveKey, id, ['delivered', 'failed'], 30_000);
    return { body, text: JSON.stringify(body) };
  }

  it('delivers an mp3 source as an OGG Opus voice note with chat id, caption and a whole-second duration', async () => {
    const account = await t.createAccount();
    assert.match(account.liveKey, /^sk_live_/);
    const chatId = '123456789';
    const caption = 'Hello from voicenote — 👋';
    const id = await sendLive(t, account, { recipient: chatId, caption });

    const { body, text } = await finalStatus(t, account, id);
    assert.equal(body.status, 'delivered', text);
    assert.deepEqual(Object.keys(body).sort(), STATUS_FIELDS);
    assert.equal(body.error, null);
    assert.equal(body.platform, 'telegram');
    assert.equal(body.recipient, chatId);
    assert.ok(typeof body.delivered_at === 'string' && Date.parse(body.delivered_at) >= Date.parse(body.created_at), text);
    assertNoToken(text, TELEGRAM_TOKEN);

    const calls = fake.callsForChat(chatId);
    assert.equal(calls.length, 1);
    const call = calls[0]!;
    assert.equal(call.httpMethod, 'POST');
    assert.equal(call.method, 'sendVoice');
    assert.equal(call.token, TELEGRAM_TOKEN, 'the worker must use the bot token that came with the message');
    assert.equal(call.reply.status, 200);
    assert.deepEqual(Object.keys(call.fields).sort(), ['caption', 'chat_id', 'duration']);
    assert.equal(call.chatId, chatId);
    assert.equal(call.caption, caption);

    const voice = call.voice;
    assert.ok(voice, 'the voice part arrived as a file');
    assert.equal(voice.fileName, 'voice.ogg');
    assert.match(voice.mimeType, /^audio\/ogg/);
    assert.equal(voice.bytes.subarray(0, 4).toString('latin1'), 'OggS');
    const probed = await probeBytes(ffmpegPath, voice.bytes);
    assert.equal(probed.codec, 'opus');
    assert.equal(probed.channels, 1);
    assert.equal(probed.sampleRate, 48000);
    assert.equal(probed.hasVideo, false);

    assert.match(call.duration ?? '', /^[0-9]+$/, `duration must be whole seconds, got ${call.duration}`);
    const duration = Number(call.duration);
    assert.ok(duration >= 1 && Math.abs(duration - probed.durationSeconds) <= 1, `duration ${duration} for ${probed.durationSeconds} s of audio`);
  });

  it('sends a @channelusername as the chat id and no caption field when there is none', async () => {
    const account = await t.createAccount();
    const id = await sendLive(t, account, { recipient: '@voicenote_test_channel', audio_url: t.voiceUrl });
    const { body, text } = await finalStatus(t, account, id);
    assert.equal(body.status, 'delivered', text);
    const [call] = fake.callsForChat('@voicenote_test_channel');
    assert.ok(call);
    assert.deepEqual(Object.keys(call.fields).sort(), ['chat_id', 'duration']);
    // An OGG Opus source is already a voice note: its audio goes out unchanged, without its tags.
    const source = await readFile((await sharedFixtures(ffmpegPath))['voice.ogg']);
    const sent = describeOggOpus(call.voice!.bytes);
    assert.deepEqual(sent.packets, describeOggOpus(source).packets, 'the OGG Opus audio was sent unchanged');
    assert.deepEqual(sent.comments, []);
  });

  it('maps each refusal Telegram documents to a failure code, at once, after exactly one call', async () => {
    const account = await t.createAccount();
    const cases: Array<{ chatId: string; failure: TelegramFailure; code: string; message: RegExp }> = [
      { chatId: '200000001', failure: { kind: 'chat_not_found' }, code: 'recipient_not_found', message: /chat not found/ },
      { chatId: '200000002', failure: { kind: 'bot_blocked' }, code: 'recipient_blocked', message: /bot was blocked by the user/ },
      { chatId: '200000003', failure: { kind: 'cant_initiate' }, code: 'recipient_blocked', message: /can't initiate conversation/ },
      { chatId: '200000004', failure: { kind: 'user_deactivated' }, code: 'recipient_blocked', message: /user is deactivated/ },
      {
        chatId: '200000005',
        failure: { kind: 'voice_forbidden' },
        code: 'recipient_blocked',
        message: /VOICE_MESSAGES_FORBIDDEN.*the recipient does not accept voice messages: their privacy settings refuse them/,
      },
      {
        chatId: '-200000006',
        failure: { kind: 'no_voice_rights' },
        code: 'recipient_blocked',
        message: /not enough rights to send voice notes to the chat.*the bot may not send voice notes in this chat/,
      },
      {
        chatId: '200000008',
        failure: { kind: 'voice_restricted' },
        code: 'recipient_blocked',
        message: /user restricted receiving of voice note messages.*privacy settings refuse voice messages from this bot/,
      },
      {
        chatId: '-200000007',
        failure: {
          kind: 'bad_request',
          description: 'Bad Request: group chat was upgraded to a supergroup chat',
          parameters: { migrate_to_chat_id: -1002000000007 },
        },
        code: 'recipient_not_found',
        message: /-1002000000007/,
      },
    ];
    for (const c of cases) fake.failForChat(c.chatId, c.failure);
    const ids = await Promise.all(cases.map((c) => sendLive(t, account, { recipient: c.chatId })));
    const outcomes = await Promise.all(ids.map((id) => finalStatus(t, account, id)));

    cases.forEach((c, i) => {
      const { body, text } = outcomes[i]!;
      assert.equal(body.status, 'failed', `${c.failure.kind}: ${text}`);
      assert.equal(body.delivered_at, null);
      assert.equal(body.error.code, c.code, `${c.failure.kind}: ${text}`);
      assert.match(body.error.message, c.message, text);
      assertNoToken(text, TELEGRAM_TOKEN);
      const calls = fake.callsForChat(c.chatId);
      assert.equal(calls.length, 1, `${c.failure.kind} is permanent: one call only; replies: ${calls.map((call) => `${call.reply.status} ${call.reply.body}`).join(' | ')}`);
      assert.equal(calls[0]!.token, TELEGRAM_TOKEN);
    });
  });

  it('fails with invalid_session after one call when Telegram does not know the token (401)', async () => {
    const account = await t.createAccount();
    const chatId = '210000001';
    const id = await sendLive(t, account, { recipient: chatId, session: { bot_token: UNKNOWN_TOKEN } });
    const { body, text } = await finalStatus(t, account, id);
    assert.equal(body.status, 'failed', text);
    assert.equal(body.error.code, 'invalid_session');
    assert.match(body.error.message, /Unauthorized/);
    assertNoToken(text, UNKNOWN_TOKEN);
    const calls = fake.calls.filter((c) => c.token === UNKNOWN_TOKEN);
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.reply.status, 401);
    assert.equal(calls[0]!.chatId, chatId);
  });

  it('fails with invalid_session when Telegram cannot read the token (401 "Unauthorized: invalid token specified")', async () => {
    const account = await t.createAccount();
    // Well-formed for the API, but the Bot API refuses a bot id with a leading zero.
    const unreadable = '0123456789:ZZunreadableTokenSecretPart_0123456789';
    const id = await sendLive(t, account, { recipient: '220000001', session: { bot_token: unreadable } });
    const { body, text } = await finalStatus(t, account, id);
    assert.equal(body.status, 'failed', text);
    assert.equal(body.error.code, 'invalid_session');
    assert.match(body.error.message, /Unauthorized: invalid token specified/);
    assertNoToken(text, unreadable);
    assert.deepEqual(fake.calls.filter((c) => c.token === unreadable).map((c) => c.reply.status), [401]);
  });

  it('takes a 404 for a wrong TELEGRAM_API_ROOT: platform_error, tried again, never invalid_session', async () => {
    // The operator pointed the service one path too deep: every call gets the Bot API's 404 "Not Found".
    const wrongRoot = await startTestApp({ env: { TELEGRAM_API_ROOT: `${fake.apiRoot}/telegram` } });
    try {
      const account = await wrongRoot.createAccount();
      const id = await sendLive(wrongRoot, account, { recipient: '230000001' });
      const deadline = Date.now() + 20_000;
      let detail: any;
      while (Date.now() < deadline) {
        detail = (await wrongRoot.request({ method: 'GET', url: `/api/v1/messages/${id}`, key: account.liveKey })).json();
        if (detail.attempts.length >= 2) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.ok(detail.attempts.length >= 2, `tried again: ${JSON.stringify(detail)}`);
      assert.notEqual(detail.status, 'failed', 'not the caller\'s fault: the message waits for the address to be fixed');
      for (const attempt of detail.attempts) {
        assert.equal(attempt.error.code, 'platform_error');
        assert.match(attempt.error.message, /404 "Not Found".*TELEGRAM_API_ROOT is probably wrong/);
        assertNoToken(attempt.error.message, TELEGRAM_TOKEN);
      }
    } finally {
      await wrongRoot.close();
    }
  });

  it('retries a 429 (after retry_after), 5xx and a non-JSON gateway page, then delivers', async () => {
    const account = await t.createAccount();
    const cases: Array<{ chatId: string; failure: TelegramFailure; times: number }> = [
      { chatId: '300000001', failure: { kind: 'rate_limited', retryAfter: 1 }, times: 1 },
      { chatId: '300000002', failure: { kind: 'server_error' }, times: 2 },
      { chatId: '300000003', failure: { kind: 'html_gateway_error' }, times: 1 },
    ];
    for (const c of cases) fake.failForChat(c.chatId, c.failure, c.times);
    const ids = await Promise.all(cases.map((c) => sendLive(t, account, { recipient: c.chatId, caption: `retry ${c.chatId}` })));
    const outcomes = await Promise.all(ids.map((id) => finalStatus(t, account, id)));

    cases.forEach((c, i) => {
      const { body, text } = outcomes[i]!;
      assert.equal(body.status, 'delivered', `${c.failure.kind}: ${text}`);
      assert.equal(body.error, null);
      assertNoToken(text, TELEGRAM_TOKEN);
      const calls = fake.callsForChat(c.chatId);
      assert.equal(calls.length, c.times + 1, `${c.failure.kind}: ${c.times} refused, then accepted`);
      assert.deepEqual(
        calls.map((call: TelegramCall) => call.reply.status),
        [...Array<number>(c.times).fill(c.failure.kind === 'rate_limited' ? 429 : c.failure.kind === 'server_error' ? 500 : 502), 200],
      );
      // Every attempt is a whole upload with the same voice note and the same credentials.
      for (const call of calls) {
        assert.equal(call.token, TELEGRAM_TOKEN);
        assert.equal(call.caption, `retry ${c.chatId}`);
        assert.ok(call.voice && call.voice.bytes.equals(calls[0]!.voice!.bytes));
      }
    });
  });

  it('delivers after a restart between a failed attempt and its retry', async () => {
    const chatId = '400000001';
    fake.failForChat(chatId, { kind: 'server_error' }, 1);
    await withRestartableStorage(async (reuse) => {
      const first = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, reuse });
      let account: TestAccount;
      let id: string;
      try {
        account = await first.createAccount();
        id = await sendLive(first, account, { recipient: chatId });
        await fake.waitForCalls(1, (c) => c.chatId === chatId);
      } finally {
        // Closing lets the attempt in hand settle (a retry is scheduled) before the service stops.
        await first.close();
      }
      assert.equal(fake.callsForChat(chatId).length, 1);

      const second = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, reuse });
      try {
        const { body, text } = await finalStatus(second, account, id);
        assert.equal(body.status, 'delivered', text);
        assertNoToken(text, TELEGRAM_TOKEN);
      } finally {
        await second.close();
      }
      const calls = fake.callsForChat(chatId);
      assert.deepEqual(
        calls.map((c) => c.reply.status),
        [500, 200],
      );
      assert.equal(calls[1]!.token, TELEGRAM_TOKEN, 'the credentials survived the restart');
    });
  });
});

describe('telegram adapter: network failures and timeouts', () => {
  let fake: TelegramFake;
  let voicePath: string;
  let voiceSize: number;

  before(async () => {
    voicePath = (await sharedFixtures(await testFfmpegPath()))['voice.ogg'];
    voiceSize = (await stat(voicePath)).size;
    fake = await startTelegramApi();
  });

  after(async () => {
    await fake?.close();
  });

  function job(overrides: { recipient: string; durationSeconds?: number }): DeliveryJob {
    return {
      messageId: 'msg_000000000000000000000000',
      accountId: 'acct_test',
      env: 'live',
      platform: 'telegram',
      recipient: overrides.recipient,
      session: { platform: 'telegram', bot_token: TELEGRAM_TOKEN },
      caption: null,
      signal: new AbortController().signal,
      audio: {
        path: voicePath,
        mimeType: 'audio/ogg; codecs=opus',
        fileName: 'voice.ogg',
        sizeBytes: voiceSize,
        durationSeconds: overrides.durationSeconds ?? 3,
        waveform: new Uint8Array(64),
      },
      attempt: 1,
    };
  }

  async function failureOf(promise: Promise<void>): Promise<DeliveryError> {
    try {
      await promise;
    } catch (error) {
      assert.ok(error instanceof DeliveryError, `expected a DeliveryError, got ${String(error)}`);
      return error;
    }
    assert.fail('the delivery was expected to fail');
  }

  it('rounds a fractional duration up to whole seconds', async () => {
    const adapter = createTelegramAdapter({ apiRoot: fake.apiRoot });
    await adapter.deliver(job({ recipient: '500000001', durationSeconds: 2.2 }));
    assert.equal(fake.callsForChat('500000001')[0]?.duration, '3');
  });

  it('always sends a duration of at least 1 second, even when the length is unknown or under a second', async () => {
    const adapter = createTelegramAdapter({ apiRoot: fake.apiRoot });
    await adapter.deliver(job({ recipient: '500000011', durationSeconds: 0.3 }));
    await adapter.deliver(job({ recipient: '500000012', durationSeconds: Number.NaN }));
    assert.equal(fake.callsForChat('500000011')[0]?.duration, '1');
    assert.equal(fake.callsForChat('500000012')[0]?.duration, '1');
  });

  it('uploads the bytes the file had when the attempt began, even if its path is touched or replaced meanwhile', async () => {
    // The audio cache touches a file's times on every hit and may rename a fresh copy over it.
    const dir = await mkdtemp(join(tmpdir(), 'voicenote-tg-'));
    try {
      const path = join(dir, 'voice.ogg');
      const original = randomBytes(4 * 1024 * 1024);
      await writeFile(path, original);
      const replacement = join(dir, 'replacement.ogg');
      await writeFile(replacement, randomBytes(original.length));
      fake.beforeReadingBody = async () => {
        fake.beforeReadingBody = undefined;
        await utimes(path, new Date(), new Date(Date.now() - 60_000));
        await rename(replacement, path);
      };
      const base = job({ recipient: '500000006' });
      await createTelegramAdapter({ apiRoot: fake.apiRoot }).deliver({ ...base, audio: { ...base.audio, path, sizeBytes: original.length } });
      assert.ok(fake.callsForChat('500000006')[0]?.voice?.bytes.equals(original), 'the original bytes arrived whole');
    } finally {
      fake.beforeReadingBody = undefined;
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('gives up on a Bot API that takes the upload and never answers, as a transient platform_error', async () => {
    fake.failForChat('500000002', { kind: 'stall' });
    const adapter = createTelegramAdapter({ apiRoot: fake.apiRoot, timeouts: { totalMs: () => 500 } });
    const error = await failureOf(adapter.deliver(job({ recipient: '500000002' })));
    assert.equal(error.code, 'platform_error');
    assert.equal(error.transient, true);
    assert.match(error.message, /no reply within 500 ms/);
    assertNoToken(error.message, TELEGRAM_TOKEN);
    assert.equal(fake.callsForChat('500000002')[0]?.voice?.bytes.length, voiceSize, 'the upload itself went through');
  });

  it('stops a call whose attempt is stopped (a lost lease, a shutdown) before its own time runs out', async () => {
    fake.failForChat('500000007', { kind: 'stall' });
    const adapter = createTelegramAdapter({ apiRoot: fake.apiRoot, timeouts: { totalMs: () => 30_000 } });
    const stop = new AbortController();
    setTimeout(() => stop.abort(new Error('lease lost')), 300).unref();
    const error = await failureOf(adapter.deliver({ ...job({ recipient: '500000007' }), signal: stop.signal }));
    assert.equal(error.code, 'platform_error');
    assert.match(error.message, /the attempt was aborted/);
  });

  it('treats a reply whose headers do not come in time as transient', async () => {
    fake.failForChat('500000003', { kind: 'stall' });
    const adapter = createTelegramAdapter({ apiRoot: fake.apiRoot, timeouts: { headersMs: 300 } });
    const error = await failureOf(adapter.deliver(job({ recipient: '500000003' })));
    assert.equal(error.code, 'platform_error');
    assert.equal(error.transient, true);
    assertNoToken(error.message, TELEGRAM_TOKEN);
  });

  it('treats a refused connection as transient', async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const probe = createServer();
      probe.listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const adapter = createTelegramAdapter({ apiRoot: `http://127.0.0.1:${closedPort}` });
    const error = await failureOf(adapter.deliver(job({ recipient: '500000004' })));
    assert.equal(error.code, 'platform_error');
    assert.equal(error.transient, true);
    assertNoToken(error.message, TELEGRAM_TOKEN);
    // The code, never the address of TELEGRAM_API_ROOT (Node's own message names it).
    assert.equal(error.message, 'could not reach Telegram (ECONNREFUSED)');
  });

  it('reads no more than 1 MiB of a reply: a larger one is not the Bot API talking (transient platform_error)', async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    try {
      const huge = JSON.stringify({ ok: true, result: { padding: 'x'.repeat(2 * 1024 * 1024) } });
      agent.get('https://api.telegram.invalid').intercept({ path: /\/sendVoice$/, method: 'POST' }).reply(200, huge);
      const adapter = createTelegramAdapter({ apiRoot: 'https://api.telegram.invalid', dispatcher: agent });
      const error = await failureOf(adapter.deliver(job({ recipient: '500000008' })));
      assert.equal(error.code, 'platform_error');
      assert.equal(error.transient, true);
      assert.match(error.message, /Telegram answered HTTP 200 without a Bot API reply/);
    } finally {
      await agent.close();
    }
  });

  it('says only the code of an HTTP client error that echoes the request path: neither the path nor the token', async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    try {
      const adapter = createTelegramAdapter({ apiRoot: 'https://api.telegram.invalid', dispatcher: agent });
      const error = await failureOf(adapter.deliver(job({ recipient: '500000005' })));
      assert.equal(error.code, 'platform_error');
      assert.equal(error.transient, true);
      assert.equal(error.message, 'could not reach Telegram (UND_MOCK_ERR_MOCK_NOT_MATCHED)');
      assertNoToken(error.message, TELEGRAM_TOKEN);
    } finally {
      await agent.close();
    }
  });
});
