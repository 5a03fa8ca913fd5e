import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe } from 'node:test';
import { it } from './fixtures/timed.js';
import { updatePlan } from '../src/store/accounts.js';
import {
  STORAGE_LABEL,
  closeSharedAudio,
  defaultSendBody,
  startTestApp,
  type InjectResult,
  type TestApp,
  connectedSandboxSession,
} from './fixtures/app-harness.js';

const HOUR_MS = 60 * 60 * 1000;

after(async () => {
  await closeSharedAudio();
});

describe(`Idempotency-Key (${STORAGE_LABEL})`, () => {
  let t: TestApp;

  before(async () => {
    // Live sends are accepted and then fail at delivery: point the live platforms at a closed port.
    t = await startTestApp({ env: { TELEGRAM_API_ROOT: 'http://127.0.0.1:9', LINKEDIN_API_ROOT: 'http://127.0.0.1:9' } });
  });
  after(async () => {
    await t.close();
  });

  const newKey = (): string => `idem-${randomUUID()}`;
  const body = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({ ...defaultSendBody('telegram', t.voiceUrl), ...overrides });
  const sendWithKey = (apiKey: string, idempotencyKey: string, payload: Record<string, unknown> = body()) =>
    t.send(apiKey, payload, { 'idempotency-key': idempotencyKey });
  const createSession = (apiKey: string, idempotencyKey?: string) =>
    t.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: apiKey, ...(idempotencyKey ? { headers: { 'idempotency-key': idempotencyKey } } : {}) });
  const totalSent = async (apiKey: string): Promise<number> => {
    const res = await t.request({ method: 'GET', url: '/api/v1/usage', key: apiKey });
    assert.equal(res.statusCode, 200, res.body);
    return res.json().usage.total_sent;
  };
  const listSessions = async (apiKey: string): Promise<string[]> => {
    const res = await t.request({ method: 'GET', url: '/api/v1/whatsapp/sessions', key: apiKey });
    assert.equal(res.statusCode, 200, res.body);
    return res.json().sessions.map((s: { id: string }) => s.id);
  };
  const replayed = (res: InjectResult): unknown => res.headers['idempotent-replayed'];

  function assertConflict(res: InjectResult): void {
    assert.equal(res.statusCode, 409, res.body);
    const error = res.json().error;
    assert.deepEqual(Object.keys(res.json()), ['error']);
    assert.equal(error.code, 'idempotency_conflict');
    assert.equal(typeof error.message, 'string');
    assert.ok('details' in error);
    assert.equal(replayed(res), undefined);
  }

  it('replays the first answer for the same key and body, once, with Idempotent-Replayed: true', async () => {
    const a = await t.createAccount();
    const key = newKey();
    const first = await sendWithKey(a.testKey, key);
    assert.equal(first.statusCode, 202, first.body);
    assert.equal(replayed(first), undefined, 'a first answer is not a replay');
    assert.match(first.json().id, /^msg_/);

    for (let i = 0; i < 2; i++) {
      const again = await sendWithKey(a.testKey, key);
      assert.equal(again.statusCode, 202, again.body);
      assert.equal(replayed(again), 'true');
      assert.deepEqual(again.json(), first.json(), 'the same body, the same message id');
    }
    // The same JSON with its keys in another order is the same body.
    const reordered = Object.fromEntries(Object.entries(body()).reverse());
    const third = await sendWithKey(a.testKey, key, reordered);
    assert.equal(third.statusCode, 202, third.body);
    assert.equal(replayed(third), 'true');
    assert.equal(third.json().id, first.json().id);

    assert.equal(await totalSent(a.testKey), 1, 'one message, one unit of quota');
    const status = await t.request({ method: 'GET', url: `/api/v1/status/${first.json().id}`, key: a.testKey });
    assert.equal(status.statusCode, 200);

    // Without a key, or with another key, the same body is a new message.
    const unkeyed = await t.send(a.testKey, body());
    const otherKey = await sendWithKey(a.testKey, newKey());
    assert.equal(unkeyed.statusCode, 202);
    assert.equal(otherKey.statusCode, 202);
    assert.equal(new Set([first.json().id, unkeyed.json().id, otherKey.json().id]).size, 3);
    assert.equal(await totalSent(a.testKey), 3);
  });

  it('answers 409 idempotency_conflict for the same key with another body, and creates nothing', async () => {
    const a = await t.createAccount();
    const key = newKey();
    const first = await sendWithKey(a.testKey, key);
    assert.equal(first.statusCode, 202, first.body);

    assertConflict(await sendWithKey(a.testKey, key, body({ recipient: '987654321' })));
    assertConflict(await sendWithKey(a.testKey, key, body({ caption: 'hello' })));
    assertConflict(await sendWithKey(a.testKey, key, defaultSendBody('linkedin', t.voiceUrl)));
    // ...or on the other endpoint that honours it.
    assertConflict(await createSession(a.testKey, key));

    assert.equal(await totalSent(a.testKey), 1);
    assert.deepEqual(await listSessions(a.testKey), []);
    // The original answer is still the one replayed.
    const again = await sendWithKey(a.testKey, key);
    assert.equal(again.statusCode, 202);
    assert.equal(again.json().id, first.json().id);
  });

  it('keeps keys apart per account and per environment', async () => {
    const a = await t.createAccount();
    const b = await t.createAccount();
    const key = newKey();
    const answers = [
      await sendWithKey(a.testKey, key),
      await sendWithKey(b.testKey, key),
      await sendWithKey(a.liveKey, key),
      // Even with another body: the key is not "used" in these scopes.
      await sendWithKey(b.liveKey, key, defaultSendBody('linkedin', t.voiceUrl)),
    ];
    for (const res of answers) {
      assert.equal(res.statusCode, 202, res.body);
      assert.equal(replayed(res), undefined);
    }
    assert.equal(new Set(answers.map((res) => res.json().id)).size, 4, 'four distinct messages');
    for (const apiKey of [a.testKey, b.testKey, a.liveKey, b.liveKey]) assert.equal(await totalSent(apiKey), 1);

    // Each scope replays its own answer.
    const replayA = await sendWithKey(a.liveKey, key);
    assert.equal(replayed(replayA), 'true');
    assert.equal(replayA.json().id, answers[2]!.json().id);
  });

  it('five concurrent identical requests make one message and all get its answer', async () => {
    const a = await t.createAccount();
    const key = newKey();
    const results = await Promise.all(Array.from({ length: 5 }, () => sendWithKey(a.testKey, key)));
    for (const res of results) assert.equal(res.statusCode, 202, res.body);
    const ids = new Set(results.map((res) => res.json().id));
    assert.equal(ids.size, 1, `one message id, got ${[...ids].join(', ')}`);
    assert.equal(results.filter((res) => replayed(res) === 'true').length, 4, 'all but the first are replays');
    assert.equal(await totalSent(a.testKey), 1);
    // No answer may claim more quota was spent than was.
    for (const res of results) {
      const left = Number(res.headers['x-usage-remaining']);
      assert.ok(left === 499 || left === 500, `X-Usage-Remaining ${left} is 499 (after the send) or 500 (read before it)`);
    }
    const status = await t.request({ method: 'GET', url: `/api/v1/status/${[...ids][0]}`, key: a.testKey });
    assert.equal(status.statusCode, 200);
  });

  it('does not store a refused request: after a 422 the same key is judged anew', async () => {
    const a = await t.createAccount();
    const key = newKey();
    const invalid = await sendWithKey(a.testKey, key, body({ recipient: 'not a chat id' }));
    assert.equal(invalid.statusCode, 422, invalid.body);
    const invalidAgain = await sendWithKey(a.testKey, key, body({ recipient: 'not a chat id' }));
    assert.equal(invalidAgain.statusCode, 422);
    assert.equal(replayed(invalidAgain), undefined);

    const fixed = await sendWithKey(a.testKey, key);
    assert.equal(fixed.statusCode, 202, fixed.body);
    assert.equal(replayed(fixed), undefined);
    const replay = await sendWithKey(a.testKey, key);
    assert.equal(replayed(replay), 'true');
    assert.equal(replay.json().id, fixed.json().id);
    assert.equal(await totalSent(a.testKey), 1);
  });

  it('does not store a 402: once the quota is raised the retry goes through', async () => {
    const a = await t.createAccount({ quota: 1 });
    const spent = await sendWithKey(a.testKey, newKey());
    assert.equal(spent.statusCode, 202);
    const key = newKey();
    const refused = await sendWithKey(a.testKey, key);
    assert.equal(refused.statusCode, 402, refused.body);
    assert.equal(refused.json().error.code, 'quota_exceeded');

    await updatePlan(t.app.services.db.kysely, a.accountId, { plan: 'starter', quota: 2 });
    const retried = await sendWithKey(a.testKey, key);
    assert.equal(retried.statusCode, 202, retried.body);
    assert.equal(replayed(retried), undefined);
    assert.equal(await totalSent(a.testKey), 2);
  });

  it('replays an accepted send even once the quota is used up: a replay spends nothing', async () => {
    const a = await t.createAccount({ quota: 1 });
    const key = newKey();
    const first = await sendWithKey(a.testKey, key);
    assert.equal(first.statusCode, 202, first.body);
    assert.equal(first.headers['x-usage-remaining'], '0');
    const again = await sendWithKey(a.testKey, key);
    assert.equal(again.statusCode, 202, again.body);
    assert.equal(replayed(again), 'true');
    assert.deepEqual(again.json(), first.json());
    assert.equal(again.headers['x-usage-remaining'], '0');
    assert.equal(await totalSent(a.testKey), 1);
  });

  it('honours a key for 24 hours, then treats it as new', async () => {
    const a = await t.createAccount();
    const key = newKey();
    const first = await sendWithKey(a.testKey, key);
    assert.equal(first.statusCode, 202);
    const age = async (ms: number) =>
      t.app.services.db.kysely.updateTable('idempotency_keys').set({ created_at: Date.now() - ms }).where('account_id', '=', a.accountId).where('key', '=', key).execute();

    await age(23 * HOUR_MS);
    const within = await sendWithKey(a.testKey, key);
    assert.equal(replayed(within), 'true');
    assert.equal(within.json().id, first.json().id);

    await age(24 * HOUR_MS + 60_000);
    const expired = await sendWithKey(a.testKey, key, body({ recipient: '555555555' }));
    assert.equal(expired.statusCode, 202, expired.body);
    assert.equal(replayed(expired), undefined, 'an expired key is not replayed, nor a conflict');
    assert.notEqual(expired.json().id, first.json().id);
    assert.equal(expired.json().recipient, '555555555');
    // ...and the new answer is the one replayed from now on.
    const replay = await sendWithKey(a.testKey, key, body({ recipient: '555555555' }));
    assert.equal(replayed(replay), 'true');
    assert.equal(replay.json().id, expired.json().id);
    assert.equal(await totalSent(a.testKey), 2);
  });

  it('treats a field sent as null like one left out: the same request, replayed', async () => {
    const a = await t.createAccount();
    const key = newKey();
    const first = await sendWithKey(a.testKey, key, body({ caption: null }));
    assert.equal(first.statusCode, 202, first.body);
    const again = await sendWithKey(a.testKey, key, body());
    assert.equal(again.statusCode, 202, again.body);
    assert.equal(replayed(again), 'true');
    assert.equal(again.json().id, first.json().id);
  });

  it('looks the key up before judging the body: a reused key with an invalid body is a 409, not a 422', async () => {
    const a = await t.createAccount();
    const key = newKey();
    assert.equal((await sendWithKey(a.testKey, key)).statusCode, 202);
    assertConflict(await sendWithKey(a.testKey, key, body({ recipient: 'not a chat id' })));
  });

  it('replays an accepted WhatsApp send even after its session has disconnected', async () => {
    const a = await t.createAccount();
    const sessionId = await connectedSandboxSession(t, a.testKey);
    const payload = defaultSendBody('whatsapp', t.voiceUrl, sessionId);
    const key = newKey();
    const first = await sendWithKey(a.testKey, key, payload);
    assert.equal(first.statusCode, 202, first.body);
    const drop = await t.request({ method: 'POST', url: `/api/v1/whatsapp/sessions/${sessionId}/simulate`, key: a.testKey, body: { event: 'disconnect' } });
    assert.equal(drop.statusCode, 200, drop.body);

    const again = await sendWithKey(a.testKey, key, payload);
    assert.equal(again.statusCode, 202, again.body);
    assert.equal(replayed(again), 'true');
    assert.deepEqual(again.json(), first.json());
    // Without the key, the same body is judged anew and the session is no longer connected.
    const fresh = await t.send(a.testKey, payload);
    assert.equal(fresh.statusCode, 422, fresh.body);
    assert.equal(fresh.json().error.code, 'session_not_connected');
  });

  it('refuses an Idempotency-Key longer than 255 characters (400 invalid_request)', async () => {
    const a = await t.createAccount();
    const res = await sendWithKey(a.testKey, 'k'.repeat(256));
    assert.equal(res.statusCode, 400, res.body);
    assert.equal(res.json().error.code, 'invalid_request');
    assert.equal(await totalSent(a.testKey), 0);
    assert.equal((await sendWithKey(a.testKey, 'k'.repeat(255))).statusCode, 202);
  });

  describe('POST /whatsapp/sessions', () => {
    it('replays the same session_id and qr_code, and creates one session', async () => {
      const a = await t.createAccount();
      const key = newKey();
      const first = await createSession(a.testKey, key);
      assert.equal(first.statusCode, 201, first.body);
      assert.equal(replayed(first), undefined);
      const { session_id, qr_code } = first.json();
      assert.match(session_id, /^ws_/);
      assert.match(qr_code, /^data:image\/png;base64,/);

      const again = await createSession(a.testKey, key);
      assert.equal(again.statusCode, 201, again.body);
      assert.equal(replayed(again), 'true');
      assert.deepEqual(again.json(), first.json());
      assert.deepEqual(await listSessions(a.testKey), [session_id]);

      // Another key makes another session; a send body under the same key is a conflict.
      const other = await createSession(a.testKey, newKey());
      assert.equal(other.statusCode, 201);
      assert.notEqual(other.json().session_id, session_id);
      assertConflict(await sendWithKey(a.testKey, key));
      assert.equal((await listSessions(a.testKey)).length, 2);
    });

    it('five concurrent creations with one key leave one session', async () => {
      const a = await t.createAccount();
      const key = newKey();
      const results = await Promise.all(Array.from({ length: 5 }, () => createSession(a.testKey, key)));
      for (const res of results) assert.equal(res.statusCode, 201, res.body);
      const ids = new Set(results.map((res) => res.json().session_id));
      assert.equal(ids.size, 1, `one session id, got ${[...ids].join(', ')}`);
      assert.equal(new Set(results.map((res) => res.json().qr_code)).size, 1);
      assert.equal(results.filter((res) => replayed(res) === 'true').length, 4);
      assert.deepEqual(await listSessions(a.testKey), [...ids]);
    });

    it('keeps the key apart per account', async () => {
      const a = await t.createAccount();
      const b = await t.createAccount();
      const key = newKey();
      const first = await createSession(a.testKey, key);
      const second = await createSession(b.testKey, key);
      assert.equal(first.statusCode, 201);
      assert.equal(second.statusCode, 201);
      assert.equal(replayed(second), undefined);
      assert.notEqual(first.json().session_id, second.json().session_id);
      assert.deepEqual(await listSessions(b.testKey), [second.json().session_id]);
    });
  });
});
