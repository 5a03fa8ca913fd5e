import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { claimDueMessages, msUntilNextDue, ORPHAN_GRACE_MS, scheduleRetry } from '../src/store/messages.js';
import {
  closeSharedAudio,
  defaultSendBody,
  LINKEDIN_SESSION,
  STORAGE_LABEL,
  startTestApp,
  TELEGRAM_TOKEN,
  withRestartableStorage,
  type TestAccount,
  type TestApp,
  connectedSandboxSession,
  acceptedMessageId as accepted,
  messageStatus as status,
  storedCredentials as credentialsOf,
} from './fixtures/app-harness.js';

/**
 * What happens to a message after the 202: the sandbox outcomes, the worker's status moves, and the
 * promises that nothing accepted is lost (restarts, crashed workers, shutdown) and that credentials
 * do not outlive the message. Seen through GET /status, plus the messages row where the promise is
 * about storage.
 */

const STATUS_FIELDS = ['created_at', 'delivered_at', 'error', 'id', 'platform', 'recipient', 'status'];
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

after(async () => {
  await closeSharedAudio();
});

function assertDelivered(message: any): void {
  assert.deepEqual(Object.keys(message).sort(), STATUS_FIELDS);
  assert.equal(message.status, 'delivered', JSON.stringify(message));
  assert.match(message.delivered_at, ISO_UTC);
  assert.ok(Date.parse(message.delivered_at) >= Date.parse(message.created_at));
  assert.equal(message.error, null);
}

function assertFailed(message: any, code: string): void {
  assert.deepEqual(Object.keys(message).sort(), STATUS_FIELDS);
  assert.equal(message.status, 'failed', JSON.stringify(message));
  assert.equal(message.delivered_at, null);
  assert.deepEqual(Object.keys(message.error).sort(), ['code', 'message']);
  assert.equal(message.error.code, code, JSON.stringify(message));
  assert.equal(typeof message.error.message, 'string');
  assert.ok(message.error.message.length > 0);
}

