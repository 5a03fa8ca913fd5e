import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { sql } from 'kysely';
import { closeSharedAudio, connectedSandboxSession, STORAGE_LABEL, startTestApp } from './fixtures/app-harness.js';
import { startTelegramApi } from './fakes/telegram-api.js';
import { describeSecret, filesUnder, scanFiles } from './reliability/secret-scan.js';
import { SealedMemo } from '../src/core/sealed-memo.js';
import { SecretBox } from '../src/core/secret-box.js';

/**
 * The short version of RELIABILITY.md's R7: after deliveries that handled every kind of secret (API
 * keys, bot tokens, LinkedIn cookies, webhook signing secrets), neither the data directory (the
 * SQLite database, its WAL, the audio cache) nor any stored row holds one in clear.
 */

after(closeSharedAudio);

describe(`R7: no secret in clear at rest (${STORAGE_LABEL})`, () => {
  test('the data directory and every table are free of the secrets used', async (t) => {
    const telegram = await startTelegramApi();
    t.after(() => telegram.close());
    const app = await startTestApp({ env: { TELEGRAM_API_ROOT: telegram.apiRoot, SANDBOX_AUTO_SCAN_SECONDS: '0' } });
    t.after(() => app.close());
    const acct = await app.createAccount({ plan: 'enterprise' });
    const botTokens = Array.from({ length: 3 }, (_, i) => `${700000000 + i}:${randomBytes(27).toString('base64url')}`);
    const liAt = `AQEDAQ${randomBytes(24).toString('base64url')}`;
    const csrf = `ajax:${BigInt(`0x${randomBytes(8).toString('hex')}`).toString()}`;
    const ids: string[] = [];
    for (const [i, token] of botTokens.entries()) {
      const sent = await app.send(acct.liveKey, { platform: 'telegram', recipient: String(5000 + i), audio_url: app.voiceUrl, session: { bot_token: token } });
      assert.equal(sent.statusCode, 202, sent.body);
      ids.push(sent.json().id);
    }
    const sessionId = await connectedSandboxSession(app, acct.testKey);
    for (const body of [
      { platform: 'linkedin', recipient: 'jane-smith-a1b2c3', audio_url: app.voiceUrl, session: { li_at: liAt, csrf_token: csrf } },
      { platform: 'whatsapp', recipient: '14155550100', audio_url: app.voiceUrl, session: { session_id: sessionId } },
    ]) {
      const sent = await app.send(acct.testKey, body);
      assert.equal(sent.statusCode, 202, sent.body);
      ids.push(sent.json().id);
    }
    const webhook = await app.request({ method: 'POST', url: '/api/v1/webhook_endpoints', key: acct.testKey, body: { url: 'https://example.com/hooks/voicenote' } });
    const webhookSecret = webhook.statusCode < 300 ? (webhook.json().secret as string | undefined) : undefined;
    for (const id of ids.slice(0, 3)) await app.waitForStatus(acct.liveKey, id, ['delivered']);
    for (const id of ids.slice(3)) await app.waitForStatus(acct.testKey, id, ['delivered']);
    assert.equal(telegram.calls.length, 3, 'the live deliveries reached the fake Bot API');

    const secrets = [acct.testKey, acct.liveKey, ...botTokens, liAt, csrf, ...(webhookSecret ? [webhookSecret] : [])];
    // Every row of every table, as text: what PostgreSQL holds too.
    const db = app.app.services.db;
    const tables =
      db.dialect === 'postgres'
        ? (await sql<{ name: string }>`select table_name as name from information_schema.tables where table_schema = current_schema()`.execute(db.kysely)).rows
        : (await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(db.kysely)).rows;
    let rowsText = '';
    for (const { name } of tables) rowsText += JSON.stringify((await sql`select * from ${sql.table(name)}`.execute(db.kysely)).rows);
    for (const secret of secrets) assert.ok(!rowsText.includes(secret), `a stored row holds ${describeSecret(secret)} in clear`);

    // Scanned while the app runs: the SQLite WAL still holds the latest writes (closing would fold it into the database).
    const files = await filesUnder(app.dataDir);
    const { findings, bytes } = await scanFiles(files, secrets);
    assert.ok(files.some((f) => f.includes('audio-cache')), 'the audio cache is among the files scanned');
    if (db.dialect === 'sqlite') assert.ok(files.some((f) => f.endsWith('-wal')), 'the SQLite WAL is among the files scanned');
    assert.ok(bytes > 0);
    assert.deepEqual(
      findings.map((f) => `${f.file.slice(app.dataDir.length)}: ${describeSecret(f.secret)} (${f.encoding})`),
      [],
    );
  });
});

describe('credentials sealed once for many sends', () => {
  const box = new SecretBox(randomBytes(32));
  const session = { bot_token: `700000001:${randomBytes(27).toString('base64url')}` };

  test('the same credentials within a minute get the same sealed value, which opens to them', () => {
    const memo = new SealedMemo(box);
    const first = memo.sealJson(session, 1_000);
    assert.equal(memo.sealJson({ ...session }, 1_000 + 59_999), first);
    assert.deepEqual(box.openJson(first), session);
    assert.ok(!first.includes(session.bot_token), 'the sealed value holds the token in clear');
  });

  test('other credentials, or the same a minute later, are sealed anew', () => {
    const memo = new SealedMemo(box);
    const first = memo.sealJson(session, 1_000);
    const other = memo.sealJson({ bot_token: `${session.bot_token}x` }, 1_000);
    assert.notEqual(other, first);
    assert.deepEqual(box.openJson(other), { bot_token: `${session.bot_token}x` });
    const later = memo.sealJson(session, 1_000 + 60_000);
    assert.notEqual(later, first, 'a sealed value was reused after a minute');
    assert.deepEqual(box.openJson(later), session);
  });

  test('remembers at most 1,000 credentials: the oldest is sealed anew', () => {
    const memo = new SealedMemo(box);
    const first = memo.sealJson(session, 1_000);
    for (let i = 0; i < 999; i++) memo.sealJson({ bot_token: `other-${i}` }, 1_000);
    assert.equal(memo.sealJson(session, 1_000), first, 'forgotten before the memo was full');
    for (let i = 999; i < 1_999; i++) memo.sealJson({ bot_token: `other-${i}` }, 1_000);
    assert.notEqual(memo.sealJson(session, 1_000), first, 'kept beyond 1,000 entries');
  });
});
