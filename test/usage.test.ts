import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import fc from 'fast-check';
import { billingPeriod } from '../src/core/plans.js';
import {
  STORAGE_LABEL,
  closeSharedAudio,
  defaultSendBody,
  startTestApp,
  type InjectResult,
  type TestApp,
  connectedSandboxSession,
} from './fixtures/app-harness.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$/;

const daysInMonth = (year: number, month: number): number => new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
const utcMidnight = (at: Date): number => Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate());
/** Months from January of year 0, so that "the next month" is +1 across years. */
const monthIndex = (at: Date): number => at.getUTCFullYear() * 12 + at.getUTCMonth();

/**
 * The documented billing period, found the slow way: walk back month by month from `now` to the
 * first anchor (the creation day, or the month's last day when the month is shorter) not after it.
 */
function expectedPeriod(createdAt: Date, now: Date): { start: number; end: number } {
  const day = createdAt.getUTCDate();
  const anchor = (index: number): number => {
    const year = Math.floor(index / 12);
    const month = index % 12;
    return Date.UTC(year, month, Math.min(day, daysInMonth(year, month)));
  };
  for (let index = monthIndex(now); ; index--) {
    if (anchor(index) <= now.getTime()) return { start: anchor(index), end: anchor(index + 1) };
  }
}

after(async () => {
  await closeSharedAudio();
});