describe(`sandbox outcomes (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let account: TestAccount;
  let whatsappSession: string;

  before(async () => {
    t = await startTestApp();
    account = await t.createAccount({ rateLimit: 10_000, quota: 10_000 });
    whatsappSession = await connectedSandboxSession(t, account.testKey);
  });

  after(async () => {
    await t?.close();
  });

  // Ten at once is also more than the worker's eight slots: a full worker must keep going.
  it('chooses the outcome by recipient, on telegram and whatsapp alike, and erases credentials once settled', async () => {
    const expected: Record<string, string> = {
      '10000000001': 'failed:session_expired',
      '10000000002': 'failed:recipient_not_found',
      '10000000003': 'failed:platform_error',
      '10000000004': 'delivered',
      '14155550100': 'delivered',
    };
    const sends: Array<{ id: string; platform: string; recipient: string }> = [];
    for (const recipient of Object.keys(expected)) {
      for (const platform of ['telegram', 'whatsapp']) {
        const id = await accepted(t, account.testKey, { ...defaultSendBody(platform, t.voiceUrl, whatsappSession), recipient });
        sends.push({ id, platform, recipient });
      }
    }

    // Poll all of them together (retries back off ~2 s, then ~4 s). Every snapshot along the way
    // must keep the rules: no error before failing for good, no delivered_at before delivery.
    const settled = new Map<string, any>();
    const seen = new Map<string, Set<string>>();
    const deadline = Date.now() + 30_000;
    while (settled.size < sends.length && Date.now() < deadline) {
      for (const { id } of sends) {
        if (settled.has(id)) continue;
        const message = await status(t, account.testKey, id);
        assert.deepEqual(Object.keys(message).sort(), STATUS_FIELDS);
        (seen.get(id) ?? seen.set(id, new Set()).get(id)!).add(message.status);
        if (message.status === 'delivered' || message.status === 'failed') {
          settled.set(id, message);
        } else {
          assert.ok(['queued', 'processing'].includes(message.status), JSON.stringify(message));
          assert.equal(message.error, null, `an unsettled message shows no error: ${JSON.stringify(message)}`);
          assert.equal(message.delivered_at, null);
        }
      }
      await sleep(100);
    }
    assert.equal(settled.size, sends.length, 'every sandbox message settles');

    for (const { id, platform, recipient } of sends) {
      const message = settled.get(id);
      assert.equal(message.platform, platform);
      assert.equal(message.recipient, recipient);
      const outcome = expected[recipient]!;
      if (outcome === 'delivered') assertDelivered(message);
      else assertFailed(message, outcome.slice('failed:'.length));
      assert.equal(await credentialsOf(t, id), null, `credentials of ${id} (${outcome}) are erased once settled`);
    }

    // The usage report counts the outcomes.
    const usage = (await t.request({ method: 'GET', url: '/api/v1/usage', key: account.testKey })).json();
    assert.equal(usage.usage.total_sent, 10);
    assert.equal(usage.usage.total_delivered, 4);
    assert.equal(usage.usage.total_failed, 6);
  });

  it('fails a message whose audio_url answers 404 with audio_fetch_failed', async () => {
    const id = await accepted(t, account.testKey, defaultSendBody('telegram', t.audio.url('/no-such-file.ogg')));
    const message = await t.waitForStatus(account.testKey, id, ['delivered', 'failed']);
    assertFailed(message, 'audio_fetch_failed');
    assert.equal(await credentialsOf(t, id), null);
  });

  it('delivers an mp3 that needs converting, on every platform', async () => {
    const ids = [
      await accepted(t, account.testKey, defaultSendBody('whatsapp', t.mp3Url, whatsappSession)),
      await accepted(t, account.testKey, defaultSendBody('telegram', t.mp3Url)),
      await accepted(t, account.testKey, defaultSendBody('linkedin', t.mp3Url)),
    ];
    for (const id of ids) assertDelivered(await t.waitForStatus(account.testKey, id, ['delivered', 'failed']));
  });
});

describe(`the worker (${STORAGE_LABEL})`, () => {
  it('moves a message queued → processing → delivered, holding the credentials sealed only while it is unsettled', async () => {
    const t = await startTestApp({ env: { SANDBOX_LATENCY_MS: '1500' } });
    try {
      const account = await t.createAccount();
      const res = await t.send(account.testKey, defaultSendBody('telegram', t.voiceUrl));
      assert.equal(res.statusCode, 202, res.body);
      assert.equal(res.json().status, 'queued');
      const id = res.json().id as string;

      const processing = await t.waitForStatus(account.testKey, id, ['processing', 'delivered', 'failed']);
      assert.equal(processing.status, 'processing', 'with 1.5 s of platform latency the message is seen in processing');
      assert.equal(processing.delivered_at, null);
      assert.equal(processing.error, null);

      const sealed = await credentialsOf(t, id);
      assert.equal(typeof sealed, 'string', 'the credentials are kept until the message settles');
      assert.ok(!sealed!.includes(TELEGRAM_TOKEN), 'the bot token is not stored in plain text');
      assert.ok(!sealed!.includes(TELEGRAM_TOKEN.split(':')[1]!), 'nor its secret part');
      assert.ok(!Buffer.from(sealed!, 'base64').toString('latin1').includes(TELEGRAM_TOKEN.split(':')[1]!), 'nor merely base64-encoded');

      const delivered = await t.waitForStatus(account.testKey, id, ['delivered', 'failed']);
      assertDelivered(delivered);
      assert.deepEqual({ ...delivered, delivered_at: null, status: 'queued', error: null }, { ...res.json(), delivered_at: null, error: null });
      assert.equal(await credentialsOf(t, id), null, 'credentials are erased once delivered');
    } finally {
      await t.close();
    }
  });

  it('leaves messages queued while no worker runs, and a worker started later on the same storage delivers them all', async () => {
    await withRestartableStorage(async (reuse) => {
      const first = await startTestApp({ worker: false, reuse });
      let account: TestAccount;
      const ids: string[] = [];
      let failing: string;
      let orphan: string;
      try {
        account = await first.createAccount();
        const session = await connectedSandboxSession(first, account.testKey);
        ids.push(await accepted(first, account.testKey, defaultSendBody('telegram', first.voiceUrl)));
        ids.push(await accepted(first, account.testKey, defaultSendBody('linkedin', first.mp3Url)));
        ids.push(await accepted(first, account.testKey, defaultSendBody('whatsapp', first.voiceUrl, session)));
        failing = await accepted(first, account.testKey, { ...defaultSendBody('telegram', first.voiceUrl), recipient: '10000000002' });
        // A WhatsApp session that disconnects between acceptance and delivery fails its message.
        const dropped = await connectedSandboxSession(first, account.testKey);
        orphan = await accepted(first, account.testKey, defaultSendBody('whatsapp', first.voiceUrl, dropped));
        const res = await first.request({ method: 'POST', url: `/api/v1/whatsapp/sessions/${dropped}/simulate`, key: account.testKey, body: { event: 'disconnect' } });
        assert.equal(res.statusCode, 200, res.body);

        for (const id of [...ids, failing, orphan]) {
          const sealed = await credentialsOf(first, id);
          assert.equal(typeof sealed, 'string');
          for (const secret of [TELEGRAM_TOKEN, LINKEDIN_SESSION.li_at, LINKEDIN_SESSION.csrf_token, session]) {
            assert.ok(!sealed!.includes(secret), 'credentials are sealed at rest');
          }
        }
        // With no worker, nothing moves them on.
        await sleep(700);
        for (const id of [...ids, failing, orphan]) {
          const message = await status(first, account.testKey, id);
          assert.equal(message.status, 'queued');
          assert.equal(message.delivered_at, null);
          assert.equal(message.error, null);
        }
      } finally {
        await first.close();
      }

      const second = await startTestApp({ reuse });
      try {
        for (const id of ids) assertDelivered(await second.waitForStatus(account!.testKey, id, ['delivered', 'failed']));
        assertFailed(await second.waitForStatus(account!.testKey, failing!, ['delivered', 'failed']), 'recipient_not_found');
        assertFailed(await second.waitForStatus(account!.testKey, orphan!, ['delivered', 'failed']), 'session_not_connected');
        for (const id of [...ids, failing!, orphan!]) assert.equal(await credentialsOf(second, id), null);
      } finally {
        await second.close();
      }
    });
  });

  it('takes back the message of a crashed worker once its lease runs out', async () => {
    await withRestartableStorage(async (reuse) => {
      const first = await startTestApp({ worker: false, reuse });
      let account: TestAccount;
      let id: string;
      let leaseExpiresAt: number;
      try {
        account = await first.createAccount();
        id = await accepted(first, account.testKey, defaultSendBody('telegram', first.voiceUrl));
        // A worker claims it, then dies without settling or releasing it.
        const { db } = first.app.services;
        const claimed = await claimDueMessages(db.kysely, db.dialect, 'worker_crashed', { limit: 10, leaseMs: 2_500 });
        assert.deepEqual(
          claimed.map((m) => m.id),
          [id],
        );
        leaseExpiresAt = Number(claimed[0]!.lease_expires_at);
        const message = await status(first, account.testKey, id);
        assert.equal(message.status, 'processing');
      } finally {
        await first.close();
      }

      const second = await startTestApp({ reuse });
      try {
        const message = await second.waitForStatus(account!.testKey, id!, ['delivered', 'failed'], 20_000);
        assertDelivered(message);
        // The live worker left the lease alone while it lasted.
        assert.ok(Date.parse(message.delivered_at) > leaseExpiresAt!, `delivered at ${message.delivered_at}, lease ran to ${new Date(leaseExpiresAt!).toISOString()}`);
        assert.equal(await credentialsOf(second, id!), null);
      } finally {
        await second.close();
      }
    });
  });
});

describe(`when the next message falls due (${STORAGE_LABEL})`, () => {
  it('is the earliest of the queued messages\' due times and the leases of those in hand', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const { db } = t.app.services;
      const account = await t.createAccount();
      const within = (ms: number | undefined, low: number, high: number, what: string) =>
        assert.ok(ms !== undefined && ms >= low && ms <= high, `${what}: ${ms} ms, expected ${low}–${high}`);
      assert.equal(await msUntilNextDue(db.kysely), undefined, 'nothing waits');
      await accepted(t, account.testKey, defaultSendBody('telegram', t.voiceUrl));
      within(await msUntilNextDue(db.kysely), 0, 0, 'a new message is due at once');
      const [first] = await claimDueMessages(db.kysely, db.dialect, 'worker_a', { limit: 1, leaseMs: 30_000 });
      within(await msUntilNextDue(db.kysely), 25_000, 30_000 + ORPHAN_GRACE_MS, 'in hand: due when its lease runs out');
      assert.ok(await scheduleRetry(db.kysely, first!, 'worker_a', { delayMs: 20_000, errorCode: 'platform_error', errorMessage: 'try again' }));
      within(await msUntilNextDue(db.kysely), 15_000, 20_000, 'queued for a retry in 20 s');
      await accepted(t, account.testKey, defaultSendBody('telegram', t.voiceUrl));
      within(await msUntilNextDue(db.kysely), 0, 0, 'a second message, due at once');
      // What a worker whose accounts are capped asks: when work not due yet falls due.
      within(await msUntilNextDue(db.kysely, { later: true }), 15_000, 20_000, 'later: the message due now left out, the retry counted');
      await claimDueMessages(db.kysely, db.dialect, 'worker_b', { limit: 1, leaseMs: 60_000 });
      within(await msUntilNextDue(db.kysely), 15_000, 20_000, 'the retry comes before the lease in hand');
    } finally {
      await t.close();
    }
  });
});

describe(`a changed SECRET_KEY (${STORAGE_LABEL})`, () => {
  it('refuses to start on data sealed under another key', async () => {
    await withRestartableStorage(async (reuse) => {
      const first = await startTestApp({ worker: false, reuse });
      await first.close();
      await assert.rejects(startTestApp({ reuse: { ...reuse, secretKey: randomBytes(32).toString('base64') } }), /SECRET_KEY/);
      // The right key still starts.
      const again = await startTestApp({ worker: false, reuse });
      await again.close();
    });
  });

  it('on a database from before the key check, fails a message whose credentials were sealed under another key with invalid_session, at once', async () => {
    await withRestartableStorage(async (reuse) => {
      const first = await startTestApp({ worker: false, reuse });
      let account: TestAccount;
      let id: string;
      try {
        account = await first.createAccount();
        id = await accepted(first, account.testKey, defaultSendBody('telegram', first.voiceUrl));
        // What a database written before the key check looks like.
        await first.app.services.db.kysely.deleteFrom('instance_settings').execute();
      } finally {
        await first.close();
      }
      const second = await startTestApp({ reuse: { ...reuse, secretKey: randomBytes(32).toString('base64') } });
      try {
        const message = await second.waitForStatus(account!.testKey, id!, ['delivered', 'failed'], 10_000);
        assertFailed(message, 'invalid_session');
        assert.match(message.error.message, /SECRET_KEY/);
        assert.equal(await credentialsOf(second, id!), null);
      } finally {
        await second.close();
      }
    });
  });
});

describe(`graceful shutdown (${STORAGE_LABEL})`, () => {
  it('finishes a delivery in flight before closing', async () => {
    await withRestartableStorage(async (reuse) => {
      const first = await startTestApp({ reuse, env: { SANDBOX_LATENCY_MS: '1000' } });
      let account: TestAccount;
      let id: string;
      try {
        account = await first.createAccount();
        id = await accepted(first, account.testKey, defaultSendBody('telegram', first.voiceUrl));
        assert.equal((await first.waitForStatus(account.testKey, id, ['processing', 'delivered'])).status, 'processing');
      } finally {
        await first.close();
      }
      const second = await startTestApp({ worker: false, reuse });
      try {
        assertDelivered(await status(second, account!.testKey, id!));
      } finally {
        await second.close();
      }
    });
  });

  it('hands back the lease of a delivery still in flight, so the next app delivers it without waiting for the lease to run out', async () => {
    await withRestartableStorage(async (reuse) => {
      // The platform call outlasts the shutdown grace (10 s), and the default lease (2 min) would outlast
      // the test: only a lease handed back at close lets the next app deliver it in time.
      const first = await startTestApp({ reuse, env: { SANDBOX_LATENCY_MS: '12000' } });
      let account: TestAccount;
      let id: string;
      try {
        account = await first.createAccount();
        id = await accepted(first, account.testKey, defaultSendBody('telegram', first.voiceUrl));
        assert.equal((await first.waitForStatus(account.testKey, id, ['processing', 'delivered'])).status, 'processing');
      } finally {
        await first.close();
      }
      const second = await startTestApp({ reuse });
      try {
        assertDelivered(await second.waitForStatus(account!.testKey, id!, ['delivered', 'failed'], 15_000));
        assert.equal(await credentialsOf(second, id!), null);
      } finally {
        await second.close();
      }
    });
  });
});
