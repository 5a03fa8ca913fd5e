/**
 * What one account may hold: at most 10 active API keys per environment (a key still working after a
 * roll counts until it expires), and live WhatsApp sessions linking or linked by plan (starter 5,
 * growth 20, scale 50, enterprise 100; the sandbox 100 whatever the plan). Over a cap: 409
 * limit_reached in the API, one line on stderr and a non-zero exit from the CLI, a message on the
 * dashboard. Rate limits stay per key: the cap on keys is what bounds an account's sends a minute.
 */
import assert from 'node:assert/strict';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { createKey } from '../src/store/keys.js';
import { updatePlan } from '../src/store/accounts.js';
import { assertErrorEnvelope, closeSharedAudio, FAST_WHATSAPP, STORAGE_LABEL, startTestApp, TEST_DATABASE_URL, withRestartableStorage } from './fixtures/app-harness.js';
import { runCli } from './fixtures/cli-process.js';
import { createDashboardAccount, csrfIn, FormClient } from './fixtures/dashboard-harness.js';
import { FakeWhatsapp } from './fakes/whatsapp-socket.js';

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