describe('billingPeriod (properties)', () => {
  // Accounts from 1990 on, "now" up to ten years after creation.
  const creation = fc.date({ min: new Date(Date.UTC(1990, 0, 1)), max: new Date(Date.UTC(2090, 0, 1)), noInvalidDate: true });
  const creationAndNow = creation.chain((createdAt) =>
    fc.tuple(fc.constant(createdAt), fc.integer({ min: 0, max: 10 * 366 * DAY_MS }).map((offset) => new Date(createdAt.getTime() + offset))),
  );
  // Month ends are where mistakes live: bias creation days towards 28..31.
  const monthEndCreation = fc
    .record({ year: fc.integer({ min: 1990, max: 2080 }), month: fc.integer({ min: 0, max: 11 }), day: fc.integer({ min: 28, max: 31 }), ms: fc.integer({ min: 0, max: DAY_MS - 1 }) })
    .filter(({ year, month, day }) => day <= daysInMonth(year, month))
    .map(({ year, month, day, ms }) => new Date(Date.UTC(year, month, day) + ms));
  const monthEndCreationAndNow = monthEndCreation.chain((createdAt) =>
    fc.tuple(fc.constant(createdAt), fc.integer({ min: 0, max: 4 * 366 * DAY_MS }).map((offset) => new Date(createdAt.getTime() + offset))),
  );

  for (const [label, pairs] of [
    ['any creation day', creationAndNow],
    ['creation on the 28th..31st', monthEndCreationAndNow],
  ] as const) {
    it(`contains now: start <= now < end, both at UTC midnight (${label})`, () => {
      fc.assert(
        fc.property(pairs, ([createdAt, now]) => {
          const { start, end } = billingPeriod(createdAt, now);
          assert.ok(start.getTime() <= now.getTime(), `start ${start.toISOString()} <= now ${now.toISOString()}`);
          assert.ok(now.getTime() < end.getTime(), `now ${now.toISOString()} < end ${end.toISOString()}`);
          assert.equal(start.getTime(), utcMidnight(start));
          assert.equal(end.getTime(), utcMidnight(end));
        }),
        { numRuns: 500 },
      );
    });

    it(`starts and ends on the creation day, or the month's last day when the month is shorter (${label})`, () => {
      fc.assert(
        fc.property(pairs, ([createdAt, now]) => {
          const day = createdAt.getUTCDate();
          const { start, end } = billingPeriod(createdAt, now);
          assert.equal(start.getUTCDate(), Math.min(day, daysInMonth(start.getUTCFullYear(), start.getUTCMonth())));
          assert.equal(end.getUTCDate(), Math.min(day, daysInMonth(end.getUTCFullYear(), end.getUTCMonth())));
          assert.equal(monthIndex(end) - monthIndex(start), 1, 'end is the anchor of the month after start');
          const days = (end.getTime() - start.getTime()) / DAY_MS;
          assert.ok(days >= 28 && days <= 31, `a period lasts 28..31 days, got ${days}`);
        }),
        { numRuns: 500 },
      );
    });

    it(`tiles time: end is the next period's start, and every instant of a period maps to it (${label})`, () => {
      fc.assert(
        fc.property(pairs, fc.double({ min: 0, max: 1, noNaN: true }), ([createdAt, now], fraction) => {
          const { start, end } = billingPeriod(createdAt, now);
          const next = billingPeriod(createdAt, end);
          assert.equal(next.start.getTime(), end.getTime());
          assert.ok(next.end.getTime() > next.start.getTime());
          assert.deepEqual(billingPeriod(createdAt, start), { start, end });
          assert.deepEqual(billingPeriod(createdAt, new Date(end.getTime() - 1)), { start, end });
          const inside = new Date(start.getTime() + Math.floor(fraction * (end.getTime() - start.getTime() - 1)));
          assert.deepEqual(billingPeriod(createdAt, inside), { start, end });
        }),
        { numRuns: 500 },
      );
    });

    it(`agrees with walking back month by month (${label})`, () => {
      fc.assert(
        fc.property(pairs, ([createdAt, now]) => {
          const { start, end } = billingPeriod(createdAt, now);
          assert.deepEqual({ start: start.getTime(), end: end.getTime() }, expectedPeriod(createdAt, now));
        }),
        { numRuns: 500 },
      );
    });
  }

  it('the first period begins at midnight UTC of the creation day', () => {
    fc.assert(
      fc.property(creation, (createdAt) => {
        assert.equal(billingPeriod(createdAt, createdAt).start.getTime(), utcMidnight(createdAt));
      }),
    );
  });

  it('anchors an account created on January 31 on the last day of shorter months', () => {
    const jan31 = new Date('2023-01-31T17:45:00Z');
    const cases: Array<[string, string, string]> = [
      ['2023-02-01T00:00:00Z', '2023-01-31T00:00:00.000Z', '2023-02-28T00:00:00.000Z'],
      ['2023-02-28T00:00:00Z', '2023-02-28T00:00:00.000Z', '2023-03-31T00:00:00.000Z'],
      ['2023-03-30T23:59:59Z', '2023-02-28T00:00:00.000Z', '2023-03-31T00:00:00.000Z'],
      ['2023-04-30T12:00:00Z', '2023-04-30T00:00:00.000Z', '2023-05-31T00:00:00.000Z'],
      ['2024-02-29T00:00:00Z', '2024-02-29T00:00:00.000Z', '2024-03-31T00:00:00.000Z'], // leap year
      ['2024-02-28T23:59:59Z', '2024-01-31T00:00:00.000Z', '2024-02-29T00:00:00.000Z'],
      ['2023-12-31T00:00:00Z', '2023-12-31T00:00:00.000Z', '2024-01-31T00:00:00.000Z'],
      ['2024-01-15T00:00:00Z', '2023-12-31T00:00:00.000Z', '2024-01-31T00:00:00.000Z'],
    ];
    for (const [now, start, end] of cases) {
      const period = billingPeriod(jan31, new Date(now));
      assert.deepEqual([period.start.toISOString(), period.end.toISOString()], [start, end], `at ${now}`);
    }
  });

  it('crosses the year: an account created on December 15', () => {
    const period = billingPeriod(new Date('2022-12-15T08:00:00Z'), new Date('2025-01-03T10:00:00Z'));
    assert.deepEqual([period.start.toISOString(), period.end.toISOString()], ['2024-12-15T00:00:00.000Z', '2025-01-15T00:00:00.000Z']);
  });
});

