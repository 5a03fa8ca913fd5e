import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import SqliteDatabase from 'better-sqlite3';
import pg from 'pg';
import { BIN, childEnv, ROOT, runCli, type Run } from './fixtures/cli-process.js';
import { closeSharedAudio, STORAGE_LABEL, startTestApp, TELEGRAM_TOKEN, TEST_DATABASE_URL, withRestartableStorage, type TestApp } from './fixtures/app-harness.js';
import { updatePlan } from '../src/store/accounts.js';
import { FormClient } from './fixtures/dashboard-harness.js';

/*
 * The operator commands as users run them (`node bin/voicenote.js …`, compiled dist/: build first):
 * --version, accounts list/show, send (one, --wait, --csv), backup; against SQLite in a temp DATA_DIR
 * or, with TEST_DATABASE_URL, a PostgreSQL schema of their own, and a service listening on loopback.
 */

const MSG_ID = /^msg_[0-9A-Za-z]{24}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

after(async () => {
  await closeSharedAudio();
});

function withSearchPath(databaseUrl: string, schema: string): string {
  return `${databaseUrl}${databaseUrl.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
}

async function onPostgres<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Environment of a CLI child on the storage of `reuse` (an app's DATA_DIR / PostgreSQL schema). */
function storageEnv(reuse: { dataDir: string; pgSchema?: string; secretKey: string }): Record<string, string> {
  return {
    DATA_DIR: reuse.dataDir,
    SECRET_KEY: reuse.secretKey,
    ...(TEST_DATABASE_URL && reuse.pgSchema ? { DATABASE_URL: withSearchPath(TEST_DATABASE_URL, reuse.pgSchema) } : {}),
  };
}

/** withRestartableStorage, with its PostgreSQL schema created up front: a CLI child selects it by search_path and does not create it. */
function withStorage<T>(work: (reuse: { dataDir: string; pgSchema?: string; secretKey: string }) => Promise<T>): Promise<T> {
  return withRestartableStorage(async (reuse) => {
    if (reuse.pgSchema) await onPostgres((client) => client.query(`create schema if not exists ${reuse.pgSchema}`));
    return work(reuse);
  });
}

/** `--json`: exit 0 and the whole of stdout is one JSON object. */
function jsonOf(run: Run, what: string): any {
  assert.equal(run.code, 0, `${what} failed: ${run.stderr}`);
  assert.equal(run.stdout.trimEnd().split('\n').length, 1, `one line on stdout: ${run.stdout}`);
  const value: unknown = JSON.parse(run.stdout);
  assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value));
  return value;
}

/** A failure: non-zero exit, one `voicenote: …` line on stderr. */
/** A loopback port nothing listens on (one just given back by the system). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function oneErrorLine(run: Run): string {
  assert.notEqual(run.code, 0, `should fail: ${run.stdout}`);
  assert.notEqual(run.code, null, 'exited by itself');
  const lines = run.stderr.split('\n').filter((line) => line !== '');
  assert.equal(lines.length, 1, `one stderr line: ${run.stderr}`);
  assert.match(lines[0]!, /^voicenote: \S/);
  return lines[0]!;
}

test('voicenote --version prints the version of package.json', async () => {
  const { version } = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  for (const flag of ['--version', '-V']) {
    const run = await runCli([flag], {});
    assert.equal(run.code, 0);
    assert.equal(run.stdout, `${version}\n`);
    assert.equal(run.stderr, '');
  }
});

describe(`voicenote accounts list / show (${STORAGE_LABEL})`, () => {
  test('list and show --json: every account, its limits in force, its keys without secrets', async () => {
    await withStorage(async (reuse) => {
      const env = storageEnv(reuse);
      const empty = await runCli(['accounts', 'list', '--json'], env);
      assert.deepEqual(jsonOf(empty, 'accounts list'), { accounts: [] });
      assert.match(empty.stderr, /^voicenote: note: (created a new database|the database) at .*(DATA_DIR|DATABASE_URL)/m, 'says which database it opened, since it is new or empty');

      const a = jsonOf(await runCli(['accounts', 'create', '--name', 'Acme', '--email', 'ops@acme.test', '--json'], env), 'create');
      const b = jsonOf(await runCli(['accounts', 'create', '--name', 'Big', '--plan', 'enterprise', '--json'], env), 'create');
      assert.equal((await runCli(['accounts', 'set-plan', b.account_id, '--plan', 'enterprise', '--rate-limit', '42'], env)).code, 0);

      const listed = await runCli(['accounts', 'list', '--json'], env);
      assert.equal(listed.stderr, '', 'no note once the database has accounts');
      const { accounts } = jsonOf(listed, 'accounts list');
      assert.deepEqual(accounts.map((x: any) => x.id), [a.account_id, b.account_id], 'oldest first');
      for (const account of accounts) {
        assert.deepEqual(Object.keys(account).sort(), ['created_at', 'email', 'id', 'monthly_quota', 'name', 'owner', 'plan', 'rate_limit_per_minute']);
        assert.match(account.created_at, ISO);
        assert.equal(account.owner, false);
      }
      assert.deepEqual(
        { ...accounts[0], created_at: null },
        { id: a.account_id, name: 'Acme', email: 'ops@acme.test', plan: 'starter', rate_limit_per_minute: 100, monthly_quota: 500, owner: false, created_at: null },
      );
      assert.equal(accounts[1].rate_limit_per_minute, 42, 'the override in force');
      assert.equal(accounts[1].monthly_quota, 50_000, "the plan's own quota where none is set");

      const shown = jsonOf(await runCli(['accounts', 'show', a.account_id, '--json'], env), 'accounts show');
      assert.deepEqual(Object.keys(shown), ['account', 'keys']);
      assert.deepEqual(shown.account, accounts[0]);
      assert.deepEqual(shown.keys.map((k: any) => k.id).sort(), [a.keys.test.id, a.keys.live.id].sort());
      for (const key of shown.keys) {
        assert.deepEqual(Object.keys(key).sort(), ['created_at', 'env', 'expires_at', 'id', 'last_used_at', 'prefix', 'revoked_at', 'scope', 'senders']);
      }
      assert.ok(!JSON.stringify(shown).includes(a.keys.test.secret), 'no secret');

      const human = await runCli(['accounts', 'list'], env);
      assert.equal(human.code, 0);
      assert.match(human.stdout, new RegExp(`${a.account_id}\\s+Acme`));
      assert.match(oneErrorLine(await runCli(['accounts', 'show', 'acct_nope', '--json'], env)), /acct_nope/);
    });
  });

  test('a relative DATA_DIR is found under the installation, whatever the current directory', { skip: TEST_DATABASE_URL !== undefined }, async () => {
    const name = `.test-data-${randomBytes(4).toString('hex')}`;
    const elsewhere = await mkdtemp(path.join(tmpdir(), 'voicenote-cwd-'));
    try {
      const run = (args: string[]) =>
        new Promise<Run>((resolve) => {
          const child = spawn(process.execPath, [BIN, ...args], { cwd: elsewhere, env: childEnv({ DATA_DIR: name }) });
          let stdout = '';
          let stderr = '';
          child.stdout.on('data', (c: Buffer) => (stdout += c));
          child.stderr.on('data', (c: Buffer) => (stderr += c));
          child.on('close', (code) => resolve({ code, stdout, stderr }));
        });
      const created = jsonOf(await run(['accounts', 'create', '--name', 'Here', '--json']), 'create');
      assert.ok((await stat(path.join(ROOT, name, 'voicenote.db'))).isFile(), 'the database is under the installation folder');
      const listed = jsonOf(await run(['accounts', 'list', '--json']), 'list');
      assert.deepEqual(listed.accounts.map((x: any) => x.id), [created.account_id]);
    } finally {
      await rm(path.join(ROOT, name), { recursive: true, force: true });
      await rm(elsewhere, { recursive: true, force: true });
    }
  });
});

describe(`voicenote serve: a start that cannot listen leaves no owner behind (${STORAGE_LABEL})`, () => {
  let blocker: Server;
  let port = 0;
  before(async () => {
    blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    port = (blocker.address() as AddressInfo).port;
  });
  after(async () => {
    await new Promise((resolve) => blocker.close(resolve));
  });

  test('the failed start prints no keys; the database has no account; the owner is created by the first start that listens', async () => {
    await withStorage(async (reuse) => {
      const env = storageEnv(reuse);
      const failed = await runCli(['serve'], { ...env, PORT: String(port), HOST: '127.0.0.1' });
      assert.match(oneErrorLine(failed), /PORT/);
      assert.doesNotMatch(failed.stdout + failed.stderr, /sk_(test|live)_/);
      const listed = await runCli(['accounts', 'list', '--json'], env);
      assert.deepEqual(jsonOf(listed, 'accounts list'), { accounts: [] }, 'no half-created owner');
    });
  });
});

describe('split mode on a PostgreSQL database that does not exist yet', { skip: TEST_DATABASE_URL === undefined }, () => {
  test('migrate, serve and worker say in one line to create it first', async () => {
    const url = new URL(TEST_DATABASE_URL!);
    url.pathname = `/voicenote_missing_${randomBytes(4).toString('hex')}`;
    const env = { DATABASE_URL: url.href, SECRET_KEY: randomBytes(32).toString('base64'), PORT: '0', HOST: '127.0.0.1' };
    for (const args of [['migrate'], ['serve', '--no-worker'], ['worker']]) {
      const line = oneErrorLine(await runCli(args, env));
      assert.match(line, /DATABASE_URL: database "voicenote_missing_\w+" does not exist; create it first \(createdb /, `${args[0]}: ${line}`);
    }
  });
});

/** A service on loopback with one sandbox account, for the send commands. */
async function sendTarget(options: { rateLimit?: number; reuse?: { dataDir: string; pgSchema?: string; secretKey: string }; worker?: boolean } = {}) {
  const app = await startTestApp({ worker: options.worker ?? true, ...(options.reuse ? { reuse: options.reuse } : {}) });
  const url = `${await app.listen()}/api/v1`;
  return { app, url };
}

describe(`voicenote send (${STORAGE_LABEL})`, () => {
  let t: TestApp;
  let url: string;
  let key: string;
  before(async () => {
    ({ app: t, url } = await sendTarget());
    key = (await t.createAccount({ plan: 'scale' })).testKey;
  });
  after(async () => {
    await t.close();
  });

  const single = (recipient: string, extra: string[] = []) => [
    'send', '--key', key, '--url', url, '--platform', 'telegram', '--recipient', recipient, '--audio', t.voiceUrl, '--bot-token', TELEGRAM_TOKEN, ...extra,
  ];

  test('--json prints the accepted message exactly as the API answers it', async () => {
    const sent = jsonOf(await runCli(single('123456789', ['--caption', 'hi', '--json']), {}), 'send');
    assert.deepEqual(Object.keys(sent).sort(), ['created_at', 'id', 'platform', 'recipient', 'status']);
    assert.match(sent.id, MSG_ID);
    assert.equal(sent.status, 'queued');
    assert.equal(sent.recipient, '123456789');
    const status = await t.request({ method: 'GET', url: `/api/v1/status/${sent.id}`, key });
    assert.equal(status.statusCode, 200, 'the message exists in the service');
  });

  test('--wait --json follows the message to delivered and prints its status', async () => {
    const final = jsonOf(await runCli(single('123456789', ['--wait', '--json']), {}), 'send --wait');
    assert.deepEqual(Object.keys(final).sort(), ['created_at', 'delivered_at', 'error', 'id', 'platform', 'recipient', 'status']);
    assert.equal(final.status, 'delivered');
    assert.match(final.delivered_at, ISO);
    assert.equal(final.error, null);
  });

  test('--wait on a message that fails prints its status and exits non-zero with one line naming the failure', async () => {
    const run = await runCli(single('10000000002', ['--wait', '--json']), {});
    assert.match(oneErrorLine(run), /recipient_not_found/);
    const final = JSON.parse(run.stdout);
    assert.equal(final.status, 'failed');
    assert.deepEqual(Object.keys(final.error).sort(), ['code', 'message']);
    assert.equal(final.error.code, 'recipient_not_found');
  });

  test('--wait without --json prints GET /status\'s body, as the README says', async () => {
    const run = await runCli(single('123456789', ['--wait']), {});
    assert.equal(run.code, 0, run.stderr);
    const final = JSON.parse(run.stdout);
    assert.deepEqual(Object.keys(final).sort(), ['created_at', 'delivered_at', 'error', 'id', 'platform', 'recipient', 'status']);
    assert.equal(final.status, 'delivered');
  });

  test('the key comes from VOICENOTE_KEY when --key is absent; --key wins over it', async () => {
    const args = ['send', '--url', url, '--platform', 'telegram', '--recipient', '123456789', '--audio', t.voiceUrl, '--bot-token', TELEGRAM_TOKEN, '--json'];
    const sent = jsonOf(await runCli(args, { VOICENOTE_KEY: key }), 'send with VOICENOTE_KEY');
    assert.match(sent.id, MSG_ID);
    assert.match(oneErrorLine(await runCli(['send', '--key', 'sk_test_wrong', ...args.slice(1)], { VOICENOTE_KEY: key })), /401 unauthorized/);
    assert.match(oneErrorLine(await runCli(args, {})), /--key KEY \(or VOICENOTE_KEY/);
  });

  test('without --json: one line naming the message', async () => {
    const run = await runCli(single('123456789'), {});
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^queued msg_[0-9A-Za-z]{24}\s+telegram → 123456789\n$/);
  });

  test('--send-at schedules the send: the message log shows its send_at; a bad one is the API\'s 422 naming send_at', async () => {
    const sendAt = new Date(Date.now() + 86_400_000).toISOString();
    const run = await runCli(single('123456789', ['--send-at', sendAt]), {});
    assert.equal(run.code, 0, run.stderr);
    const id = /^queued (msg_[0-9A-Za-z]{24})\s+telegram → 123456789  scheduled for (\S+)\n$/.exec(run.stdout);
    assert.ok(id, run.stdout);
    assert.equal(id[2], sendAt);
    const logged = (await t.request({ method: 'GET', url: `/api/v1/messages/${id[1]}`, key })).json();
    assert.equal(logged.send_at, sendAt);
    assert.equal(logged.status, 'queued');
    assert.match(oneErrorLine(await runCli(single('123456789', ['--send-at', 'tomorrow']), {})), /422 invalid_parameter: .*\(send_at\)$/);
  });

  test('what the API refuses is one stderr line with the status, code, message and field; nothing on stdout', async () => {
    const run = await runCli(['send', '--key', key, '--url', url, '--platform', 'telegram', '--recipient', '123', '--audio', t.voiceUrl, '--bot-token', 'nope', '--json'], {});
    assert.match(oneErrorLine(run), /^voicenote: 422 invalid_parameter: .*\(session\.bot_token\)$/);
    assert.equal(run.stdout, '');
    const badKey = await runCli(['send', '--key', 'sk_test_wrong', '--url', url, '--platform', 'telegram', '--recipient', '123', '--audio', t.voiceUrl], {});
    assert.match(oneErrorLine(badKey), /401 unauthorized/);
    assert.match(oneErrorLine(await runCli(['send', '--key', key, '--url', url, '--platform', 'telegram'], {})), /--recipient/);
    assert.match(oneErrorLine(await runCli(['send', '--key', key, '--url', 'http://127.0.0.1:9/api/v1', '--platform', 'telegram', '--recipient', '1', '--audio', t.voiceUrl], {})), /cannot reach/);
  });

  test('without --url it sends to VOICENOTE_URL, else to PORT on this machine; unreachable, it names both', async () => {
    const withoutUrl = (recipient: string) => single(recipient, ['--json']).filter((arg, i, all) => arg !== '--url' && all[i - 1] !== '--url');
    const port = new URL(url).port;
    assert.equal(jsonOf(await runCli(withoutUrl('123456789'), { VOICENOTE_URL: url }), 'send via VOICENOTE_URL').status, 'queued');
    assert.equal(jsonOf(await runCli(withoutUrl('123456789'), { PORT: port }), 'send via PORT').status, 'queued');
    const closed = await closedPort();
    const refused = oneErrorLine(await runCli(withoutUrl('123456789'), { PORT: String(closed) }));
    assert.match(refused, new RegExp(`cannot reach http://127\\.0\\.0\\.1:${closed}/api/v1: ECONNREFUSED`));
    assert.match(refused, /export PORT=/);
    assert.match(refused, /VOICENOTE_URL=http:\/\/HOST:PORT\/api\/v1/);
  });
});

