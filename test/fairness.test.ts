import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { AccountSlots, accountCap, EARNED_FOR_MS, pickFairly, QUICK_MS } from '../src/delivery/fair-share.js';
import { MessageClaims } from '../src/delivery/claim.js';
import { claimDueMessagesFairly, type MessageRow } from '../src/store/messages.js';
import { startWebhookReceiver } from './fakes/webhook-receiver.js';
import { sharedFixtures, testFfmpegPath } from './fixtures/audio-fixtures.js';
import { closeSharedAudio, connectedSandboxSession, defaultSendBody, STORAGE_LABEL, startTestApp, type TestApp } from './fixtures/app-harness.js';

/**
 * No account takes another's turn: a worker's slots and a webhook sender's are claimed round-robin
 * across accounts (and across the senders of one account), one account holds at most its share of
 * them, one endpoint at most its own few, and an endpoint that never answers is left alone for a while
 * (its deliveries wait, none is dropped). Each test here would wait behind the misbehaving account's
 * timeouts (30 s for audio, 60 s for webhooks) with a first-in-first-out claim.
 */

after(async () => {
  await closeSharedAudio();
});

const ENDPOINTS = '/api/v1/webhook_endpoints';

describe('the fair pick (unit)', () => {
  it('caps an account at its share of the slots, at least one', () => {
    assert.equal(accountCap(32, 75), 24);
    assert.equal(accountCap(4, 75), 3);
    assert.equal(accountCap(1, 75), 1);
    assert.equal(accountCap(8, 100), 8);
    // Rounded down, never up: a share of 75 % of a few slots leaves at least one for everyone else.
    for (const [slots, cap] of [[2, 1], [3, 2], [5, 3], [6, 4], [7, 5]] as const) assert.equal(accountCap(slots, 75), cap, `accountCap(${slots}, 75)`);
  });

  it('goes round-robin across accounts, then across the senders of one account', () => {
    const candidates = [
      ...['a1', 'a2', 'a3', 'a4'].map((id) => ({ id, account: 'A', sender: 's1' })),
      { id: 'a5', account: 'A', sender: 's2' },
      { id: 'b1', account: 'B', sender: 's3' },
    ];
    assert.deepEqual(pickFairly(candidates, { limit: 3, slots: 8, capOf: () => 6, inHand: new Map() }), ['a1', 'b1', 'a5']);
  });

  it('gives an account holding more than its fair share nothing while another waits, and fills idle slots up to the hard cap', () => {
    const candidates = [
      { id: 'a1', account: 'A', sender: 's' },
      { id: 'a2', account: 'A', sender: 's' },
      { id: 'b1', account: 'B', sender: 't' },
    ];
    // A holds 4 of 8 (its fair share with B waiting): B first; the leftover slots go to A up to its cap of 6.
    assert.deepEqual(pickFairly(candidates, { limit: 3, slots: 8, capOf: () => 6, inHand: new Map([['A', 4]]) }), ['b1', 'a1', 'a2']);
    assert.deepEqual(pickFairly(candidates, { limit: 3, slots: 8, capOf: () => 6, inHand: new Map([['A', 5]]) }), ['b1', 'a1']);
  });

  it('lets an account earn slots beyond its share with attempts that end quickly, up to all but the reserve', () => {
    let now = 1_000_000;
    const slots = new AccountSlots(32, 75, () => now);
    assert.equal(slots.capOf('A'), 24);
    // A slow end (past QUICK_MS) earns nothing.
    slots.take('A');
    now += QUICK_MS + 1;
    slots.release('A', now - QUICK_MS - 1);
    assert.equal(slots.capOf('A'), 24);
    // Quick ends earn one slot each, up to 31 of 32 (one reserved), and only for EARNED_FOR_MS.
    for (let i = 0; i < 20; i++) {
      slots.take('A');
      slots.release('A', now - 10);
    }
    assert.equal(slots.capOf('A'), 31);
    assert.equal(slots.capOf('B'), 24);
    now += EARNED_FOR_MS + 1;
    assert.equal(slots.capOf('A'), 24);
    // A share of 100 % is every slot, with no reserve.
    assert.equal(new AccountSlots(32, 100, () => now).capOf('A'), 32);
    const held = new AccountSlots(8, 75, () => now);
    for (let i = 0; i < 6; i++) held.take('A');
    assert.deepEqual(held.full(), ['A']);
  });

  it('respects a per-sender cap', () => {
    const candidates = ['e1', 'e2', 'e3'].map((id) => ({ id, account: 'A', sender: 'endpoint' }));
    assert.deepEqual(pickFairly(candidates, { limit: 3, slots: 8, capOf: () => 8, inHand: new Map(), senderCap: 2, senderInHand: new Map([['endpoint', 1]]) }), ['e1']);
  });
});

