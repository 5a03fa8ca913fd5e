/**
 * What one account may hold: at most 10 active API keys per environment (a key still working after a
 * roll counts until it expires), and live WhatsApp sessions linking or linked by plan (starter 5,
 * growth 20, scale 50, enterprise 100; the sandbox 100 whatever the plan). Over a cap: 409
 * limit_reached in the API, one line on stderr and a non-zero exit from the CLI, a message on the
 * dashboard. Rate limits stay per key: the cap on keys is what bounds an account's sends a minute.
 */
import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { sql } from 'kysely';
import { test } from './fixtures/timed.js';
import { createKey } from '../src/store/keys.js';
import { updatePlan } from '../src/store/accounts.js';
import { assertErrorEnvelope, closeSharedAudio, FAST_WHATSAPP, STORAGE_LABEL, startTestApp, TEST_DATABASE_URL, withRestartableStorage, type TestAccount, type TestApp } from './fixtures/app-harness.js';
import { runCli } from './fixtures/cli-process.js';
import { createDashboardAccount, csrfIn, FormClient } from './fixtures/dashboard-harness.js';
import { FakeTelegram } from './fakes/telegram-mtproto.js';
import { FakeWhatsapp } from './fakes/whatsapp-network.js';

after(closeSharedAudio);

function withSearchPath(databaseUrl: string, schema: string): string {
  return `${databaseUrl}${databaseUrl.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
}

describe(`at most 10 active API keys per account and environment (${STORAGE_LABEL})`, () => {
  test('the CLI and the dashboard refuse the 11th, a roll at the cap too; a revoked key frees a place, and so does a rolled key once expired; live keys count apart', async () => {
    await withRestartableStorage(async (reuse) => {
      const app = await startTestApp({ worker: false, reuse });
      try {
        const db = app.app.services.db.kysely;
        const account = await createDashboardAccount(app);
        const env = { DATA_DIR: reuse.dataDir, SECRET_KEY: reuse.secretKey, ...(TEST_DATABASE_URL && reuse.pgSchema ? { DATABASE_URL: withSearchPath(TEST_DATABASE_URL, reuse.pgSchema) } : {}) };
        const activeTest = async (): Promise<number> =>
          (await db.selectFrom('api_keys').select('id').where('account_id', '=', account.accountId).where('env', '=', 'test').where('revoked_at', 'is', null).execute()).length;
        // The account's first sandbox key, and 8 more: 9.
        for (let i = activeTest(); (await i) < 9; i = activeTest()) await createKey(db, account.accountId, 'test');
        // The 10th through the CLI.
        const tenth = await runCli(['keys', 'create', '--account', account.accountId, '--env', 'test', '--json'], env);
        assert.equal(tenth.code, 0, tenth.stderr);
        assert.equal(await activeTest(), 10);

        // The 11th: one line on stderr, a non-zero exit, no key.
        const eleventh = await runCli(['keys', 'create', '--account', account.accountId, '--env', 'test'], env);
        assert.notEqual(eleventh.code, 0);
        assert.equal(eleventh.stdout, '');
        const lines = eleventh.stderr.split('\n').filter((l) => l !== '' && !l.startsWith('voicenote: note:'));
        assert.equal(lines.length, 1, eleventh.stderr);
        assert.match(lines[0]!, /^voicenote: this account already has 10 active test keys, the most it may have .*revoke one first/);
        assert.equal(await activeTest(), 10);

        // The dashboard: a clear message, 409, no key.
        const client = new FormClient(app);
        assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
        const keysPage = await client.get('/dashboard/keys');
        const refused = await client.post('/dashboard/keys', { _csrf: csrfIn(keysPage.body), env: 'test' });
        assert.equal(refused.statusCode, 409);
        assert.match(refused.body, /No new key: this account already has 10 active test keys, the most it may have/);
        assert.doesNotMatch(refused.body, /Your new test key/);
        assert.equal(await activeTest(), 10);

        // A roll at the cap would make 11 working keys until the old one expires: refused too.
        const oneKey = JSON.parse(tenth.stdout).id as string;
        const roll = await runCli(['keys', 'roll', oneKey], env);
        assert.notEqual(roll.code, 0);
        assert.match(roll.stderr, /already has 10 active test keys/);

        // Revoked: a place is free; a roll fills it (the rolled key counts until it expires).
        assert.equal((await runCli(['keys', 'revoke', oneKey], env)).code, 0);
        const other = (await db.selectFrom('api_keys').select('id').where('account_id', '=', account.accountId).where('env', '=', 'test').where('revoked_at', 'is', null).executeTakeFirstOrThrow()).id;
        assert.equal((await runCli(['keys', 'roll', other, '--expires-in', '1h'], env)).code, 0);
        assert.notEqual((await runCli(['keys', 'create', '--account', account.accountId, '--env', 'test'], env)).code, 0, 'the rolled key still counts');
        // Once the rolled key has expired it counts no more: its place is free again.
        await db.updateTable('api_keys').set({ expires_at: Date.now() - 1_000 }).where('id', '=', other).execute();
        const afterExpiry = await runCli(['keys', 'create', '--account', account.accountId, '--env', 'test', '--json'], env);
        assert.equal(afterExpiry.code, 0, afterExpiry.stderr);
        assert.match(JSON.parse(afterExpiry.stdout).secret, /^sk_test_/);
        assert.notEqual((await runCli(['keys', 'create', '--account', account.accountId, '--env', 'test'], env)).code, 0, 'and the cap holds again at 10');

        // Live keys are counted apart.
        assert.equal((await runCli(['keys', 'create', '--account', account.accountId, '--env', 'live'], env)).code, 0);
      } finally {
        await app.close();
      }
    });
  });
});

describe(`WhatsApp sessions per account, by plan (${STORAGE_LABEL})`, () => {
  test('a starter account links at most 5 live sessions at once: the 6th is 409 limit_reached naming the limit; a deleted one frees a place; growth allows 20', async () => {
    const world = new FakeWhatsapp();
    const app = await startTestApp({ whatsappSocketFactory: world.factory('a'), whatsappLive: FAST_WHATSAPP });
    try {
      const account = await app.createAccount({ plan: 'starter', rateLimit: 10_000 });
      const create = () => app.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: account.liveKey });
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await create();
        assert.equal(res.statusCode, 201, res.body);
        ids.push(res.json().session_id);
      }
      const sixth = assertErrorEnvelope(await create(), 409, 'limit_reached');
      assert.deepEqual(sixth.details, { limit: 'whatsapp_sessions', max: 5 });
      assert.match(sixth.message, /already has 5 live WhatsApp sessions linking or linked, the most its starter plan allows; delete one first/);
      assert.equal((await app.request({ method: 'GET', url: '/api/v1/whatsapp/sessions', key: account.liveKey })).json().sessions.length, 5, 'nothing was created');

      assert.equal((await app.request({ method: 'DELETE', url: `/api/v1/whatsapp/sessions/${ids[0]}`, key: account.liveKey })).statusCode, 200);
      assert.equal((await create()).statusCode, 201, 'a deleted session frees its place');
      assertErrorEnvelope(await create(), 409, 'limit_reached');

      await updatePlan(app.app.services.db.kysely, account.accountId, { plan: 'growth', rateLimit: 10_000, quota: null });
      assert.equal((await create()).statusCode, 201, 'growth allows more');
    } finally {
      await app.close();
    }
  });

  test('sandbox sessions: 100 whatever the plan, and the dashboard says why it made none', async () => {
    const app = await startTestApp({ worker: false });
    try {
      const account = await createDashboardAccount(app);
      const db = app.app.services.db.kysely;
      const now = Date.now();
      // 100 linked sandbox sessions, written directly (a hundred QR codes would only take time).
      await db
        .insertInto('whatsapp_sessions')
        .values(Array.from({ length: 100 }, (_, i) => ({ id: `ws_cap${String(i).padStart(3, '0')}`, account_id: account.accountId, env: 'test', status: 'connected', phone_number: '15550000000', qr_expires_at: null, auto_connect_at: null, auth_state: null, created_at: now, updated_at: now, last_connected_at: now })))
        .execute();
      const over = assertErrorEnvelope(await app.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: account.testKey }), 409, 'limit_reached');
      assert.deepEqual(over.details, { limit: 'whatsapp_sessions', max: 100 });
      const client = new FormClient(app);
      assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
      const page = await client.get('/dashboard/whatsapp');
      const refused = await client.post('/dashboard/whatsapp', { _csrf: csrfIn(page.body) });
      assert.equal(refused.statusCode, 409);
      assert.match(refused.body, /No new session: this account already has 100 sandbox WhatsApp sessions linking or linked/);
      // Ended sessions do not count.
      await db.updateTable('whatsapp_sessions').set({ status: 'disconnected' }).where('id', '=', 'ws_cap000').execute();
      assert.equal((await app.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: account.testKey })).statusCode, 201);
    } finally {
      await app.close();
    }
  });
});

describe(`Telegram account sessions per account, as WhatsApp's (${STORAGE_LABEL})`, () => {
  const telegramRow = (accountId: string, env: string, id: string, status: string, now: number) => ({
    id, account_id: accountId, env, status, user_id: null, username: null, phone_number: null, auth_key: null, qr_payload: null,
    qr_expires_at: null, auto_connect_at: null, resting_until: null, created_at: now, updated_at: now, last_connected_at: null,
  });

  test('sandbox: 100 linking or linked, counted exactly under parallel creations; ended sessions do not count; live: the plan\'s cap (starter 5)', async () => {
    const world = new FakeTelegram();
    const app = await startTestApp({ worker: false, env: { TELEGRAM_API_ID: String(world.apiId), TELEGRAM_API_HASH: world.apiHash }, telegramClientFactory: world.factory('a') });
    try {
      const account = await app.createAccount({ plan: 'starter', rateLimit: 10_000 });
      const db = app.app.services.db.kysely;
      const now = Date.now();
      // 98 linked and one waiting for its password (99 count), two ended (they do not), written directly.
      const rows = Array.from({ length: 98 }, (_, i) => telegramRow(account.accountId, 'test', `ts_cap${String(i).padStart(3, '0')}`, 'connected', now));
      rows.push(telegramRow(account.accountId, 'test', 'ts_cap_password', 'password_needed', now));
      rows.push(telegramRow(account.accountId, 'test', 'ts_cap_gone', 'disconnected', now), telegramRow(account.accountId, 'test', 'ts_cap_expired', 'qr_expired', now));
      await db.insertInto('telegram_sessions').values(rows).execute();
      // Before, there was no cap: every one of these made a session (124 by one account in the attack).
      const answers = await Promise.all(Array.from({ length: 10 }, () => app.request({ method: 'POST', url: '/api/v1/telegram/sessions', key: account.testKey })));
      assert.deepEqual(answers.map((r) => r.statusCode).sort(), [201, ...Array(9).fill(409)]);
      const over = assertErrorEnvelope(answers.find((r) => r.statusCode === 409)!, 409, 'limit_reached');
      assert.deepEqual(over.details, { limit: 'telegram_sessions', max: 100 });
      assert.match(over.message, /already has 100 sandbox Telegram account sessions linking or linked, the most the sandbox allows; delete one first/);
      const counted = await db.selectFrom('telegram_sessions').select('id').where('account_id', '=', account.accountId).where('status', 'in', ['qr_pending', 'password_needed', 'connected']).execute();
      assert.equal(counted.length, 100);

      // Live: a starter account's five (written directly: linking them needs Telegram), then 409 before any connection.
      await db.insertInto('telegram_sessions').values(Array.from({ length: 5 }, (_, i) => telegramRow(account.accountId, 'live', `ts_live${i}`, 'qr_pending', now))).execute();
      const live = assertErrorEnvelope(await app.request({ method: 'POST', url: '/api/v1/telegram/sessions', key: account.liveKey }), 409, 'limit_reached');
      assert.deepEqual(live.details, { limit: 'telegram_sessions', max: 5 });
      assert.match(live.message, /already has 5 live Telegram account sessions linking or linked, the most its starter plan allows/);
    } finally {
      await app.close();
    }
  });

  test('the dashboard says why it made no Telegram session', async () => {
    const app = await startTestApp({ worker: false });
    try {
      const account = await createDashboardAccount(app);
      const now = Date.now();
      await app.app.services.db.kysely
        .insertInto('telegram_sessions')
        .values(Array.from({ length: 100 }, (_, i) => telegramRow(account.accountId, 'test', `ts_dash${String(i).padStart(3, '0')}`, 'connected', now)))
        .execute();
      const client = new FormClient(app);
      assert.equal((await client.signIn(account.email, account.password)).statusCode, 303);
      const page = await client.get('/dashboard/telegram');
      const refused = await client.post('/dashboard/telegram', { _csrf: csrfIn(page.body) });
      assert.equal(refused.statusCode, 409);
      assert.match(refused.body, /No new session: this account already has 100 sandbox Telegram account sessions linking or linked/);
    } finally {
      await app.close();
    }
  });
});