const csvRows = (audioUrl: string, recipients: string[]): string =>
  ['platform,recipient,audio_url,bot_token,caption', ...recipients.map((r, i) => `telegram,${r},${audioUrl},${TELEGRAM_TOKEN},"row ${i + 1}, quoted"`)].join('\n') + '\n';

async function countMessages(t: TestApp): Promise<Map<string, number>> {
  const rows = await t.app.services.db.kysely.selectFrom('messages').select(['recipient']).execute();
  const counts = new Map<string, number>();
  for (const row of rows) counts.set(row.recipient, (counts.get(row.recipient) ?? 0) + 1);
  return counts;
}

describe(`voicenote send --csv (${STORAGE_LABEL})`, () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'voicenote-csv-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('--json: exactly {accepted, rejected, rows}; a bad row is rejected with the API\'s code; a second run sends nothing twice', async () => {
    const { app: t, url } = await sendTarget();
    try {
      const { testKey: key } = await t.createAccount({ plan: 'scale' });
      const file = path.join(dir, 'mixed.csv');
      // Row 4: a LinkedIn send without its li_at cookie.
      const lines = `${csvRows(t.voiceUrl, ['111111111', '222222222', 'not a chat'])}linkedin,jane-smith-a1b2c3,${t.voiceUrl},,\n`;
      await writeFile(file, lines);
      const first = await runCli(['send', '--key', key, '--url', url, '--csv', file, '--json'], {});
      assert.match(oneErrorLine(first), /^voicenote: 2 of 4 rows rejected$/, 'a run with rejected rows exits non-zero with one line');
      const result = JSON.parse(first.stdout);
      assert.deepEqual(Object.keys(result), ['accepted', 'rejected', 'replayed', 'rows']);
      assert.equal(result.replayed, 0);
      assert.equal(result.accepted, 2);
      assert.equal(result.rejected, 2);
      assert.deepEqual(result.rows.map((r: any) => r.row), [1, 2, 3, 4]);
      for (const row of [result.rows[0], result.rows[1]]) {
        assert.deepEqual(Object.keys(row), ['row', 'id']);
        assert.match(row.id, MSG_ID);
      }
      for (const row of [result.rows[2], result.rows[3]]) {
        assert.deepEqual(Object.keys(row), ['row', 'error']);
        assert.deepEqual(Object.keys(row.error), ['code', 'message']);
        assert.equal(row.error.code, 'invalid_parameter');
      }
      assert.match(result.rows[2].error.message, /recipient/);
      assert.match(result.rows[3].error.message, /session\.li_at/);
      // The sends carry what the row said, caption included.
      const sent = await t.app.services.db.kysely.selectFrom('messages').select(['recipient', 'caption']).orderBy('id').execute();
      assert.deepEqual(sent, [
        { recipient: '111111111', caption: 'row 1, quoted' },
        { recipient: '222222222', caption: 'row 2, quoted' },
      ]);

      const again = await runCli(['send', '--key', key, '--url', url, '--csv', file, '--json'], {});
      const second = JSON.parse(again.stdout);
      assert.deepEqual(second.rows.slice(0, 2), result.rows.slice(0, 2), 'the same messages, replayed');
      assert.equal(second.replayed, 2, 'the summary counts the replays');
      assert.deepEqual([...(await countMessages(t)).values()], [1, 1], 'nothing sent twice');

      const human = await runCli(['send', '--key', key, '--url', url, '--csv', file], {});
      assert.match(human.stdout, /^row 3: invalid_parameter: /m);
      assert.match(human.stdout, /^2 accepted \(2 already sent by an earlier run, not sent again\), 2 rejected, of 4 rows$/m);
    } finally {
      await t.close();
    }
  });

  test('on a terminal: a progress bar with done / failed / remaining, rate and time left, then the summary', { skip: spawnSync('script', ['--version']).status === 0 ? false : 'util-linux script is not installed' }, async () => {
    const { app: t, url } = await sendTarget({ worker: false });
    try {
      const { testKey: key } = await t.createAccount({ plan: 'scale' });
      const file = path.join(dir, 'tty.csv');
      await writeFile(file, `${csvRows(t.voiceUrl, ['600000001', '600000002'])}telegram,bad,${t.voiceUrl},${TELEGRAM_TOKEN},\n`);
      // `script` gives the command a pseudo-terminal, as an operator's shell would.
      const command = [process.execPath, BIN, 'send', '--key', key, '--url', url, '--csv', file].map((arg) => `'${arg}'`).join(' ');
      // Not spawnSync: the service answering the command lives in this very process.
      const run = await new Promise<{ status: number | null; stdout: string }>((resolve) => {
        const child = spawn('script', ['-qec', command, '/dev/null'], { cwd: ROOT, env: childEnv({}) });
        let stdout = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c));
        const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
        child.on('close', (status) => {
          clearTimeout(timer);
          resolve({ status, stdout });
        });
      });
      const screen = run.stdout;
      assert.equal(run.status, 1, `one row rejected: ${screen}`);
      assert.match(screen, /\[#+-*\] \d\/3 {2}done \d {2}failed \d {2}remaining \d {2}\d+\.\d\/s {2}~\S+ left/, `a progress bar: ${JSON.stringify(screen)}`);
      assert.match(screen, /\x1b\[2K/, 'redrawn in place');
      assert.match(screen, /2 accepted, 1 rejected, of 3 rows/);
    } finally {
      await t.close();
    }
  });

  test('a header the command does not know, or one missing a column, is refused before anything is sent', async () => {
    const file = path.join(dir, 'bad.csv');
    await writeFile(file, 'platform,recipient,audio\ntelegram,1,http://x/a.ogg\n');
    assert.match(oneErrorLine(await runCli(['send', '--key', 'sk_test_x', '--url', 'http://127.0.0.1:9/api/v1', '--csv', file], {})), /unknown column "audio"/);
    await writeFile(file, 'platform,recipient\ntelegram,1\n');
    assert.match(oneErrorLine(await runCli(['send', '--key', 'sk_test_x', '--url', 'http://127.0.0.1:9/api/v1', '--csv', file], {})), /missing audio_url/);
  });

  test('a run interrupted half-way (waiting out a 429) and run again sends every row exactly once', async () => {
    await withRestartableStorage(async (reuse) => {
      const recipients = Array.from({ length: 10 }, (_, i) => String(500000000 + i));
      const file = path.join(dir, 'resume.csv');
      let key: string;
      let accountId: string;
      {
        const { app: t, url } = await sendTarget({ reuse, worker: false });
        try {
          const account = await t.createAccount({ plan: 'enterprise', rateLimit: 4 });
          key = account.testKey;
          accountId = account.accountId;
          await writeFile(file, csvRows(t.voiceUrl, recipients));
          // Four sends fit the minute; the fifth gets a 429 and the command waits it out: stop it there, as Ctrl-C would.
          const child = spawn(process.execPath, [BIN, 'send', '--key', key, '--url', url, '--csv', file, '--json'], { cwd: ROOT, env: childEnv({}) });
          let stderr = '';
          let stdout = '';
          child.stdout.on('data', (c: Buffer) => (stdout += c));
          const waiting = new Promise<void>((resolve, reject) => {
            child.stderr.on('data', (c: Buffer) => {
              stderr += c;
              if (/rate limited; waiting \d+ s before row 5/.test(stderr)) resolve();
            });
            child.on('exit', () => reject(new Error(`the command ended before waiting: ${stderr} ${stdout}`)));
          });
          await waiting;
          const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
          child.kill('SIGINT');
          assert.equal(await exited, 130, 'interrupted: the exit code of a Ctrl-C');
          assert.equal(stdout, '', 'interrupted: no summary');
          assert.match(stderr, /voicenote: interrupted after 4 of 10 rows; run the same command again to send the rest/, 'says how to resume');
          const counts = await countMessages(t);
          assert.deepEqual([...counts.keys()].sort(), recipients.slice(0, 4), 'the first four rows were sent');
        } finally {
          await t.close();
        }
      }
      {
        const { app: t, url } = await sendTarget({ reuse, worker: false });
        try {
          await updatePlan(t.app.services.db.kysely, accountId, { plan: 'enterprise', rateLimit: 100 });
          const resumed = jsonOf(await runCli(['send', '--key', key, '--url', url, '--csv', file, '--json'], {}), 'send --csv (resumed)');
          assert.equal(resumed.accepted, 10);
          assert.equal(resumed.rejected, 0);
          assert.equal(resumed.replayed, 4, 'the four rows of the first run were replays');
          const counts = await countMessages(t);
          assert.deepEqual([...counts.keys()].sort(), recipients, 'every row sent');
          assert.deepEqual([...new Set(counts.values())], [1], 'none of them twice');
          const ids = new Set(resumed.rows.map((r: any) => r.id));
          assert.equal(ids.size, 10);
          const usage = await t.request({ method: 'GET', url: '/api/v1/usage', key });
          assert.equal(usage.json().usage.total_sent, 10, 'and counted once each');
        } finally {
          await t.close();
        }
      }
    });
  });
});

