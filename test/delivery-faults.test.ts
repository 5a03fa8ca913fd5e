import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { closeAll } from './fixtures/close-all.js';
import pino from 'pino';
import { claimDueMessages, MAX_CLAIMS_WITHOUT_OUTCOME, ORPHAN_GRACE_MS } from '../src/store/messages.js';
import { startTelegramApi, type TelegramFake } from './fakes/telegram-api.js';
import { sharedFixtures, testFfmpegPath } from './fixtures/audio-fixtures.js';
import {
  closeSharedAudio,
  defaultSendBody,
  STORAGE_LABEL,
  startTestApp,
  withRestartableStorage,
  type TestAccount,
  type TestApp,
  acceptedMessageId as accepted,
  messageStatus as status,
  storedCredentials as credentialsOf,
} from './fixtures/app-harness.js';

/**
 * Delivery under faults: clocks that disagree, leases lost, shutdowns mid-attempt, messages whose
 * attempts keep dying, audio that cannot be had. Seen through GET /status and what the fake Telegram
 * received (a voice note it answered 200 to is a voice note the recipient got).
 */

after(async () => {
  await closeSharedAudio();
});

/** Voice notes the fake Telegram accepted (answered 200) for a chat: what the recipient got. */
function deliveredTo(fake: TelegramFake, chatId: string): number {
  return fake.callsForChat(chatId).filter((c) => c.reply.status === 200).length;
}

/** A gate the test opens: platform calls held at it have reached the platform but are not read yet. */
function gate(): { wait: Promise<void>; open(): void } {
  let open = (): void => undefined;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

/** A logger that keeps every line, to wait for what the service says it did. */
function capturingLogger(): { logger: pino.Logger; lines: Array<Record<string, unknown>>; saw(msg: RegExp): boolean } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, lines, saw: (msg) => lines.some((l) => msg.test(String(l.msg))) };
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

describe(`one clock (${STORAGE_LABEL})`, () => {
  let fake: TelegramFake;
  before(async () => {
    fake = await startTelegramApi();
  });
  after(async () => {
    await fake.close();
  });

  it('two workers whose clocks disagree by twenty minutes neither send a message twice nor leave one waiting', async () => {
    await withRestartableStorage(async (reuse) => {
      const env = { TELEGRAM_API_ROOT: fake.apiRoot };
      // Ten minutes behind: on its own clock nothing accepted now would be due for ten minutes.
      const slow = await startTestApp({ reuse, env, workerClockOffsetMs: -10 * 60_000, workerLeaseMs: 900 });
      let fast: TestApp | undefined;
      try {
        const account = await slow.createAccount({ rateLimit: 10_000, quota: 10_000 });
        const first = await accepted(slow, account.liveKey, { ...defaultSendBody('telegram', slow.voiceUrl), recipient: '500000001' });
        assert.equal((await slow.waitForStatus(account.liveKey, first, ['delivered', 'failed'])).status, 'delivered');

        // Ten minutes ahead: on its own clock every lease of the other would look long expired.
        fast = await startTestApp({ reuse, env, workerClockOffsetMs: 10 * 60_000, workerLeaseMs: 900 });
        // Each call outlasts a lease several times over: only renewed leases keep the other worker away.
        fake.beforeReadingBody = () => sleep(1_500);
        const chats = ['500000002', '500000003', '500000004', '500000005'];
        // One transient failure: its retry is due in seconds on the shared clock, whoever schedules it.
        fake.failForChat('500000006', { kind: 'server_error' }, 1);
        const ids = [];
        for (const chat of [...chats, '500000006']) ids.push(await accepted(slow, account.liveKey, { ...defaultSendBody('telegram', slow.voiceUrl), recipient: chat }));
        for (const id of ids) assert.equal((await slow.waitForStatus(account.liveKey, id, ['delivered', 'failed'], 30_000)).status, 'delivered');
        for (const chat of [...chats, '500000006']) assert.equal(deliveredTo(fake, chat), 1, `chat ${chat} got exactly one voice note`);
        assert.equal(deliveredTo(fake, '500000001'), 1);
      } finally {
        fake.beforeReadingBody = undefined;
        await fast?.close();
        await slow.close();
      }
    });
  });
});

