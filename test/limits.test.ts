import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import {
  STORAGE_LABEL,
  TEST_REDIS_URL,
  closeSharedAudio,
  defaultSendBody,
  startTestApp,
  withRestartableStorage,
  type InjectResult,
  type TestApp,
  assertErrorEnvelope,
} from './fixtures/app-harness.js';

// docs/api.md, "Limits": per-key send bucket by plan, a read bucket of 1,000, a per-IP bucket
// for requests without a valid key (its size is UNAUTHENTICATED_REQUESTS_PER_MINUTE in src/core/plans.ts).
const READ_LIMIT = 1000;
const IP_LIMIT = 300;
const LIMITER = TEST_REDIS_URL ? 'redis' : 'memory';

const header = (res: InjectResult, name: string): string | undefined => {
  const value = res.headers[name.toLowerCase()];
  return value === undefined ? undefined : String(value);
};
const intHeader = (res: InjectResult, name: string): number => {
  const value = header(res, name);
  assert.ok(value !== undefined, `${name} is missing (status ${res.statusCode}: ${res.body})`);
  assert.match(value, /^\d+$/, `${name} is a non-negative integer, got ${value}`);
  return Number(value);
};

/** The three rate-limit headers, checked for the bucket the request should have used. */
function assertRateHeaders(res: InjectResult, limit: number): { remaining: number; reset: number } {
  const nowSeconds = Date.now() / 1000;
  assert.equal(intHeader(res, 'X-RateLimit-Limit'), limit, `X-RateLimit-Limit (status ${res.statusCode})`);
  const remaining = intHeader(res, 'X-RateLimit-Remaining');
  assert.ok(remaining <= limit, `remaining ${remaining} <= limit ${limit}`);
  const reset = intHeader(res, 'X-RateLimit-Reset');
  assert.ok(reset > nowSeconds - 1, `X-RateLimit-Reset ${reset} is a unix time in the future (now ${nowSeconds})`);
  assert.ok(reset <= Math.ceil(nowSeconds) + 60, `X-RateLimit-Reset ${reset} is at most one 60 s window away (now ${nowSeconds})`);
  return { remaining, reset };
}

function assertUsageHeaders(res: InjectResult, limit: number, remaining?: number): void {
  assert.equal(intHeader(res, 'X-Usage-Limit'), limit, `X-Usage-Limit (status ${res.statusCode})`);
  const left = intHeader(res, 'X-Usage-Remaining');
  if (remaining !== undefined) assert.equal(left, remaining, `X-Usage-Remaining (status ${res.statusCode})`);
}