describe(`caps under a flood of creations (${STORAGE_LABEL})`, () => {
  /**
   * 40 creations of one account fired at once and again as each answers, for `floodMs`, while another
   * account reads its sessions one request after another. On PostgreSQL the account's row is held at
   * the flood's start (as a slow creation in another process would hold it) until the other account
   * has its first answer: before, each of the flood's creations took a pool connection and waited on
   * that row, the pool ran dry, and that answer was a 503 (no connection within 3 s).
   */
  async function underFlood(app: TestApp, flooder: TestAccount, create: () => Promise<{ statusCode: number }>, floodMs: number) {
    const other = await app.createAccount();
    const db = app.app.services.db.kysely;
    let released = false;
    let answered = () => undefined as void;
    const firstAnswer = new Promise<void>((resolve) => (answered = resolve));
    let holding = Promise.resolve();
    if (TEST_DATABASE_URL) {
      let held!: () => void;
      const taken = new Promise<void>((resolve) => (held = resolve));
      holding = db.transaction().execute(async (trx) => {
        await sql`select id from accounts where id = ${flooder.accountId} for update`.execute(trx);
        held();
        // (Bounded: a test that fails must not hang.)
        await Promise.race([firstAnswer, new Promise((resolve) => setTimeout(resolve, 10_000))]);
        released = true;
      });
      await taken;
    }
    const flood: number[] = [];
    const until = Date.now() + floodMs;
    const flooding = Array.from({ length: 40 }, async () => {
      while (Date.now() < until) {
        flood.push((await create()).statusCode);
        // Each next creation in a turn of its own, as from a socket: injected requests answered from
        // memory (the 409s) resolve as microtasks only, and 40 such loops would keep the other
        // account's timer from ever firing.
        await new Promise((resolve) => setImmediate(resolve));
      }
    });
    // The flood's creations are waiting by now.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const otherAnswers: { status: number; whileHeld: boolean; ms: number }[] = [];
    while (Date.now() < until) {
      const started = Date.now();
      const res = await app.request({ method: 'GET', url: '/api/v1/whatsapp/sessions', key: other.testKey });
      otherAnswers.push({ status: res.statusCode, whileHeld: !released, ms: Date.now() - started });
      answered();
      // Paced under the read limit per key (a quiet machine answers in a millisecond or two).
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await Promise.all([...flooding, holding]);
    return { flood, otherAnswers };
  }

  test('40 parallel session creations of one sandbox key leave storage to every other account, and the cap holds exactly', { timeout: 120_000 }, async () => {
    const app = await startTestApp({ worker: false });
    try {
      const flooder = await app.createAccount({ rateLimit: 1_000_000 });
      const db = app.app.services.db.kysely;
      const now = Date.now();
      // 95 of the sandbox's 100, written directly: the flood finds room for exactly 5 more, then only 409s.
      await db
        .insertInto('whatsapp_sessions')
        .values(Array.from({ length: 95 }, (_, i) => ({ id: `ws_flood${String(i).padStart(3, '0')}`, account_id: flooder.accountId, env: 'test', status: 'connected', phone_number: '15550000000', qr_expires_at: null, auto_connect_at: null, auth_state: null, created_at: now, updated_at: now, last_connected_at: now })))
        .execute();
      const { flood, otherAnswers } = await underFlood(app, flooder, () => app.request({ method: 'POST', url: '/api/v1/whatsapp/sessions', key: flooder.testKey }), 6_000);
      const statuses = [...new Set(flood)].sort().join();
      assert.equal(flood.filter((s) => s === 201).length, 5, statuses);
      assert.ok(flood.every((s) => s === 201 || s === 409), statuses);
      const active = await db.selectFrom('whatsapp_sessions').select('id').where('account_id', '=', flooder.accountId).where('status', 'in', ['qr_pending', 'connected']).execute();
      assert.equal(active.length, 100);
      // Every answer of the other account's is a 200, the first (on PostgreSQL) while the flood's row was held.
      assert.deepEqual([...new Set(otherAnswers.map((a) => a.status))], [200], JSON.stringify(otherAnswers.slice(0, 5)));
      if (TEST_DATABASE_URL) assert.ok(otherAnswers[0]!.whileHeld);
    } finally {
      await app.close();
    }
  });
});