describe(`a lease is a promise (${STORAGE_LABEL})`, () => {
  let fake: TelegramFake;
  before(async () => {
    fake = await startTelegramApi();
  });
  after(async () => {
    await fake.close();
  });

  it('a worker whose lease was taken stops its platform call and writes nothing over the new holder', async () => {
    const logs = capturingLogger();
    const t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot }, workerLeaseMs: 600, logger: logs.logger });
    const held = gate();
    try {
      const account = await t.createAccount();
      const chat = '510000001';
      let calls = 0;
      fake.beforeReadingBody = async () => {
        calls++;
        if (calls === 1) await held.wait;
      };
      const id = await accepted(t, account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: chat });
      await until('the first platform call', () => calls === 1);
      // Another worker takes the message over while the call is at the platform.
      const db = t.app.services.db.kysely;
      await db.updateTable('messages').set({ lease_owner: 'worker_other', lease_expires_at: Date.now() + 3_600_000 }).where('id', '=', id).execute();
      // The renewal (every lease/3) finds the lease gone and aborts the call; then the platform reads it.
      await until('the worker to give the attempt up', () => logs.saw(/lease lost/));
      // Its connection is closed: the platform, when it gets to the request, finds nobody there.
      await until('the platform to see the worker hang up', () => fake.openConnections === 0);
      held.open();
      await until('the platform to see the aborted call', () => fake.calls.some((c) => c.reply.status === 0));
      const row = await db.selectFrom('messages').select(['lease_owner', 'status']).where('id', '=', id).executeTakeFirstOrThrow();
      assert.equal(row.lease_owner, 'worker_other', 'nothing was written over the other claim');
      assert.equal(row.status, 'processing');
      assert.equal(deliveredTo(fake, chat), 0, 'the call of a worker without its lease never reached the recipient');

      // The other worker "dies": its message is taken back and delivered, once.
      await db.updateTable('messages').set({ lease_owner: null, lease_expires_at: null }).where('id', '=', id).execute();
      t.app.worker?.wake();
      assert.equal((await t.waitForStatus(account.liveKey, id, ['delivered', 'failed'])).status, 'delivered');
      assert.equal(deliveredTo(fake, chat), 1);
    } finally {
      held.open();
      fake.beforeReadingBody = undefined;
      await t.close();
    }
  });
});

describe(`shutdown without duplicates (${STORAGE_LABEL})`, () => {
  let fake: TelegramFake;
  before(async () => {
    fake = await startTelegramApi();
  });
  after(async () => {
    await fake.close();
  });

  it('aborts a platform call that outlasts the grace period before handing the message back; the next process delivers it once', async () => {
    await withRestartableStorage(async (reuse) => {
      const env = { TELEGRAM_API_ROOT: fake.apiRoot, SHUTDOWN_GRACE_MS: '300' };
      const chat = '520000001';
      const held = gate();
      let calls = 0;
      fake.beforeReadingBody = async () => {
        calls++;
        if (calls === 1) await held.wait;
      };
      let account: TestAccount;
      let id: string;
      const first = await startTestApp({ reuse, env });
      try {
        account = await first.createAccount();
        id = await accepted(first, account.liveKey, { ...defaultSendBody('telegram', first.voiceUrl), recipient: chat });
        await until('the platform call', () => calls === 1);
      } finally {
        await first.close();
      }
      // The aborted call never reached the recipient, whenever the platform gets to it.
      held.open();
      await until('the platform to see the aborted call', () => fake.calls.some((c) => c.reply.status === 0));
      assert.equal(deliveredTo(fake, chat), 0);

      const second = await startTestApp({ reuse, env });
      try {
        const message = await second.waitForStatus(account!.liveKey, id!, ['delivered', 'failed']);
        assert.equal(message.status, 'delivered');
        assert.equal(deliveredTo(fake, chat), 1, 'delivered exactly once');
        assert.equal(await credentialsOf(second, id!), null);
      } finally {
        fake.beforeReadingBody = undefined;
        await second.close();
      }
    });
  });
});

describe(`poison messages (${STORAGE_LABEL})`, () => {
  it(`fails a message after ${MAX_CLAIMS_WITHOUT_OUTCOME} claims that ended without an outcome, with platform_error, and erases its credentials`, async () => {
    await withRestartableStorage(async (reuse) => {
      const first = await startTestApp({ worker: false, reuse });
      let account: TestAccount;
      let id: string;
      try {
        account = await first.createAccount();
        id = await accepted(first, account.testKey, defaultSendBody('telegram', first.voiceUrl));
        const { db } = first.app.services;
        // Workers that die mid-attempt, one after another: each claim's lease runs out with no outcome.
        for (let i = 0; i <= MAX_CLAIMS_WITHOUT_OUTCOME; i++) {
          let claimed: unknown[] = [];
          await until(`claim ${i + 1}`, async () => {
            claimed = await claimDueMessages(db.kysely, db.dialect, `worker_dying_${i}`, { limit: 1, leaseMs: 1 });
            return claimed.length === 1;
          }, ORPHAN_GRACE_MS * 3);
        }
      } finally {
        await first.close();
      }
      const second = await startTestApp({ reuse });
      try {
        const message = await second.waitForStatus(account!.testKey, id!, ['delivered', 'failed'], ORPHAN_GRACE_MS * 4);
        assert.equal(message.status, 'failed', JSON.stringify(message));
        assert.equal(message.error.code, 'platform_error');
        assert.equal(await credentialsOf(second, id!), null);
      } finally {
        await second.close();
      }
    });
  });
});