function assertRateLimited(res: InjectResult, limit: number): void {
  const error = assertErrorEnvelope(res, 429, 'rate_limited');
  const { remaining, reset } = assertRateHeaders(res, limit);
  assert.equal(remaining, 0);
  const retryAfter = intHeader(res, 'Retry-After');
  assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter} is 1..60 s`);
  assert.deepEqual(error.details, { limit, window: '1m', retry_after: retryAfter });
  // Retry-After and X-RateLimit-Reset tell the same time (give or take the second boundaries).
  const untilReset = reset - Date.now() / 1000;
  assert.ok(Math.abs(untilReset - retryAfter) <= 2, `Retry-After ${retryAfter} agrees with X-RateLimit-Reset (${untilReset.toFixed(1)} s away)`);
}

const unknownMessage = 'msg_000000000000000000000000';

after(async () => {
  await closeSharedAudio();
});

describe(`rate limits (${STORAGE_LABEL}, ${LIMITER} limiter)`, () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp();
  });
  after(async () => {
    await t.close();
  });

  const send = (key: string, headers?: Record<string, string>) => t.send(key, defaultSendBody('telegram', t.voiceUrl), headers);
  const usage = (key: string) => t.request({ method: 'GET', url: '/api/v1/usage', key });

  it('puts the rate-limit and usage headers on every kind of answer, for the bucket the request used', async () => {
    const a = await t.createAccount({ quota: 1 });

    const sent = await send(a.testKey);
    assert.equal(sent.statusCode, 202, sent.body);
    assertRateHeaders(sent, 100);
    assertUsageHeaders(sent, 1, 0);

    const cases: Array<{ name: string; res: InjectResult; status: number; limit: number }> = [
      { name: 'GET /usage', res: await usage(a.testKey), status: 200, limit: READ_LIMIT },
      { name: 'GET /status', res: await t.request({ method: 'GET', url: `/api/v1/status/${sent.json().id}`, key: a.testKey }), status: 200, limit: READ_LIMIT },
      { name: 'GET /status unknown id', res: await t.request({ method: 'GET', url: `/api/v1/status/${unknownMessage}`, key: a.testKey }), status: 404, limit: READ_LIMIT },
      { name: 'unknown route', res: await t.request({ method: 'GET', url: '/api/v1/no-such-route', key: a.testKey }), status: 404, limit: READ_LIMIT },
      { name: 'GET /whatsapp/sessions', res: await t.request({ method: 'GET', url: '/api/v1/whatsapp/sessions', key: a.testKey }), status: 200, limit: READ_LIMIT },
      { name: 'POST /send over quota', res: await send(a.testKey), status: 402, limit: 100 },
      {
        name: 'POST /send invalid recipient',
        res: await t.send(a.testKey, { ...defaultSendBody('telegram', t.voiceUrl), recipient: 'not a chat id' }),
        status: 422,
        limit: 100,
      },
      { name: 'POST /send malformed JSON', res: await t.request({ method: 'POST', url: '/api/v1/send', key: a.testKey, payload: '{"platform":', headers: { 'content-type': 'application/json' } }), status: 400, limit: 100 },
      { name: 'POST /whatsapp/sessions', res: await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: a.testKey }), status: 201, limit: 100 },
    ];
    for (const c of cases) {
      assert.equal(c.res.statusCode, c.status, `${c.name}: ${c.res.body}`);
      assertRateHeaders(c.res, c.limit);
      assertUsageHeaders(c.res, 1, 0);
    }
    // The 402 is the product's answer to a used-up quota, in the error envelope.
    assertErrorEnvelope(cases.find((c) => c.status === 402)!.res, 402, 'quota_exceeded');
  });

  it('X-RateLimit-Remaining counts down by one per request, in each bucket independently', async () => {
    const a = await t.createAccount({ rateLimit: 10 });
    const reads: number[] = [];
    for (let i = 0; i < 3; i++) reads.push(assertRateHeaders(await usage(a.testKey), READ_LIMIT).remaining);
    assert.deepEqual(reads, [READ_LIMIT - 1, READ_LIMIT - 2, READ_LIMIT - 3]);

    const sends: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await send(a.testKey);
      assert.equal(res.statusCode, 202, res.body);
      sends.push(assertRateHeaders(res, 10).remaining);
    }
    assert.deepEqual(sends, [9, 8, 7], 'reads did not draw from the send bucket');

    // POST /whatsapp/sessions draws from the send bucket too; GET /status from the read bucket.
    const created = await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: a.testKey });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal(assertRateHeaders(created, 10).remaining, 6);
    const looked = await t.request({ method: 'GET', url: `/api/v1/status/${unknownMessage}`, key: a.testKey });
    assert.equal(looked.statusCode, 404);
    assert.equal(assertRateHeaders(looked, READ_LIMIT).remaining, READ_LIMIT - 4, 'sends did not draw from the read bucket');
  });

  it('reports each plan\'s send limit, and an account override, in X-RateLimit-Limit and limits.rate_limit_per_minute', async () => {
    const plans = [
      { account: await t.createAccount({ plan: 'starter' }), limit: 100 },
      { account: await t.createAccount({ plan: 'growth' }), limit: 500 },
      { account: await t.createAccount({ plan: 'scale' }), limit: 2000 },
      { account: await t.createAccount({ plan: 'enterprise', rateLimit: 7500, quota: 123_456 }), limit: 7500 },
      { account: await t.createAccount({ plan: 'growth', rateLimit: 42 }), limit: 42 },
    ];
    for (const { account, limit } of plans) {
      const res = await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: account.testKey });
      assert.equal(res.statusCode, 201, res.body);
      assert.equal(assertRateHeaders(res, limit).remaining, limit - 1);
      const report = await usage(account.testKey);
      assert.equal(report.json().limits.rate_limit_per_minute, limit);
      assertRateHeaders(report, READ_LIMIT); // reads are 1,000 whatever the plan
    }
  });

  it('answers 429 rate_limited once the send bucket is used up, with Retry-After; the refused send creates nothing', async () => {
    const a = await t.createAccount({ rateLimit: 3 });
    for (let i = 0; i < 3; i++) {
      const res = await send(a.testKey);
      assert.equal(res.statusCode, 202, res.body);
      assert.equal(assertRateHeaders(res, 3).remaining, 2 - i);
    }
    const refused = await send(a.testKey);
    assertRateLimited(refused, 3);
    assertUsageHeaders(refused, 500, 497);
    // Still refused, and POST /whatsapp/sessions shares the bucket.
    assertRateLimited(await send(a.testKey), 3);
    assertRateLimited(await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: a.testKey }), 3);

    // Reads have their own bucket and keep working; the refused sends were not counted.
    const report = await usage(a.testKey);
    assert.equal(report.statusCode, 200);
    assert.equal(report.json().usage.total_sent, 3);
    assert.equal(report.json().limits.remaining, 497);
    const sessions = await t.request({ method: 'GET', url: '/api/v1/whatsapp/sessions', key: a.testKey });
    assert.deepEqual(sessions.json(), { sessions: [] });
  });

  it('POST /send and POST /whatsapp/sessions share one bucket', async () => {
    const a = await t.createAccount({ rateLimit: 3 });
    for (let i = 0; i < 3; i++) {
      const res = await t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: a.testKey });
      assert.equal(res.statusCode, 201, res.body);
    }
    assertRateLimited(await send(a.testKey), 3);
    assert.equal((await usage(a.testKey)).json().usage.total_sent, 0);
  });

  it('gives every key its own buckets: the other key of the account and other accounts are not limited', async () => {
    const a = await t.createAccount({ rateLimit: 3 });
    const b = await t.createAccount({ rateLimit: 3 });
    for (let i = 0; i < 3; i++) assert.equal((await send(a.testKey)).statusCode, 202);
    assertRateLimited(await send(a.testKey), 3);

    const otherAccount = await send(b.testKey);
    assert.equal(otherAccount.statusCode, 202, otherAccount.body);
    assert.equal(assertRateHeaders(otherAccount, 3).remaining, 2);

    // The live key of the same account: a key of its own, so a bucket of its own.
    const liveKey = await send(a.liveKey);
    assert.equal(liveKey.statusCode, 202, liveKey.body);
    assert.equal(assertRateHeaders(liveKey, 3).remaining, 2);
  });

  it('answers 429 from the read bucket after 1,000 reads a minute, while sends go on', async () => {
    const a = await t.createAccount({ rateLimit: 5 });
    const statuses = new Map<number, number>();
    let lastRemaining = -1;
    for (let done = 0; done < READ_LIMIT; done += 50) {
      const batch = await Promise.all(
        Array.from({ length: 50 }, () => t.request({ method: 'GET', url: `/api/v1/status/${unknownMessage}`, key: a.testKey })),
      );
      for (const res of batch) statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      lastRemaining = Math.min(...batch.map((res) => Number(res.headers['x-ratelimit-remaining'])));
    }
    assert.deepEqual([...statuses], [[404, READ_LIMIT]], 'the first 1,000 reads are answered');
    assert.equal(lastRemaining, 0);

    const refused = await usage(a.testKey);
    assertRateLimited(refused, READ_LIMIT);
    assertUsageHeaders(refused, 500, 500);
    assertRateLimited(await t.request({ method: 'GET', url: '/api/v1/no-such-route', key: a.testKey }), READ_LIMIT);

    const sent = await send(a.testKey);
    assert.equal(sent.statusCode, 202, sent.body);
    assert.equal(assertRateHeaders(sent, 5).remaining, 4);
    // Another key still reads.
    assert.equal((await usage(a.liveKey)).statusCode, 200);
  });

  it('keeps a fixed window: refused requests and reads neither refill the send bucket nor move its reset', async () => {
    const a = await t.createAccount({ rateLimit: 2 });
    for (let i = 0; i < 2; i++) assert.equal((await t.send(a.testKey, defaultSendBody('linkedin', t.voiceUrl))).statusCode, 202);
    const first = await t.send(a.testKey, defaultSendBody('linkedin', t.voiceUrl));
    assertRateLimited(first, 2);
    for (let i = 0; i < 5; i++) assert.equal((await usage(a.testKey)).statusCode, 200);
    const second = await t.send(a.testKey, defaultSendBody('linkedin', t.voiceUrl));
    assertRateLimited(second, 2);
    assert.ok(
      Number(second.headers['x-ratelimit-reset']) - Number(first.headers['x-ratelimit-reset']) <= 1,
      'the window did not move forward with the refused requests',
    );
  });

  describe('requests without a valid key', () => {
    const anonymous = (ip: string, key?: string) => t.request({ method: 'GET', url: '/api/v1/usage', remoteAddress: ip, ...(key !== undefined ? { key } : {}) });

    function assertUnauthorized(res: InjectResult): number {
      assertErrorEnvelope(res, 401, 'unauthorized');
      assert.equal(res.headers['www-authenticate'], 'Bearer');
      assert.equal(res.headers['x-usage-limit'], undefined, 'no usage headers without a key');
      assert.equal(res.headers['x-usage-remaining'], undefined, 'no usage headers without a key');
      return assertRateHeaders(res, IP_LIMIT).remaining;
    }

    it('get 401 with WWW-Authenticate: Bearer and only the rate-limit headers of a per-IP bucket', async () => {
      const ip = '203.0.113.10';
      const remaining = [
        assertUnauthorized(await anonymous(ip)),
        assertUnauthorized(await anonymous(ip, 'sk_test_notarealkeynotarealkeynotarealk')),
        assertUnauthorized(await anonymous(ip, 'garbage')),
        assertUnauthorized(await t.request({ method: 'POST', url: '/api/v1/send', body: defaultSendBody('telegram', t.voiceUrl), remoteAddress: ip })),
        assertUnauthorized(await t.request({ method: 'GET', url: '/api/v1/no-such-route', remoteAddress: ip })),
        assertUnauthorized(await t.request({ method: 'GET', url: '/api/v1/usage', headers: { authorization: 'Basic dXNlcjpwYXNz' }, remoteAddress: ip })),
      ];
      assert.deepEqual(remaining, [IP_LIMIT - 1, IP_LIMIT - 2, IP_LIMIT - 3, IP_LIMIT - 4, IP_LIMIT - 5, IP_LIMIT - 6]);

      // Another address has a bucket of its own.
      assert.equal(assertUnauthorized(await anonymous('203.0.113.11')), IP_LIMIT - 1);
    });

    it('get 429 once the per-IP bucket is used up; a valid key from that address still works', async () => {
      const ip = '198.51.100.7';
      for (let done = 0; done < IP_LIMIT; done += 50) {
        const batch = await Promise.all(Array.from({ length: 50 }, () => anonymous(ip, 'sk_live_guessedguessedguessedguessedgu')));
        assert.ok(batch.every((res) => res.statusCode === 401), 'the first requests are answered 401');
      }
      const refused = await anonymous(ip, 'sk_live_guessedguessedguessedguessedgu');
      assertRateLimited(refused, IP_LIMIT);
      assert.equal(refused.headers['x-usage-limit'], undefined);
      assert.equal(refused.headers['x-usage-remaining'], undefined);
      assertRateLimited(await anonymous(ip), IP_LIMIT);

      // Other addresses are not affected.
      assertUnauthorized(await anonymous('198.51.100.8'));

      // The guard is against guessing keys: a caller with a valid key is counted on its key.
      const a = await t.createAccount();
      const res = await t.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey, remoteAddress: ip });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(assertRateHeaders(res, READ_LIMIT).remaining, READ_LIMIT - 1);
      assertUsageHeaders(res, 500, 500);
    });
  });
});

describe(`rate limits shared by nodes through Redis (${STORAGE_LABEL})`, { skip: TEST_REDIS_URL ? false : 'needs TEST_REDIS_URL' }, () => {
  it('two nodes on one database and one Redis count a key\'s requests together', async () => {
    await withRestartableStorage(async (reuse) => {
      const redisKeyPrefix = `voicenote-test:${randomBytes(6).toString('hex')}`;
      const first = await startTestApp({ reuse, redisKeyPrefix, worker: false });
      const second = await startTestApp({ reuse, redisKeyPrefix, worker: false });
      try {
        const a = await first.createAccount({ rateLimit: 3 });
        const body = defaultSendBody('telegram', first.voiceUrl);
        assert.equal((await first.send(a.testKey, body)).statusCode, 202);
        const onSecond = await second.send(a.testKey, body);
        assert.equal(onSecond.statusCode, 202, onSecond.body);
        assert.equal(assertRateHeaders(onSecond, 3).remaining, 1);
        assert.equal((await first.send(a.testKey, body)).statusCode, 202);
        assertRateLimited(await second.send(a.testKey, body), 3);
        assertRateLimited(await first.send(a.testKey, body), 3);

        const read = await second.request({ method: 'GET', url: '/api/v1/usage', key: a.testKey });
        assert.equal(assertRateHeaders(read, READ_LIMIT).remaining, READ_LIMIT - 1);
        assert.equal(read.json().usage.total_sent, 3);
      } finally {
        await second.close();
        await first.close();
      }
    });
  });
});

// A process without Redis counts its own windows: one starts at a key's first request and lasts a minute,
// and the reset and Retry-After the headers show come from it.
describe('rate-limit windows counted in the process (no Redis)', () => {
  it('refuses past the limit within a window, tells when it resets, and starts a new window once it has', async () => {
    const { RateLimiter } = await import('../src/api/rate-limiter.js');
    const limiter = new RateLimiter();
    // Mid-second on purpose: the window ends at …060.4 s, so the reset (whole seconds) is …061, never
    // …060, which would tell a client to come back while its window still runs.
    const start = 1_700_000_000_400;
    const first = await limiter.consume('read', 'key_a', 2, start);
    assert.deepEqual(first, { allowed: true, limit: 2, remaining: 1, resetAt: 1_700_000_061, retryAfter: 60 });
    await limiter.consume('read', 'key_a', 2, start + 1_000);
    const third = await limiter.consume('read', 'key_a', 2, start + 30_000);
    assert.deepEqual(third, { allowed: false, limit: 2, remaining: 0, resetAt: 1_700_000_061, retryAfter: 30 });
    // 100 ms later the wait is 29.9 s: Retry-After rounds up too.
    assert.equal((await limiter.consume('read', 'key_a', 2, start + 30_100)).retryAfter, 30);
    // Another key and another bucket have windows of their own.
    assert.equal((await limiter.consume('read', 'key_b', 2, start + 30_000)).remaining, 1);
    assert.equal((await limiter.consume('send', 'key_a', 2, start + 30_000)).remaining, 1);
    const next = await limiter.consume('read', 'key_a', 2, start + 60_000);
    assert.deepEqual(next, { allowed: true, limit: 2, remaining: 1, resetAt: 1_700_000_121, retryAfter: 60 });
  });
});