describe(`voicenote backup (${STORAGE_LABEL})`, () => {
  test('with DATABASE_URL it refuses in one line that points at pg_dump', { skip: TEST_DATABASE_URL === undefined }, async () => {
    await withStorage(async (reuse) => {
      const run = await runCli(['backup', path.join(reuse.dataDir, 'copy.db')], storageEnv(reuse));
      assert.match(oneErrorLine(run), /pg_dump/);
    });
  });

  test('backup while the service takes sends, wipe, restore: messages, keys and sealed credentials are all there', { skip: TEST_DATABASE_URL !== undefined }, async () => {
    await withRestartableStorage(async (reuse) => {
      const backupDir = await mkdtemp(path.join(tmpdir(), 'voicenote-backup-'));
      try {
        const backupFile = path.join(backupDir, 'voicenote-backup.db');
        let key: string;
        let liveKey: string;
        let before: string[];
        let duringCount: number;
        let report: any;
        {
          // No worker: the messages stay queued with their sealed bot tokens, which the restored service must still open.
          const { app: t } = await sendTarget({ reuse, worker: false });
          try {
            ({ testKey: key, liveKey } = await t.createAccount({ plan: 'scale' }));
            const send = async (recipient: string) => {
              const res = await t.send(key, { platform: 'telegram', recipient, audio_url: t.voiceUrl, session: { bot_token: TELEGRAM_TOKEN } });
              assert.equal(res.statusCode, 202, res.body);
              return res.json().id as string;
            };
            before = [];
            for (let i = 0; i < 20; i++) before.push(await send(String(700000000 + i)));
            // Sends keep coming while the backup runs.
            let sending = true;
            let during = 0;
            const load = (async () => {
              while (sending) {
                await send(String(710000000 + during));
                during++;
              }
            })();
            const run = await runCli(['backup', backupFile, '--json'], storageEnv(reuse));
            sending = false;
            await load;
            duringCount = during;
            report = jsonOf(run, 'backup');
          } finally {
            await t.close();
          }
        }
        assert.deepEqual(Object.keys(report).sort(), ['accounts', 'bytes', 'database', 'file', 'messages', 'secret_key']);
        assert.equal(report.file, backupFile);
        assert.equal(report.database, path.join(reuse.dataDir, 'voicenote.db'));
        assert.equal(report.secret_key, 'SECRET_KEY', 'names the key the copy needs');
        assert.equal(report.accounts, 1);
        assert.ok(report.messages >= 20 && report.messages <= 20 + duringCount, `a committed state: ${report.messages} of ${20 + duringCount}`);
        assert.equal((await stat(backupFile)).mode & 0o777, 0o600);
        const copy = new SqliteDatabase(backupFile, { readonly: true });
        try {
          assert.equal(copy.pragma('integrity_check', { simple: true }), 'ok');
          assert.equal((copy.prepare('select count(*) as n from messages').get() as { n: number }).n, report.messages);
        } finally {
          copy.close();
        }
        assert.match(oneErrorLine(await runCli(['backup', backupFile], storageEnv(reuse))), /exists already/, 'never overwrites a backup');

        // Wipe, restore the one file (SECRET_KEY comes from the environment, as before), start again.
        await rm(reuse.dataDir, { recursive: true, force: true });
        await cp(backupFile, path.join(reuse.dataDir, 'voicenote.db'));
        const { app: t } = await sendTarget({ reuse, worker: true });
        try {
          for (const secret of [key!, liveKey!]) {
            const usage = await t.request({ method: 'GET', url: '/api/v1/usage', key: secret });
            assert.equal(usage.statusCode, 200, 'the keys work after the restore');
          }
          for (const id of before!.slice(0, 3)) {
            const delivered = await t.waitForStatus(key!, id, ['delivered', 'failed']);
            assert.equal(delivered.status, 'delivered', `its sealed bot token opened after the restore: ${JSON.stringify(delivered)}`);
          }
          const status = await t.request({ method: 'GET', url: `/api/v1/status/${before!.at(-1)}`, key: key! });
          assert.equal(status.statusCode, 200, 'every message sent before the backup is there');
        } finally {
          await t.close();
        }
      } finally {
        await rm(backupDir, { recursive: true, force: true });
      }
    });
  });
});