describe(`fail fast when waiting cannot help (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  before(async () => {
    t = await startTestApp();
    account = await t.createAccount({ rateLimit: 10_000, quota: 10_000 });
  });
  after(async () => {
    await t.close();
  });

  async function attemptsOf(id: string): Promise<number> {
    const row = await t.app.services.db.kysely.selectFrom('messages').select('attempts').where('id', '=', id).executeTakeFirstOrThrow();
    return Number(row.attempts);
  }

  it('fails at once, with audio_fetch_failed, when the audio host does not exist', async () => {
    const id = await accepted(t, account.testKey, defaultSendBody('telegram', 'http://no-such-host.invalid/voice.ogg'));
    const message = await t.waitForStatus(account.testKey, id, ['delivered', 'failed']);
    assert.equal(message.status, 'failed');
    assert.equal(message.error.code, 'audio_fetch_failed');
    assert.match(message.error.message, /does not exist/);
    assert.equal(await attemptsOf(id), 1, 'no retry');
  });

  it('fails at once on a 403 and a 410 from the audio host, and retries a 408', async () => {
    t.audio.route('/forbidden.ogg', { kind: 'status', status: 403 });
    t.audio.route('/gone.ogg', { kind: 'status', status: 410 });
    for (const path of ['/forbidden.ogg', '/gone.ogg']) {
      const id = await accepted(t, account.testKey, defaultSendBody('telegram', t.audio.url(path)));
      const message = await t.waitForStatus(account.testKey, id, ['delivered', 'failed']);
      assert.equal(message.error?.code, 'audio_fetch_failed', JSON.stringify(message));
      assert.equal(await attemptsOf(id), 1);
    }
    t.audio.route('/slow-host.ogg', { kind: 'status', status: 408 });
    const id = await accepted(t, account.testKey, defaultSendBody('telegram', t.audio.url('/slow-host.ogg')));
    await until('a second attempt', async () => (await attemptsOf(id)) >= 2);
  });

  it('fails a file that is not audio with audio_unsupported, at once', async () => {
    t.audio.route('/page.html', { kind: 'bytes', body: '<html><body>not audio</body></html>', contentType: 'text/html' });
    const id = await accepted(t, account.testKey, defaultSendBody('telegram', t.audio.url('/page.html')));
    const message = await t.waitForStatus(account.testKey, id, ['delivered', 'failed']);
    assert.equal(message.error?.code, 'audio_unsupported');
    assert.equal(await attemptsOf(id), 1);
  });

  it('reads queued, not processing, while a message waits for its next attempt', async () => {
    t.audio.route('/flaky.ogg', { kind: 'status', status: 503 });
    const id = await accepted(t, account.testKey, defaultSendBody('telegram', t.audio.url('/flaky.ogg')));
    await until('a failed first attempt', async () => {
      const row = await t.app.services.db.kysely.selectFrom('messages').select(['attempts', 'lease_owner']).where('id', '=', id).executeTakeFirstOrThrow();
      return Number(row.attempts) === 1 && row.lease_owner === null;
    });
    const waiting = await status(t, account.testKey, id);
    assert.equal(waiting.status, 'queued');
    assert.equal(waiting.error, null);
    t.audio.route('/flaky.ogg', { kind: 'file', path: (await sharedFixtures(await testFfmpegPath()))['voice.ogg'], contentType: 'audio/ogg' });
    assert.equal((await t.waitForStatus(account.testKey, id, ['delivered', 'failed'])).status, 'delivered');
  });
});

describe(`the file's own length (${STORAGE_LABEL})`, () => {
  let fake: TelegramFake;
  let t: TestApp;
  let account: TestAccount;
  before(async () => {
    fake = await startTelegramApi();
    t = await startTestApp({ env: { TELEGRAM_API_ROOT: fake.apiRoot } });
    account = await t.createAccount({ rateLimit: 10_000, quota: 10_000 });
    const fixtures = await sharedFixtures(await testFfmpegPath());
    t.audio.route('/long-75s.mp3', { kind: 'file', path: fixtures['long-75s.mp3'], contentType: 'audio/mpeg' });
  });
  after(() => closeAll(t, fake));

  it('fails a 75-second file sent to LinkedIn with "duration": 30 as audio_too_long', async () => {
    const id = await accepted(t, account.testKey, { ...defaultSendBody('linkedin', t.audio.url('/long-75s.mp3')), duration: 30 });
    const message = await t.waitForStatus(account.testKey, id, ['delivered', 'failed'], 30_000);
    assert.equal(message.status, 'failed', JSON.stringify(message));
    assert.equal(message.error.code, 'audio_too_long');
  });

  it('tells Telegram the length of a 3-second file sent with "duration": 500', async () => {
    const chat = '530000001';
    const id = await accepted(t, account.liveKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: chat, duration: 500 });
    assert.equal((await t.waitForStatus(account.liveKey, id, ['delivered', 'failed'])).status, 'delivered');
    const calls = fake.callsForChat(chat);
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.duration, '3');
  });
});