describe(`fair claims (${STORAGE_LABEL})`, () => {
  it('claims across accounts and across the senders of one account, not first in first out', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount();
      const b = await t.createAccount();
      const sessionA1 = await connectedSandboxSession(t, a.testKey);
      const sessionA2 = await connectedSandboxSession(t, a.testKey);
      const send = async (key: string, session: string) => {
        const res = await t.send(key, defaultSendBody('whatsapp', t.voiceUrl, session));
        assert.equal(res.statusCode, 202, res.body);
        return res.json().id as string;
      };
      const firstSender = [];
      for (let i = 0; i < 5; i++) firstSender.push(await send(a.testKey, sessionA1));
      const secondSender = await send(a.testKey, sessionA2);
      const sessionB = await connectedSandboxSession(t, b.testKey);
      const otherAccount = await send(b.testKey, sessionB);
      const { db } = t.app.services;
      const { claimed } = await claimDueMessagesFairly(db.kysely, db.dialect, 'worker_test', {
        limit: 3,
        leaseMs: 60_000,
        excludeAccounts: [],
        window: 64,
        pick: (candidates) => pickFairly(candidates.map((c) => ({ id: c.id, account: c.account_id, sender: c.sender })), { limit: 3, slots: 3, capOf: () => 3, inHand: new Map() }),
      });
      // First in first out would have taken the first sender's three oldest.
      assert.deepEqual(claimed.map((m: MessageRow) => m.id).sort(), [firstSender[0], secondSender, otherAccount].sort());
      assert.ok(claimed.every((m) => m.status === 'processing' && m.lease_owner === 'worker_test'));
      // An account left out (at its cap in the worker) is read past.
      const next = await claimDueMessagesFairly(db.kysely, db.dialect, 'worker_test', {
        limit: 3,
        leaseMs: 60_000,
        excludeAccounts: [a.accountId],
        window: 64,
        pick: (candidates) => candidates.map((c) => c.id),
      });
      assert.deepEqual(next.claimed, []);
    } finally {
      await t.close();
    }
  });

  it('looks again soon, not at the slow pace of a capped worker, once queued work falls due', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount();
      for (let i = 0; i < 3; i++) {
        const res = await t.send(a.testKey, defaultSendBody('telegram', t.voiceUrl));
        assert.equal(res.statusCode, 202, res.body);
      }
      let now = 1_000_000;
      // 4 slots, an account at most 2 of them: the claim takes 2 of the 3 and leaves 2 slots free.
      const capped = new MessageClaims({ db: t.app.services.db, workerId: 'worker_test', concurrency: 4, accountSharePercent: 50, leaseMs: 60_000, pollMs: 1_000, clock: () => now });
      assert.equal((await capped.claim(4)).claimed.length, 2);
      assert.equal(capped.cappedWaitMs(), 200, 'capped: looks again in 200 ms (or when a batch of slots frees)');
      capped.newWorkDueIn(50);
      now += 30;
      assert.equal(capped.cappedWaitMs(), 170, 'before the work falls due, the slow pace holds');
      assert.equal(capped.due(2, 1), false);
      now += 30;
      assert.equal(capped.cappedWaitMs(), 1, 'once it is due, at once (20 ms after the claim, which has passed)');
      assert.equal(capped.due(2, 1), true);
      // The next claim starts over: no new work is known.
      await capped.claim(2);
      assert.equal(capped.cappedWaitMs(), 200);
    } finally {
      await t.close();
    }
  });

  it("delivers account B's voice note while account A's notes hang on an audio host that never answers", { timeout: 60_000 }, async () => {
    // 4 slots, A may hold 3 of them: with first in first out, A's eight notes would hold all four for the
    // audio fetch's 30 s timeout, and again for the next four. (With 4 slots there are no conversion
    // slots: the default two conversions at once would take all four.)
    await whileAudioHangs({ env: { WORKER_CONCURRENCY: '4' }, hanging: 8, goodNoteBy: 'B', deliveredWithinMs: 25_000 }, async ({ hangingFetches }) => {
      assert.equal(hangingFetches(), 3, 'at most 3 of A\'s were ever fetched');
    });
  });

  it("delivers B's note within 5 s while A's 64 notes, their audio not yet known, hang in the conversion slots' downloads", { timeout: 60_000 }, async () => {
    // The service's defaults on two cores: 64 slots, two conversions at once, so 16 conversion slots.
    // Every note here may need converting (its URL is new to the worker): before, A's first sixteen
    // downloads held every conversion slot for the fetch's 30 s, and B's note waited behind all 64.
    await whileAudioHangs({ env: { WORKER_CONCURRENCY: '64', MAX_CONCURRENT_CONVERSIONS: '2' }, hanging: 64, goodNoteBy: 'B', deliveredWithinMs: 5_000 }, async () => undefined);
  });

  it("delivers a note of the same account within 5 s: a download that hangs leaves its conversion slot after a second", { timeout: 60_000 }, async () => {
    // 8 slots, one conversion at once: 2 conversion slots, of which one account holds at most one.
    // Before, A's hanging download kept it for the fetch's 30 s and A's good note waited behind it.
    await whileAudioHangs({ env: { WORKER_CONCURRENCY: '8', MAX_CONCURRENT_CONVERSIONS: '1' }, hanging: 1, goodNoteBy: 'A', deliveredWithinMs: 5_000 }, async () => undefined);
  });
});