describe(`voicenote accounts set-login (${STORAGE_LABEL})`, () => {
  test('a new email and password, or a generated password printed once; the dashboard takes the new login only, and earlier sign-ins end', async () => {
    await withStorage(async (reuse) => {
      const env = storageEnv(reuse);
      const created = jsonOf(await runCli(['accounts', 'create', '--name', 'Acme', '--email', 'ops@acme.test', '--password', 'first password', '--json'], env), 'create');
      const app = await startTestApp({ reuse, worker: false });
      try {
        const before = new FormClient(app);
        assert.equal((await before.signIn('ops@acme.test', 'first password')).statusCode, 303);
        assert.equal((await before.get('/dashboard/account')).statusCode, 200);

        const generated = jsonOf(await runCli(['accounts', 'set-login', created.account_id, '--json'], env), 'set-login');
        assert.deepEqual(Object.keys(generated).sort(), ['account_id', 'email', 'password']);
        assert.equal(generated.account_id, created.account_id);
        assert.equal(generated.email, 'ops@acme.test');
        assert.match(generated.password, /^[A-Za-z0-9_-]{16}$/);
        assert.notEqual((await before.get('/dashboard/account')).statusCode, 200, 'the earlier sign-in has ended');
        assert.notEqual((await new FormClient(app).signIn('ops@acme.test', 'first password')).statusCode, 303, 'the old password no longer works');
        assert.equal((await new FormClient(app).signIn('ops@acme.test', generated.password)).statusCode, 303);

        const human = await runCli(['accounts', 'set-login', created.account_id, '--email', 'owner@acme.test', '--password', 'second password'], env);
        assert.equal(human.code, 0, human.stderr);
        assert.match(human.stdout, new RegExp(`account ${created.account_id} signs in to the dashboard as owner@acme\\.test`));
        assert.doesNotMatch(human.stdout, /second password/, 'a given password is not printed back');
        const after = new FormClient(app);
        assert.equal((await after.signIn('owner@acme.test', 'second password')).statusCode, 303);
        assert.equal((await after.get('/dashboard/account')).statusCode, 200);
        assert.notEqual((await new FormClient(app).signIn('ops@acme.test', 'second password')).statusCode, 303, 'the old email no longer signs in');

        const printed = await runCli(['accounts', 'set-login', created.account_id], env);
        const password = /^password (\S+)  \(shown once/m.exec(printed.stdout)?.[1];
        assert.ok(password, printed.stdout);
        assert.equal((await new FormClient(app).signIn('owner@acme.test', password)).statusCode, 303);

        assert.match(oneErrorLine(await runCli(['accounts', 'set-login', 'acct_nope'], env)), /no account acct_nope/);
        assert.match(oneErrorLine(await runCli(['accounts', 'set-login', created.account_id, '--password', 'short'], env)), /at least 8 characters/);
        const noEmail = jsonOf(await runCli(['accounts', 'create', '--name', 'Quiet', '--json'], env), 'create');
        assert.match(oneErrorLine(await runCli(['accounts', 'set-login', noEmail.account_id], env)), /has no email: give one with --email/);
      } finally {
        await app.close();
      }
    });
  });
});
