import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { startCliScene, type CliScene } from './fixtures/cli-scene.js';
import { STORAGE_LABEL, TELEGRAM_TOKEN, type TestApp } from './fixtures/app-harness.js';

/*
 * `voicenote send --dry-run` and the CSV's `dry_run` column, through the real bin (compiled dist/: build
 * first) against a sandbox service on loopback: each row's dry-run answer, nothing stored or counted.
 */
describe(`voicenote send --dry-run (${STORAGE_LABEL})`, () => {
  let scene: CliScene;
  let t: TestApp;
  let key: string;
  let dir: string;
  before(async () => {
    scene = await startCliScene('cli-dry-run-', { app: { worker: false }, plan: 'scale' });
    ({ t, key, dir } = scene);
    const listed = await t.request({ method: 'POST', url: '/api/v1/suppressions', key, body: { recipients: [{ platform: 'telegram', recipient: '222222222' }] } });
    assert.equal(listed.statusCode, 201, listed.body);
  });
  after(() => scene?.close());

  const cli = (args: string[]) => scene.cli(args);
  const totalSent = async (): Promise<number> => (await t.request({ method: 'GET', url: '/api/v1/usage', key })).json().usage.total_sent;
  const storedMessages = async (): Promise<number> => (await t.app.services.db.kysely.selectFrom('messages').select(['id']).execute()).length;
  const csvOf = async (name: string, lines: string[]): Promise<string> => {
    const file = path.join(dir, name);
    await writeFile(file, `${lines.join('\n')}\n`);
    return file;
  };
  const rows = (extra: (i: number) => string = () => '') =>
    ['111111111', '222222222', '333333333'].map((recipient, i) => `telegram,${recipient},${t.voiceUrl},${TELEGRAM_TOKEN}${extra(i)}`);

  test('--csv --dry-run: every row answers the API\'s 200 body; the suppressed row reports recipient_suppressed and fails the run; nothing stored, usage unchanged', async () => {
    const before = await totalSent();
    const file = await csvOf('three.csv', ['platform,recipient,audio_url,bot_token', ...rows()]);
    const run = await cli(['send', '--csv', file, '--dry-run', '--json']);
    assert.equal(run.code, 1, 'a dry row whose checks fail fails the run as a rejected row does');
    assert.equal(run.stderr, 'voicenote: 1 of 3 rows rejected\n');
    const result = JSON.parse(run.stdout);
    assert.deepEqual(Object.keys(result), ['accepted', 'rejected', 'replayed', 'rows']);
    assert.deepEqual([result.accepted, result.rejected, result.replayed], [2, 1, 0]);
    assert.deepEqual(result.rows.map((r: any) => r.row), [1, 2, 3]);
    for (const row of result.rows) {
      assert.deepEqual(Object.keys(row), ['row', 'dry_run', 'would_send', 'message', 'checks']);
      assert.equal(row.dry_run, true);
      assert.equal(row.message.platform, 'telegram');
      assert.equal(row.message.audio_url, t.voiceUrl);
    }
    assert.deepEqual(result.rows.map((r: any) => [r.message.recipient, r.would_send]), [['111111111', true], ['222222222', false], ['333333333', true]]);
    const failed = result.rows[1].checks.filter((c: any) => c.result === 'fail');
    assert.deepEqual(failed.map((c: any) => [c.id, c.error.code]), [['suppression', 'recipient_suppressed']]);
    const suppression = (row: any) => row.checks.find((c: any) => c.id === 'suppression').result;
    assert.deepEqual([suppression(result.rows[0]), suppression(result.rows[2])], ['pass', 'pass']);
    assert.equal(await storedMessages(), 0, 'nothing stored');
    assert.equal(await totalSent(), before, 'usage unchanged');

    const human = await cli(['send', '--csv', file, '--dry-run']);
    assert.equal(human.code, 1);
    assert.match(human.stdout, /^row 1: dry run: would send$/m);
    assert.match(human.stdout, /^row 2: dry run: would not send: suppression: recipient_suppressed: /m);
    assert.match(human.stdout, /^2 accepted, 1 rejected, of 3 rows; 3 dry runs, nothing stored or sent for them$/m);
    assert.equal(await storedMessages(), 0);
  });

  test('the dry_run column: true rows are only checked, false and empty rows are sent; non-dry rows keep their {row, id} shape', async () => {
    const before = await totalSent();
    const flags = ['true', 'false', ''];
    const file = await csvOf('column.csv', ['platform,recipient,audio_url,bot_token,dry_run', ...rows((i) => `,${flags[i]}`)]);
    const run = await cli(['send', '--csv', file, '--json']);
    assert.equal(run.code, 1, run.stderr);
    const result = JSON.parse(run.stdout);
    assert.deepEqual([result.accepted, result.rejected], [2, 1]);
    assert.equal(result.rows[0].dry_run, true);
    assert.equal(result.rows[0].would_send, true);
    assert.deepEqual(Object.keys(result.rows[1]), ['row', 'error'], 'the suppressed row really sent: the 422 of today');
    assert.equal(result.rows[1].error.code, 'recipient_suppressed');
    assert.deepEqual(Object.keys(result.rows[2]), ['row', 'id']);
    const stored = await t.app.services.db.kysely.selectFrom('messages').select(['recipient']).execute();
    assert.deepEqual(stored.map((m) => m.recipient), ['333333333'], 'only the real row is stored');
    assert.equal(await totalSent(), before + 1);
  });

  test('single send --dry-run: --json prints the 200 body; a failed check exits 1 naming it; --wait is refused', async () => {
    const stored = await storedMessages();
    const single = (recipient: string, extra: string[]) => ['send', '--platform', 'telegram', '--recipient', recipient, '--audio', t.voiceUrl, '--bot-token', TELEGRAM_TOKEN, '--dry-run', ...extra];
    const ok = await cli(single('444444444', ['--json']));
    assert.equal(ok.code, 0, ok.stderr);
    const body = JSON.parse(ok.stdout);
    assert.deepEqual(Object.keys(body), ['dry_run', 'would_send', 'message', 'checks']);
    assert.equal(body.would_send, true);
    const refused = await cli(single('222222222', []));
    assert.equal(refused.code, 1);
    assert.equal(JSON.parse(refused.stdout).would_send, false, 'the body, indented, on stdout');
    assert.match(refused.stderr, /^voicenote: dry run: would not send: suppression: recipient_suppressed: /);
    const waiting = await cli(single('444444444', ['--wait']));
    assert.equal(waiting.code, 1);
    assert.match(waiting.stderr, /--dry-run sends none/);
    assert.equal(await storedMessages(), stored, 'nothing stored');
  });
});
