import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { startCliScene, type CliScene } from './fixtures/cli-scene.js';
import { assertErrorEnvelope, defaultSendBody, STORAGE_LABEL, type TestApp } from './fixtures/app-harness.js';

/** `voicenote suppressions` and `voicenote opt-outs`: the suppression list from the command line, through the HTTP API. */
describe(`voicenote suppressions (${STORAGE_LABEL})`, () => {
  let scene: CliScene;
  let t: TestApp;
  let key: string;
  let dir: string;
  before(async () => {
    scene = await startCliScene('cli-suppressions-', { app: { worker: false } });
    ({ t, key, dir } = scene);
  });
  after(() => scene?.close());

  const cli = (args: string[]) => scene.cli(args);

  test('add, list and remove, with --json as the API answers', async () => {
    const added = await cli(['suppressions', 'add', '--platform', 'whatsapp', '--note', 'asked', '+1 415 555 0199', '--json']);
    assert.equal(added.code, 0, added.stderr);
    const [entry] = JSON.parse(added.stdout).data;
    assert.deepEqual([entry.platform, entry.recipient, entry.source, entry.note], ['whatsapp', '14155550199', 'api', 'asked']);
    const listed = await cli(['suppressions', 'list', '--platform', 'whatsapp', '--json']);
    assert.deepEqual(JSON.parse(listed.stdout), { data: [entry], has_more: false });
    const text = await cli(['suppressions', 'list']);
    assert.match(text.stdout, new RegExp(`^${entry.id}  whatsapp +14155550199  \\(api, `));
    const removed = await cli(['suppressions', 'remove', entry.id, '--json']);
    assert.deepEqual(JSON.parse(removed.stdout), { id: entry.id, deleted: true });
    const again = await cli(['suppressions', 'remove', entry.id]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /^voicenote: 404 not_found/);
  });

  test('import FILE.csv lists 10,000 rows, reports a bad row by its number, and applies to the next send', async () => {
    const rows = Array.from({ length: 10_000 }, (_, i) => `telegram,${4_917_000_000 + i},from the old tool`);
    rows.splice(6, 0, 'whatsapp,jane,not a number');
    const file = path.join(dir, 'list.csv');
    await writeFile(file, `platform,recipient,note\n${rows.join('\n')}\n`);
    const run = await cli(['suppressions', 'import', file, '--json']);
    assert.equal(run.code, 1, 'a rejected row makes the run fail');
    const result = JSON.parse(run.stdout);
    assert.equal(result.rows, 10_001);
    assert.equal(result.listed, 10_000);
    assert.equal(result.rejected.length, 1);
    assert.equal(result.rejected[0].row, 7);
    assert.match(result.rejected[0].error, /whatsapp recipient/);
    const refused = await t.send(key, { ...defaultSendBody('telegram', t.voiceUrl), recipient: String(4_917_000_000 + 9_999) });
    assertErrorEnvelope(refused, 422, 'recipient_suppressed');
    const imported = await cli(['suppressions', 'list', '--source', 'import', '--recipient', '4917000000', '--json']);
    assert.equal(JSON.parse(imported.stdout).data[0].note, 'from the old tool');
  });

  test('opt-outs show and set', async () => {
    const set = await cli(['opt-outs', 'set', '--off', '--keywords', 'Nein Danke, no thanks', '--json']);
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual([JSON.parse(set.stdout).enabled, JSON.parse(set.stdout).keywords], [false, ['nein danke', 'no thanks']]);
    const shown = await cli(['opt-outs', 'show']);
    assert.match(shown.stdout, /^opt-outs by reply: off\nown keywords: nein danke, no thanks\nbuilt-in \(sms\): stop, /);
    const nothing = await cli(['opt-outs', 'set']);
    assert.equal(nothing.code, 1);
    assert.match(nothing.stderr, /needs --on, --off or --keywords/);
  });
});
