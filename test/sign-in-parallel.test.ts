/**
 * Wrong passwords sent in parallel meet the same growing waits as wrong passwords sent one after
 * another (the wait used to be checked before the hash and the failure recorded after it, so a burst
 * skipped the waits), and password hashes do not take every thread of libuv's pool.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { after, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { SIGN_IN_FREE_FAILURES, SignInLimiter } from '../src/dashboard/sign-in-limiter.js';
import { hashPasswordAsync, verifyPasswordAsync } from '../src/store/password-hash.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, TEST_REDIS_URL } from './fixtures/app-harness.js';
import { createDashboardAccount, csrfIn, FormClient } from './fixtures/dashboard-harness.js';

const redis = TEST_REDIS_URL ? new Redis(TEST_REDIS_URL) : undefined;
after(async () => {
  redis?.disconnect();
  await closeSharedAudio();
});

describe(`wrong passwords in parallel (${STORAGE_LABEL})`, () => {
  test('ten at once through the sign-in form: no more are checked than one after another would be; the rest are told to wait (429)', async (t) => {
    const app = await startTestApp({ worker: false });
    t.after(() => app.close());
    const account = await createDashboardAccount(app);
    const client = new FormClient(app, '198.51.100.40');
    const page = await client.get('/dashboard/sign-in');
    const token = csrfIn(page.body);
    const answers = await Promise.all(Array.from({ length: 10 }, () => client.post('/dashboard/sign-in', { _csrf: token, email: account.email, password: 'not the password' })));
    const statuses = answers.map((r) => r.statusCode);
    assert.ok(statuses.every((s) => s === 401 || s === 429), statuses.join(' '));
    const checked = statuses.filter((s) => s === 401).length;
    assert.ok(checked >= 1 && checked <= SIGN_IN_FREE_FAILURES, `${checked} checked: ${statuses.join(' ')}`);
    for (const refused of answers.filter((r) => r.statusCode === 429)) assert.ok(Number(refused.headers['retry-after']) >= 1);
    // The right password from another address is not held up by this one's waits.
    assert.equal((await new FormClient(app, '198.51.100.41').signIn(account.email, account.password)).statusCode, 303);
  });
});

describe(`the sign-in limiter with attempts in parallel (${redis ? 'redis' : 'memory'})`, () => {
  test('one check at a time per address and email: a burst of twenty gets one turn, then the waits grow as they do one after another', async () => {
    const limiter = new SignInLimiter({ redis, keyPrefix: `voicenote-test:${randomBytes(6).toString('hex')}`, backoffBaseSeconds: 30 });
    let checked = 0;
    const burst = async (): Promise<void> => {
      await Promise.all(
        Array.from({ length: 20 }, async () => {
          const decision = await limiter.attempt('203.0.113.5', 'owner@example.com');
          if (!decision.allowed) return;
          checked++;
          // The password check takes a while (scrypt): others arrive meanwhile.
          await new Promise((r) => setTimeout(r, 20));
          await limiter.failed('203.0.113.5', 'owner@example.com');
        }),
      );
    };
    for (let i = 0; i < 5; i++) await burst();
    // One after another: three free failures, then a 30 s wait. Five bursts get no more than that.
    assert.equal(checked, SIGN_IN_FREE_FAILURES);
    // Another email from that address, and that email from another address, are not held up.
    assert.equal((await limiter.attempt('203.0.113.5', 'someone@example.com')).allowed, true);
    assert.equal((await limiter.attempt('203.0.113.6', 'owner@example.com')).allowed, true);
  });
});

describe('password hashes and the thread pool', () => {
  test('while ten hashes wait, a file system call (libuv\'s pool, as DNS look-ups) is answered before the first hash ends', async () => {
    const stored = await hashPasswordAsync('correct horse battery');
    const order: string[] = [];
    const hashes = Array.from({ length: 10 }, (_, i) => verifyPasswordAsync('wrong', stored).then(() => order.push(`hash ${i}`)));
    // Issued after the hashes: without a cap it queues behind all ten on four threads.
    const fsCall = stat(import.meta.dirname).then(() => order.push('stat'));
    await Promise.all([...hashes, fsCall]);
    assert.equal(order[0], 'stat', order.join(', '));
  });
});