describe(`fair conversion slots (${STORAGE_LABEL})`, () => {
  /** Claims of a worker with 8 slots and 4 conversion slots; notes whose URL has `/new/` may need converting. */
  const claims = (t: TestApp) =>
    new MessageClaims({
      db: t.app.services.db, workerId: 'worker_test', concurrency: 8, accountSharePercent: 75, leaseMs: 60_000, pollMs: 1_000, clock: Date.now,
      conversionSlots: 4, mayConvert: (m) => m.audio_url.includes('/new/'),
    });
  const sendMany = async (t: TestApp, key: string, n: number, path: string) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const res = await t.send(key, defaultSendBody('telegram', t.audio.url(`${path}?n=${i}`)));
      assert.equal(res.statusCode, 202, res.body);
      ids.push(res.json().id);
    }
    return ids;
  };

  it('gives one account at most its share of the conversion slots: another account due later gets the rest', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount();
      const b = await t.createAccount();
      await sendMany(t, a.testKey, 10, '/new/a.ogg');
      const worker = claims(t);
      // Before, A's first four took every conversion slot, and B's note, due later, found none.
      assert.equal((await worker.claim(8)).claimed.length, 3, 'A: 3 of 4 (75 %)');
      const [bNote] = await sendMany(t, b.testKey, 1, '/new/b.ogg');
      assert.deepEqual((await worker.claim(8)).claimed.map((m) => m.id), [bNote]);
    } finally {
      await t.close();
    }
  });

  it('reads past an account at its share of the conversion slots whose notes fill the whole window', async () => {
    const t = await startTestApp({ worker: false });
    try {
      const a = await t.createAccount();
      const b = await t.createAccount();
      // 70 of A's due first: more than the claim reads (64 due messages for 8 free slots).
      await sendMany(t, a.testKey, 70, '/new/a.ogg');
      const [bNote] = await sendMany(t, b.testKey, 1, '/new/b.ogg');
      const { claimed } = await claims(t).claim(8);
      assert.equal(claimed.filter((m) => m.account_id === a.accountId).length, 3);
      assert.deepEqual(claimed.filter((m) => m.account_id === b.accountId).map((m) => m.id), [bNote]);
    } finally {
      await t.close();
    }
  });
});

/**
 * Account A's `hanging` notes wait on an audio host that accepts and never answers; then a note of
 * `goodNoteBy` ('A' again, or another account 'B') whose audio, new to the worker too, is served at
 * once must be delivered within `deliveredWithinMs`, while every one of A's hanging notes still waits.
 */
