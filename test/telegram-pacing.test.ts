import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { Redis } from 'ioredis';
import {
  STORAGE_LABEL,
  TELEGRAM_TOKEN,
  TEST_REDIS_URL,
  closeSharedAudio,
  defaultSendBody,
  startTestApp,
  withRestartableStorage,
  type TestApp,
} from './fixtures/app-harness.js';
import { startTelegramApi } from './fakes/telegram-api.js';
import { createMemorySlotPacer, createRedisSlotPacer, LATE_WAKE_MS, takeSlot, type SlotPacer } from '../src/platforms/pacing.js';
import { createTelegramAdapter } from '../src/platforms/telegram/adapter.js';
import { DeliveryError, type DeliveryJob } from '../src/platforms/platform.js';

after(async () => {
  await closeSharedAudio();
});

// With Redis, two instances on one storage share the pacing, as the processes of one deployment do;
// without it each process paces alone, so the suite runs one instance.
const SHARED = TEST_REDIS_URL !== undefined;

describe(`telegram sends within the flood limits (${STORAGE_LABEL}${SHARED ? ', two instances sharing Redis' : ', one instance'})`, () => {
  it('a bulk send to two chats of one bot meets no 429: each chat gets its notes about a second apart, all delivered at the first attempt', async () => {
    const fake = await startTelegramApi();
    // Telegram's flood control, a little more lenient than its "about one a second per chat" so that
    // the fake judges pacing, not the scheduling noise of a busy machine.
    fake.enforceFloodLimits({ perChatMs: 500, perBotPerSecond: 30 });
    const redisKeyPrefix = `voicenote-test:${randomBytes(6).toString('hex')}`;
    try {
      await withRestartableStorage(async (reuse) => {
        const env = { TELEGRAM_API_ROOT: fake.apiRoot };
        const apps: TestApp[] = [await startTestApp({ env, reuse, redisKeyPrefix })];
        try {
          if (SHARED) apps.push(await startTestApp({ env, reuse, redisKeyPrefix }));
          const account = await apps[0]!.createAccount({ plan: 'growth' });
          const chats = ['310000001', '310000002'];
          const sent: Array<{ app: TestApp; id: string }> = [];
          for (let i = 0; i < 12; i++) {
            const app = apps[i % apps.length]!;
            const res = await app.send(account.liveKey, { ...defaultSendBody('telegram', app.voiceUrl), recipient: chats[i % 2] });
            assert.equal(res.statusCode, 202, res.body);
            sent.push({ app, id: res.json().id });
          }
          for (const { app, id } of sent) {
            const status = await app.waitForStatus(account.liveKey, id, ['delivered', 'failed'], 60_000);
            assert.equal(status.status, 'delivered', JSON.stringify(status));
          }
          assert.equal(fake.floodRefusals, 0, 'Telegram never had to refuse a send for flooding');
          for (const chat of chats) assert.equal(fake.callsForChat(chat).length, 6, `six calls for chat ${chat}: none was retried`);

          if (SHARED) {
            // The shared slots name the bot by a hash: no token (nor its secret half) in any Redis key.
            const redis = new Redis(TEST_REDIS_URL!);
            try {
              const keys = await redis.keys(`${redisKeyPrefix}*`);
              assert.ok(keys.some((k) => k.includes(':slots:telegram:')), `pacing slots live in Redis: ${keys.join(', ')}`);
              const secret = TELEGRAM_TOKEN.split(':')[1]!;
              for (const key of keys) assert.ok(!key.includes(TELEGRAM_TOKEN) && !key.includes(secret), key);
            } finally {
              redis.disconnect();
            }
          }
        } finally {
          for (const app of apps) await app.close();
        }
      });
    } finally {
      await fake.close();
    }
  });
});

