import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
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
              assert.ok(keys.some((k) => k.includes(':pace:telegram:')), `pacing slots live in Redis: ${keys.join(', ')}`);
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