async function whileAudioHangs(
  scene: { env: Record<string, string>; hanging: number; goodNoteBy: 'A' | 'B'; deliveredWithinMs: number },
  then: (seen: { hangingFetches: () => number }) => Promise<void>,
): Promise<void> {
  const t = await startTestApp({ env: { SHUTDOWN_GRACE_MS: '0', ...scene.env } });
  try {
    t.audio.route('/never.ogg', { kind: 'stall', beforeHeaders: true });
    const a = await t.createAccount();
    const hanging: string[] = [];
    for (let i = 0; i < scene.hanging; i++) {
      const res = await t.send(a.testKey, defaultSendBody('telegram', t.audio.url(`/never.ogg?n=${i}`)));
      assert.equal(res.statusCode, 202, res.body);
      hanging.push(res.json().id);
    }
    const goodKey = scene.goodNoteBy === 'A' ? a.testKey : (await t.createAccount()).testKey;
    const res = await t.send(goodKey, defaultSendBody('telegram', t.voiceUrl));
    assert.equal(res.statusCode, 202, res.body);
    const delivered = await t.waitForStatus(goodKey, res.json().id, ['delivered', 'failed'], scene.deliveredWithinMs);
    assert.equal(delivered.status, 'delivered');
    // A's are all still waiting on their audio: none has been settled.
    for (const id of hanging) {
      const status = (await t.request({ method: 'GET', url: `/api/v1/status/${id}`, key: a.testKey })).json();
      assert.ok(status.status === 'queued' || status.status === 'processing', JSON.stringify(status));
    }
    await then({ hangingFetches: () => t.audio.requests.filter((r) => r.path.startsWith('/never.ogg')).length });
  } finally {
    await t.close();
  }
}