describe('send slots: a line too long to wait in goes back to the queue, spread out', () => {
  const chat = { key: 'chat:a', intervalMs: 1_000 };
  const bot = { key: 'bot:1', intervalMs: 35 };

  it('in memory: sends refused under one chat are told to come back one interval apart, and do not push back the bot\'s other chats', async () => {
    let clock = 1_000_000;
    const pacer = createMemorySlotPacer(() => clock);
    const answers: number[] = [];
    for (let i = 0; i < 6; i++) answers.push(await pacer.reserve([bot, chat], 1_000));
    // Two fit within the longest wait (now, and a second later); the other four come back at 2, 3, 4 and
    // 5 s rather than all at 2 s, where one would send and three would be refused again.
    assert.deepEqual(answers, [0, 1_000, -2_000, -3_000, -4_000, -5_000]);
    // Another chat of the same bot goes at the bot's pace, not behind chat a's line: the bot's moment
    // booked a second ahead for chat a leaves it free until then.
    assert.equal(await pacer.reserve([bot, { key: 'chat:b', intervalMs: 1_000 }], 1_000), 35);
    // The first refused send, back when told: its chat is free and it goes at once.
    clock += 2_000;
    assert.equal(await pacer.reserve([bot, chat], 1_000), 0);
    // A line of the bot itself longer than the longest wait comes back spread at the bot's pace.
    const chats = Array.from({ length: 40 }, (_, i) => ({ key: `chat:c${i}`, intervalMs: 1_000 }));
    const waits: number[] = [];
    for (const c of chats) waits.push(await pacer.reserve([bot, c], 1_000));
    const held = waits.filter((w) => w >= 0);
    // (the send just above holds the bot's slot now)
    assert.deepEqual(held, held.map((_, i) => 35 * (i + 1)), 'sends held in line at the bot\'s pace, up to a second');
    assert.equal(held.length, 28);
    const backs = waits.filter((w) => w < 0).map((w) => -w);
    assert.ok(backs.length > 0 && backs.every((b, i) => b === backs[0]! + 35 * i), `refused sends come back 35 ms apart: ${backs.join(', ')}`);
  });

  it('a process that stalls past its booked slots does not send them at once when it wakes: each late send books again', async () => {
    const pacer = createMemorySlotPacer();
    const went: number[] = [];
    // Ten sends of one bot booked together: slots 35 ms apart, the first at once.
    const sends = Array.from({ length: 10 }, () =>
      takeSlot(pacer, [bot], 10_000).then((slot) => {
        assert.equal(slot.kind, 'go');
        went.push(performance.now());
      }),
    );
    await new Promise((resolve) => setImmediate(resolve));
    // The process stalls for 400 ms (a long garbage collection, a busy machine): every other slot passes meanwhile.
    for (const end = performance.now() + 400; performance.now() < end; );
    await Promise.all(sends);
    // Woken together, they would all leave at once (gaps of 0 ms): booked again, they leave one interval apart.
    const gaps = went.slice(1).map((at, i) => Math.round(at - went[i]!));
    assert.ok(gaps[0]! >= 400, `the first went before the stall: ${gaps.join(', ')}`);
    assert.ok(gaps.slice(1).every((gap) => gap >= 20), `sends after the stall ${bot.intervalMs} ms apart, not together: ${gaps.join(', ')} ms (LATE_WAKE_MS ${LATE_WAKE_MS})`);
  });

  it('in Redis (shared by processes): the same spreading, on Redis\' clock', { skip: TEST_REDIS_URL === undefined ? 'TEST_REDIS_URL is not set' : false }, async () => {
    const redis = new Redis(TEST_REDIS_URL!);
    const keyPrefix = `voicenote-test:${randomBytes(6).toString('hex')}`;
    try {
      const pacer: SlotPacer = createRedisSlotPacer({ redis, keyPrefix, onFallback: (err) => assert.fail(`Redis did not answer: ${String(err)}`) });
      const answers: number[] = [];
      for (let i = 0; i < 6; i++) answers.push(await pacer.reserve([bot, chat], 1_000));
      assert.equal(answers[0], 0);
      assert.ok(answers[1]! > 900 && answers[1]! <= 1_000, `the second waits about a second: ${answers[1]}`);
      const backs = answers.slice(2).map((a) => -a);
      for (let i = 0; i < backs.length; i++) {
        assert.ok(Math.abs(backs[i]! - (2_000 + 1_000 * i)) < 100, `refused sends come back a second apart: ${backs.join(', ')}`);
      }
      const other = await pacer.reserve([bot, { key: 'chat:b', intervalMs: 1_000 }], 1_000);
      assert.ok(other >= 0 && other <= 35, `another chat of the bot is not held behind chat a: ${other}`);
    } finally {
      const keys = await redis.keys(`${keyPrefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
  });

  it(`a chat with many notes in line does not hold the worker's slots: another chat's note goes before the line is through (${STORAGE_LABEL})`, async () => {
    const fake = await startTelegramApi();
    fake.enforceFloodLimits({ perChatMs: 500, perBotPerSecond: 30 });
    try {
      // Two slots: with notes allowed to wait up to 10 s for their chat, the busy chat's notes held both
      // asleep and the other chat's note went out only after about six of them.
      // Both slots may go to this one account (WORKER_ACCOUNT_SHARE=100): what is tested is the pacing's
      // hand-back, not the share of slots between accounts (test/fairness.test.ts).
      const app = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot, WORKER_CONCURRENCY: '2', WORKER_ACCOUNT_SHARE: '100' } });
      try {
        const account = await app.createAccount({ plan: 'growth' });
        const ids: string[] = [];
        for (let i = 0; i < 8; i++) {
          const res = await app.send(account.liveKey, { ...defaultSendBody('telegram', app.voiceUrl), recipient: '320000001' });
          assert.equal(res.statusCode, 202, res.body);
          ids.push(res.json().id);
        }
        const other = await app.send(account.liveKey, { ...defaultSendBody('telegram', app.voiceUrl), recipient: '320000002' });
        assert.equal(other.statusCode, 202, other.body);
        ids.push(other.json().id);
        for (const id of ids) {
          const status = await app.waitForStatus(account.liveKey, id, ['delivered', 'failed'], 60_000);
          assert.equal(status.status, 'delivered', JSON.stringify(status));
        }
        const order = fake.calls.map((c) => c.chatId);
        // The busy chat's third note cannot go before 2 s (one a second); the other chat's went before it.
        assert.ok(order.indexOf('320000002') <= 2, `the other chat's note went among the first three calls: ${order.join(', ')}`);
        assert.equal(fake.floodRefusals, 0, 'Telegram never had to refuse a send for flooding');
        assert.equal(fake.callsForChat('320000001').length, 8, 'eight calls for the busy chat: none was retried after a 429');
      } finally {
        await app.close();
      }
    } finally {
      await fake.close();
    }
  });

  it('a wait for a slot ends at once when the attempt is aborted (a shutdown, a lost lease): nothing is sent, the message goes back as not attempted', { timeout: 20_000 }, async () => {
    const fake = await startTelegramApi();
    try {
      // A slot a minute away that the adapter may wait for: only the abort can end the wait within the test's time.
      let asked!: () => void;
      const reserved = new Promise<void>((resolve) => (asked = resolve));
      const pacer: SlotPacer = {
        async reserve() {
          asked();
          return 60_000;
        },
      };
      const adapter = createTelegramAdapter({ apiRoot: fake.apiRoot, pacer, maxPaceWaitMs: 120_000 });
      const controller = new AbortController();
      const job: DeliveryJob = {
        messageId: 'msg_abort_while_paced',
        accountId: 'acct_1',
        env: 'live',
        platform: 'telegram',
        recipient: '330000001',
        session: { platform: 'telegram', bot_token: TELEGRAM_TOKEN } as unknown as DeliveryJob['session'],
        caption: null,
        audio: { path: '/nonexistent/voice.ogg', mimeType: 'audio/ogg', fileName: 'voice.ogg', sizeBytes: 1, durationSeconds: 1, waveform: new Uint8Array(64) },
        attempt: 1,
        signal: controller.signal,
      };
      const delivery = adapter.deliver(job);
      await reserved;
      controller.abort(new Error('shutting down'));
      await assert.rejects(delivery, (error: unknown) => {
        assert.ok(error instanceof DeliveryError, String(error));
        assert.equal(error.notAttempted, true);
        assert.equal(error.transient, true);
        return true;
      });
      assert.equal(fake.calls.length, 0, 'nothing reached Telegram');
    } finally {
      await fake.close();
    }
  });
});