describe(`usage and quotas over HTTP (${STORAGE_LABEL})`, () => {
  let t: TestApp;

  before(async () => {
    // Live sends are accepted and then fail at delivery: point the live platforms at a closed port.
    t = await startTestApp({ env: { TELEGRAM_API_ROOT: 'http://127.0.0.1:9', LINKEDIN_API_ROOT: 'http://127.0.0.1:9' } });
  });
  after(async () => {
    await t.close();
  });

  const usage = (key: string) => t.request({ method: 'GET', url: '/api/v1/usage', key });
  const send = (key: string, platform = 'telegram', extra: Record<string, unknown> = {}) => t.send(key, { ...defaultSendBody(platform, t.voiceUrl), ...extra });
  const usageRemaining = (res: InjectResult): number => Number(res.headers['x-usage-remaining']);

  async function report(key: string): Promise<any> {
    const res = await usage(key);
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(String(res.headers['x-usage-limit']), String(body.limits.monthly_quota), 'X-Usage-Limit agrees with the report');
    assert.equal(usageRemaining(res), body.limits.remaining, 'X-Usage-Remaining agrees with the report');
    return body;
  }

  it('reports the exact shape, all three platforms with zeros, for a new account', async () => {
    const before = Date.now();
    const a = await t.createAccount();
    const body = await report(a.testKey);
    const { period_start, period_end } = body;
    assert.deepEqual(body, {
      plan: 'starter',
      period_start,
      period_end,
      usage: { total_sent: 0, total_delivered: 0, total_failed: 0, by_platform: { linkedin: 0, telegram: 0, whatsapp: 0 } },
      limits: { monthly_quota: 500, remaining: 500, rate_limit_per_minute: 100 },
    });
    assert.match(period_start, ISO_UTC);
    assert.match(period_end, ISO_UTC);
    // Created just now: the period began at midnight UTC today.
    assert.equal(Date.parse(period_start), utcMidnight(new Date(before)));
    assert.ok(Date.parse(period_end) > Date.now());
  });

  it('names each plan with its quota and send rate; enterprise takes the account\'s own numbers', async () => {
    const plans = [
      { options: { plan: 'starter' as const }, plan: 'starter', quota: 500, rate: 100 },
      { options: { plan: 'growth' as const }, plan: 'growth', quota: 2000, rate: 500 },
      { options: { plan: 'scale' as const }, plan: 'scale', quota: 10000, rate: 2000 },
      { options: { plan: 'enterprise' as const, quota: 250_000, rateLimit: 9000 }, plan: 'enterprise', quota: 250_000, rate: 9000 },
    ];
    for (const p of plans) {
      const a = await t.createAccount(p.options);
      for (const key of [a.testKey, a.liveKey]) {
        const body = await report(key);
        assert.equal(body.plan, p.plan);
        assert.deepEqual(body.limits, { monthly_quota: p.quota, remaining: p.quota, rate_limit_per_minute: p.rate });
      }
    }
  });

  it('counts accepted sends by platform, and X-Usage-Remaining goes down with each', async () => {
    const a = await t.createAccount({ plan: 'growth' });
    const sessionId = await connectedSandboxSession(t, a.testKey);
    const remaining: number[] = [];
    for (const platform of ['telegram', 'linkedin', 'telegram', 'whatsapp']) {
      const res = await t.send(a.testKey, defaultSendBody(platform, t.voiceUrl, sessionId));
      assert.equal(res.statusCode, 202, res.body);
      remaining.push(usageRemaining(res));
    }
    assert.deepEqual(remaining, [1999, 1998, 1997, 1996]);
    const body = await report(a.testKey);
    assert.equal(body.usage.total_sent, 4);
    assert.deepEqual(body.usage.by_platform, { linkedin: 1, telegram: 2, whatsapp: 1 });
    assert.equal(body.limits.remaining, 1996);
    // Any later response carries the same count.
    const status = await t.request({ method: 'GET', url: '/api/v1/whatsapp/sessions', key: a.testKey });
    assert.equal(usageRemaining(status), 1996);
  });

  it('counts delivered and failed as the sandbox settles them', async () => {
    const a = await t.createAccount();
    const ids: Record<string, string> = {};
    for (const [name, platform, recipient] of [
      ['ok-telegram', 'telegram', '123456789'],
      ['not-found', 'telegram', '10000000002'],
      ['ok-linkedin', 'linkedin', 'jane-smith-a1b2c3'],
    ] as const) {
      const res = await send(a.testKey, platform, { recipient });
      assert.equal(res.statusCode, 202, res.body);
      ids[name] = res.json().id;
    }
    const failed = await t.waitForStatus(a.testKey, ids['not-found']!, ['delivered', 'failed']);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error.code, 'recipient_not_found');
    assert.equal((await t.waitForStatus(a.testKey, ids['ok-telegram']!, ['delivered', 'failed'])).status, 'delivered');
    assert.equal((await t.waitForStatus(a.testKey, ids['ok-linkedin']!, ['delivered', 'failed'])).status, 'delivered');

    const body = await report(a.testKey);
    assert.deepEqual(body.usage, {
      total_sent: 3,
      total_delivered: 2,
      total_failed: 1,
      by_platform: { linkedin: 1, telegram: 2, whatsapp: 0 },
    });
    // A failed delivery still used its unit: the send was accepted.
    assert.equal(body.limits.remaining, 497);
  });

  it('does not count a send refused for validation (422) or a malformed one (400)', async () => {
    const a = await t.createAccount();
    const refused = [
      await send(a.testKey, 'telegram', { recipient: 'not a chat id' }),
      await send(a.testKey, 'telegram', { caption: 'x', platform: 'linkedin', session: { li_at: 'a', csrf_token: 'ajax:1' }, recipient: 'jane-smith-a1b2c3' }),
      await send(a.testKey, 'whatsapp', { session: { session_id: 'ws_000000000000000000000000' } }),
      await send(a.testKey, 'telegram', { audio_url: 'ftp://example.com/a.mp3' }),
    ];
    for (const res of refused) {
      assert.equal(res.statusCode, 422, res.body);
      assert.equal(usageRemaining(res), 500);
    }
    const malformed = await t.request({ method: 'POST', url: '/api/v1/send', key: a.testKey, body: { platform: 'telegram' } });
    assert.equal(malformed.statusCode, 400, malformed.body);
    const body = await report(a.testKey);
    assert.equal(body.usage.total_sent, 0);
    assert.deepEqual(body.usage.by_platform, { linkedin: 0, telegram: 0, whatsapp: 0 });
    assert.equal(body.limits.remaining, 500);
  });

  it('answers 402 quota_exceeded once the quota is used up, while reads keep working', async () => {
    const a = await t.createAccount({ quota: 2 });
    const first = await send(a.testKey);
    assert.equal(first.statusCode, 202, first.body);
    assert.equal(usageRemaining(first), 1);
    const second = await send(a.testKey, 'linkedin');
    assert.equal(second.statusCode, 202, second.body);
    assert.equal(usageRemaining(second), 0);

    for (const platform of ['telegram', 'linkedin']) {
      const refused = await send(a.testKey, platform);
      assert.equal(refused.statusCode, 402, refused.body);
      const body = refused.json();
      assert.deepEqual(Object.keys(body), ['error']);
      assert.equal(body.error.code, 'quota_exceeded');
      assert.equal(typeof body.error.message, 'string');
      assert.ok('details' in body.error);
      assert.equal(String(refused.headers['x-usage-limit']), '2');
      assert.equal(usageRemaining(refused), 0);
    }

    const report402 = await report(a.testKey);
    assert.equal(report402.usage.total_sent, 2, 'refused sends are not counted');
    assert.equal(report402.limits.remaining, 0);
    const status = await t.request({ method: 'GET', url: `/api/v1/status/${first.json().id}`, key: a.testKey });
    assert.equal(status.statusCode, 200, status.body);
    assert.equal(status.json().id, first.json().id);
    assert.equal(usageRemaining(status), 0);
    // POST /whatsapp/sessions is not a voice note: it does not spend the quota and is not refused for it.
    const session = await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: a.testKey });
    assert.equal(session.statusCode, 201, session.body);
  });

  it('never lets concurrent sends take more than the quota', async () => {
    const a = await t.createAccount({ quota: 3 });
    const results = await Promise.all(Array.from({ length: 8 }, () => send(a.testKey)));
    const statuses = results.map((res) => res.statusCode).sort();
    assert.deepEqual(statuses, [202, 202, 202, 402, 402, 402, 402, 402]);
    const body = await report(a.testKey);
    assert.equal(body.usage.total_sent, 3);
    assert.equal(body.limits.remaining, 0);
  });

  it('counts live and test usage apart, each with the plan\'s quota', async () => {
    const a = await t.createAccount({ quota: 1 });
    assert.equal((await send(a.testKey)).statusCode, 202);
    assert.equal((await send(a.testKey)).statusCode, 402);

    // The sandbox quota is used up; the live one is untouched.
    const liveBefore = await report(a.liveKey);
    assert.equal(liveBefore.usage.total_sent, 0);
    assert.equal(liveBefore.limits.remaining, 1);
    const live = await send(a.liveKey, 'linkedin');
    assert.equal(live.statusCode, 202, live.body);
    assert.equal(usageRemaining(live), 0);
    assert.equal((await send(a.liveKey, 'linkedin')).statusCode, 402);

    const liveAfter = await report(a.liveKey);
    assert.equal(liveAfter.usage.total_sent, 1);
    assert.deepEqual(liveAfter.usage.by_platform, { linkedin: 1, telegram: 0, whatsapp: 0 });
    const sandbox = await report(a.testKey);
    assert.equal(sandbox.usage.total_sent, 1);
    assert.deepEqual(sandbox.usage.by_platform, { linkedin: 0, telegram: 1, whatsapp: 0 });
    assert.equal(liveAfter.period_start, sandbox.period_start);

    // Another account's usage is its own.
    const other = await t.createAccount({ quota: 1 });
    assert.equal((await report(other.testKey)).usage.total_sent, 0);
    assert.equal((await send(other.testKey)).statusCode, 202);
  });

  it('uses a monthly period from the creation day: an account created on a 31st is anchored on shorter months\' last day', async () => {
    const now = new Date();
    // A 31st some years back, at an afternoon hour: only the day counts.
    const createdAt = new Date(Date.UTC(now.getUTCFullYear() - 2, 0, 31, 15, 42, 7));
    const a = await t.createAccount({ createdAt: createdAt.getTime() });
    const body = await report(a.testKey);
    const start = Date.parse(body.period_start);
    const end = Date.parse(body.period_end);
    const checkedAt = Date.now();
    assert.ok(start <= checkedAt && checkedAt < end, `${body.period_start} <= now < ${body.period_end}`);
    assert.deepEqual({ start, end }, expectedPeriod(createdAt, new Date(checkedAt)));
    const startDate = new Date(start);
    assert.equal(startDate.getUTCDate(), daysInMonth(startDate.getUTCFullYear(), startDate.getUTCMonth()), 'anchored on the last day of the month');
    assert.equal(start, utcMidnight(startDate));
  });

  it('puts the period boundary on the creation day: accounts created 1, 20 and 400 days ago', async () => {
    const now = Date.now();
    for (const createdAt of [new Date(now - DAY_MS), new Date(now - 20 * DAY_MS), new Date(now - 400 * DAY_MS)]) {
      const a = await t.createAccount({ createdAt: createdAt.getTime() });
      const body = await report(a.testKey);
      const expected = expectedPeriod(createdAt, new Date());
      assert.equal(body.period_start, new Date(expected.start).toISOString(), `created ${createdAt.toISOString()}`);
      assert.equal(body.period_end, new Date(expected.end).toISOString(), `created ${createdAt.toISOString()}`);
    }
    // Created yesterday: the period began yesterday at midnight UTC (yesterday is never past today's anchor).
    const yesterday = new Date(now - DAY_MS);
    const a = await t.createAccount({ createdAt: yesterday.getTime() });
    assert.equal(Date.parse((await report(a.testKey)).period_start), utcMidnight(yesterday));
  });
});
