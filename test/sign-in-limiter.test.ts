/**
 * The dashboard's sign-in limiter on its own (in memory, and through Redis when the suite has it):
 * growing waits per client address and email, the ten-attempt ceiling, and nothing per email alone.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { Redis } from 'ioredis';
import { SIGN_IN_ATTEMPTS_PER_IP_AND_EMAIL, SIGN_IN_FREE_FAILURES, SignInLimiter } from '../src/dashboard/sign-in-limiter.js';
import { TEST_REDIS_URL } from './fixtures/app-harness.js';

const redis = TEST_REDIS_URL ? new Redis(TEST_REDIS_URL) : undefined;
after(() => redis?.disconnect());
const label = redis ? 'redis' : 'memory';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function limiter(): SignInLimiter {
  // Waits of 20 ms, 40 ms, 80 ms … instead of 1 s, 2 s, 4 s …
  return new SignInLimiter({ redis, keyPrefix: `voicenote-test:${randomBytes(6).toString('hex')}`, backoffBaseSeconds: 0.02 });
}

/** One wrong password, as the sign-in page does it: the attempt, then the failure. */
async function fail(l: SignInLimiter, ip: string, email: string): Promise<boolean> {
  const decision = await l.attempt(ip, email);
  if (!decision.allowed) return false;
  await l.failed(ip, email);
  return true;
}

/** Waits out a backoff (generously: this is not a timing assertion), then tries again. */
async function failAfterWaiting(l: SignInLimiter, ip: string, email: string): Promise<boolean> {
  for (let i = 0; i < 200; i++) {
    if (await fail(l, ip, email)) return true;
    await sleep(10);
  }
  return false;
}

describe(`sign-in limiter (${label})`, () => {
  test('free failures, then each further attempt from that address for that email waits', async () => {
    const l = limiter();
    for (let i = 0; i < SIGN_IN_FREE_FAILURES; i++) assert.ok(await fail(l, '198.51.100.1', 'owner@example.com'), `failure ${i + 1} is free`);
    const refused = await l.attempt('198.51.100.1', 'owner@example.com');
    assert.equal(refused.allowed, false, 'the next attempt waits');
    assert.ok(refused.retryAfter >= 1);
    // Another address, the same email: not affected.
    assert.equal((await l.attempt('198.51.100.2', 'owner@example.com')).allowed, true);
    // The same address, another email: not affected either.
    assert.equal((await l.attempt('198.51.100.1', 'other@example.com')).allowed, true);
  });

  // Through Redis the waits are whole seconds (1 + 2 + … + 64 s to get there): the ceiling is checked in memory.
  test('after the waits, ten attempts in the window is the most; a success clears the count', { skip: redis ? 'waits of whole seconds through Redis' : false }, async () => {
    const l = limiter();
    const ip = '198.51.100.3';
    let failures = 0;
    while (failures < SIGN_IN_ATTEMPTS_PER_IP_AND_EMAIL) {
      assert.ok(await failAfterWaiting(l, ip, 'owner@example.com'), `failure ${failures + 1}`);
      failures++;
    }
    await sleep(2 * 20 * 2 ** (SIGN_IN_ATTEMPTS_PER_IP_AND_EMAIL - SIGN_IN_FREE_FAILURES));
    const ceiling = await l.attempt(ip, 'owner@example.com');
    assert.equal(ceiling.allowed, false, 'the eleventh attempt in the window is refused, backoff or not');
    assert.ok(ceiling.retryAfter > 60, 'until the window ends');
    await l.succeeded('198.51.100.4', 'owner@example.com');
    assert.equal((await l.attempt(ip, 'owner@example.com')).allowed, false, "another address's success does not clear this one");

    const fresh = limiter();
    for (let i = 0; i < SIGN_IN_FREE_FAILURES; i++) await fail(fresh, ip, 'owner@example.com');
    await fresh.succeeded(ip, 'owner@example.com');
    assert.equal((await fresh.attempt(ip, 'owner@example.com')).allowed, true, 'a success clears the count and the wait');
  });

  test('a thousand failures for one email from a hundred addresses leave the owner\'s address untouched', async () => {
    const l = limiter();
    for (let a = 0; a < 100; a++) for (let i = 0; i < 10; i++) await fail(l, `203.0.113.${a}`, 'owner@example.com');
    assert.equal((await l.attempt('192.0.2.10', 'owner@example.com')).allowed, true);
  });
});