describe(`slots earned by quick work (${STORAGE_LABEL})`, () => {
  it('lets a lone account whose notes go through quickly use every slot but the reserve, which stays free for another account', { timeout: 60_000 }, async () => {
    // 8 slots: A's share is 6, the reserve 1. A's notes wait on the audio host until the test lets them go.
    // Their URLs are new to the worker, so they count as notes that may need converting: with 4
    // conversions at once, those may hold all 8 slots (conversion-slots.test.ts tests that bound).
    const t = await startTestApp({ env: { WORKER_CONCURRENCY: '8', MAX_CONCURRENT_CONVERSIONS: '4', SHUTDOWN_GRACE_MS: '0' } });
    const fixtures = await sharedFixtures(await testFfmpegPath());
    const voice = { kind: 'file' as const, path: fixtures['voice.ogg'], contentType: 'audio/ogg' };
    const gate = () => {
      let open!: () => void;
      const until = new Promise<void>((resolve) => (open = resolve));
      return { until, open };
    };
    const fetched = () => t.audio.requests.filter((r) => r.path === '/held.ogg').length;
    const waitForFetches = async (n: number) => {
      const deadline = Date.now() + 20_000;
      while (fetched() < n) {
        assert.ok(Date.now() < deadline, `${fetched()} of ${n} fetches`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    try {
      const first = gate();
      t.audio.route('/held.ogg', { kind: 'held', until: first.until, then: voice });
      const a = await t.createAccount();
      const b = await t.createAccount();
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) {
        const res = await t.send(a.testKey, defaultSendBody('telegram', t.audio.url(`/held.ogg?n=${i}`)));
        assert.equal(res.statusCode, 202, res.body);
        ids.push(res.json().id);
      }
      // Nothing of A's has ended yet: its share, 6.
      await waitForFetches(6);
      // The next fetches are held too; the first six go through at once.
      const second = gate();
      t.audio.route('/held.ogg', { kind: 'held', until: second.until, then: voice });
      first.open();
      // Six quick ends earned A one slot more than its share: 7 at once (a hard 75 % would stop at 6).
      await waitForFetches(6 + 7);
      // The eighth slot is the reserve: B's note goes through it while A's seven wait.
      const res = await t.send(b.testKey, defaultSendBody('telegram', t.voiceUrl));
      assert.equal(res.statusCode, 202, res.body);
      const delivered = await t.waitForStatus(b.testKey, res.json().id, ['delivered', 'failed'], 20_000);
      assert.equal(delivered.status, 'delivered');
      assert.equal(fetched(), 13);
      second.open();
      for (const id of ids) assert.equal((await t.waitForStatus(a.testKey, id, ['delivered', 'failed'], 30_000)).status, 'delivered');
    } finally {
      await t.close();
    }
  });
});

describe(`fair webhooks (${STORAGE_LABEL})`, () => {
  async function endpoint(t: Awaited<ReturnType<typeof startTestApp>>, key: string, url: string): Promise<string> {
    const res = await t.request({ method: 'POST', url: ENDPOINTS, key, body: { url, events: ['voice_note.delivered'] } });
    assert.equal(res.statusCode, 201, res.body);
    return res.json().id;
  }
  async function testEvent(t: Awaited<ReturnType<typeof startTestApp>>, key: string, id: string): Promise<void> {
    const res = await t.request({ method: 'POST', url: `${ENDPOINTS}/${id}/test`, key, body: {} });
    assert.equal(res.statusCode, 202, res.body);
  }

  it("sends account B's webhook while account A's endpoints never answer, A holding at most its share and each endpoint at most two", { timeout: 60_000 }, async () => {
    const dead = await startWebhookReceiver();
    dead.fallback = 'hang';
    const alive = await startWebhookReceiver();
    const t = await startTestApp({ worker: false, webhooks: { concurrency: 4, timeoutMs: 60_000, pollMs: 100 } });
    try {
      const a = await t.createAccount();
      const b = await t.createAccount();
      // One endpoint of A gets three events (at most two at once), three more get one each.
      const first = await endpoint(t, a.testKey, dead.url('/a0'));
      for (let i = 0; i < 3; i++) await testEvent(t, a.testKey, first);
      for (let i = 1; i <= 3; i++) await testEvent(t, a.testKey, await endpoint(t, a.testKey, dead.url(`/a${i}`)));
      await dead.waitFor(3);
      await testEvent(t, b.testKey, await endpoint(t, b.testKey, alive.url('/b')));
      const [hook] = await alive.waitFor(1, undefined, 20_000);
      assert.equal(hook!.path, '/b');
      // A holds 3 of the 4 slots (75 %), never more, and its first endpoint at most 2 of them.
      assert.equal(dead.received.length, 3);
      assert.ok(dead.received.filter((r) => r.path === '/a0').length <= 2);
    } finally {
      await t.close();
      await dead.close();
      await alive.close();
    }
  });

  it('leaves an endpoint that keeps timing out alone for a while: its deliveries wait (none dropped), others go on', { timeout: 60_000 }, async () => {
    const dead = await startWebhookReceiver();
    dead.fallback = 'hang';
    const alive = await startWebhookReceiver();
    const t = await startTestApp({
      worker: false,
      webhooks: { timeoutMs: 300, pollMs: 100, retryDelaysMs: [20, 20, 20, 20, 20], breaker: { threshold: 2, baseMs: 60_000 } },
    });
    try {
      const a = await t.createAccount();
      const silent = await endpoint(t, a.testKey, dead.url('/silent'));
      for (let i = 0; i < 5; i++) await testEvent(t, a.testKey, silent);
      // Two tries at once (its own concurrency), both time out: the circuit opens.
      const deadline = Date.now() + 20_000;
      for (;;) {
        const list = (await t.request({ method: 'GET', url: `${ENDPOINTS}/${silent}/deliveries`, key: a.testKey })).json().data as any[];
        if (list.filter((d) => d.answers.length > 0).length >= 2) break;
        assert.ok(Date.now() < deadline, JSON.stringify(list));
        await new Promise((r) => setTimeout(r, 50));
      }
      // The same account's other endpoint is served meanwhile.
      await testEvent(t, a.testKey, await endpoint(t, a.testKey, alive.url('/other')));
      await alive.waitFor(1, undefined, 20_000);
      await new Promise((r) => setTimeout(r, 500));
      // Without the breaker, the 20 ms retries would have tried the silent endpoint again and again.
      assert.equal(dead.received.length, 2);
      const list = (await t.request({ method: 'GET', url: `${ENDPOINTS}/${silent}/deliveries`, key: a.testKey })).json().data as any[];
      assert.equal(list.length, 5);
      assert.ok(
        list.every((d) => d.status === 'pending'),
        JSON.stringify(list.map((d) => d.status)),
      );
    } finally {
      await t.close();
      await dead.close();
      await alive.close();
    }
  });
});
