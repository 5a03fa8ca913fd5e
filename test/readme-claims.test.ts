import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { INPUT_NAMES } from './fixtures/audio-fixtures.js';
import { ROOT } from './fixtures/cli-process.js';
import { TOOLS } from '../src/api/mcp/tools.js';
import { SendBody } from '../src/api/schemas.js';
import { WEBHOOK_EVENT_TYPES } from '../src/webhooks/events.js';
import { PLATFORM_NAMES, builtInPlatform } from '../src/platforms/registry.js';
import { BUILT_IN_OPT_OUT_KEYWORDS, foldKeyword } from '../src/core/opt-out-keywords.js';

/** What the README and the guide pages in docs/ promise, held to what the code and its tests do. */

const doc = (path: string): Promise<string> => readFile(join(ROOT, path), 'utf8');
/** A page's text with its line breaks and runs of spaces as one space, for sentences that wrap. */
const flat = async (path: string): Promise<string> => (await doc(path)).replace(/\s+/g, ' ');
/** Every `name` in backticks of a piece of text, in order. */
const codeNames = (text: string): string[] => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

/** The docs' name of each source format, to the fixture test/audio-convert.test.ts converts for every platform. */
const FORMAT_FIXTURES: Record<string, string> = {
  MP3: 'tone.mp3',
  'M4A (AAC)': 'tone.m4a',
  'AAC (ADTS)': 'tone.aac',
  'Ogg Opus': 'tone-opus.ogg',
  'Ogg Vorbis': 'tone-vorbis.ogg',
  Opus: 'tone.opus',
  WAV: 'tone.wav',
  WebM: 'tone.webm',
  FLAC: 'tone.flac',
  AMR: 'tone.amr',
  'the audio track of an MP4 video': 'video.mp4',
};

describe('the README and docs/', () => {
  test('every source format the Audio section lists is one the tests convert, and every converted one is listed', async () => {
    const line = /Sources it takes \([^)]*\): ([^.]+)\./.exec(await flat('docs/how-it-works.md'));
    assert.ok(line, 'docs/how-it-works.md\'s Audio section lists the sources');
    const listed = line[1]!.split(/, (?:and )?/).map((s) => s.trim());
    for (const format of listed) assert.ok(FORMAT_FIXTURES[format], `no fixture converts "${format}"`);
    assert.deepEqual(listed.map((f) => FORMAT_FIXTURES[f]).sort(), [...INPUT_NAMES].sort());
  });

  test('says a field POST /send does not know is refused, never ignored (README, docs/ and the client\'s)', async () => {
    const pages = ['README.md', 'clients/typescript/README.md', ...(await readdir(join(ROOT, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    for (const path of pages) {
      assert.doesNotMatch(await flat(path), /ignor\w* unknown fields|unknown fields (are )?ignored|fields it does not know are ignored/i, path);
    }
  });

  test('POST /send\'s list of top-level fields is the body the API takes', async () => {
    const sentence = /The top-level fields are (.+?); `session` takes/.exec(await flat('docs/api.md'));
    assert.ok(sentence, 'docs/api.md lists POST /send\'s top-level fields');
    assert.deepEqual(codeNames(sentence[1]!).sort(), Object.keys(SendBody.properties).sort());
  });

  test('the webhook events table lists every event an endpoint can subscribe to, and no other', async () => {
    const rows = (await doc('docs/webhooks.md')).split('\n').map((l) => /^\| `([a-z_]+\.[a-z_]+)` \|/.exec(l)?.[1]).filter((t) => t !== undefined);
    assert.deepEqual(rows.sort(), [...WEBHOOK_EVENT_TYPES].sort());
  });

  test('the senders `kind` row lists every kind of sender the platforms name', async () => {
    const row = (await doc('docs/senders.md')).split('\n').find((l) => l.startsWith('| `kind` |'));
    assert.ok(row, 'docs/senders.md has the kind row');
    // Every platform's kinds, by a session id of each shape and a hashed credential.
    const kinds = new Set(PLATFORM_NAMES.flatMap((name) => ['ws_x', 'ts_x', 'hash'].map((key) => builtInPlatform(name).senderKind?.(key) ?? name)));
    const listed = codeNames(row.split('|')[2]!).filter((n) => /^[a-z]+_[a-z]+$/.test(n));
    assert.deepEqual(listed.sort(), [...kinds].sort());
  });

  test("the README's opt-out and send-window sections point to their pages; the keyword table is the code's list", async () => {
    const readme = await doc('README.md');
    // Each section's pointer (test/docs-links.test.ts checks that the anchors exist).
    assert.match(readme, /\n## Opt-outs and suppressions\n[\s\S]*?\]\(docs\/sending\.md#opt-outs-and-suppressions\)/);
    assert.match(readme, /\n## Send windows\n[\s\S]*?\]\(docs\/sending\.md#send-windows\)/);
    // The table names each language as a person reads it; its keywords, folded as replies are, are the built-in ones.
    const languages: Record<string, string> = { 'SMS industry': 'sms', English: 'en', Spanish: 'es', Portuguese: 'pt', French: 'fr', German: 'de', Italian: 'it' };
    const table = new Map(
      (await doc('docs/sending.md'))
        .split('\n')
        .map((line) => /^\| (SMS industry|English|Spanish|Portuguese|French|German|Italian) \| (.+) \|$/.exec(line))
        .filter((m) => m !== null)
        .map((m) => [languages[m[1]!]!, m[2]!.split(', ').map(foldKeyword)]),
    );
    assert.deepEqual(Object.fromEntries(table), BUILT_IN_OPT_OUT_KEYWORDS);
  });

  test('the way to change a login is a command that exists', async () => {
    const ownerRow = (await doc('docs/operations.md')).split('\n').find((l) => l.startsWith('| `OWNER_EMAIL` |'));
    assert.match(ownerRow ?? '', /voicenote accounts set-login/);
    assert.match(await doc('docs/cli.md'), /voicenote accounts set-login ACCOUNT_ID \[--email E\] \[--password P\] \[--json\]/);
  });

  test('the README and docs/mcp.md give the same desktop configuration block, for the bin that exists, and name the seven tools', async () => {
    const jsonBlocks = (text: string) => [...text.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1]!);
    const section = (text: string, heading: string) => text.split(/^## /m).find((s) => s.startsWith(`${heading}\n`)) ?? '';
    const readme = section(await doc('README.md'), 'MCP');
    const page = await doc('docs/mcp.md');
    const block = jsonBlocks(readme)[0];
    assert.ok(block, "README's MCP section has the desktop configuration block");
    assert.equal(block, jsonBlocks(page)[0], 'the same block as docs/mcp.md');
    const server = JSON.parse(block).mcpServers.voicenote;
    const bin = JSON.parse(await doc('package.json')).bin.voicenote.replace(/^\.\//, '');
    assert.deepEqual(server.args, [`/path/to/voicenote/${bin}`, 'mcp']);
    assert.deepEqual(Object.keys(server.env).sort(), ['VOICENOTE_API_KEY', 'VOICENOTE_URL']);
    const tools = TOOLS.map((tool) => tool.name).sort();
    assert.deepEqual([...new Set(codeNames(readme).filter((n) => tools.includes(n)))].sort(), tools, "README's MCP section names every tool");
    const table = page.split('\n').filter((line) => /^\| `[a-z_]+` \|/.test(line)).map((line) => codeNames(line)[0]!);
    assert.deepEqual(table.sort(), tools, "docs/mcp.md's table is the tools, each once");
  });

  test('the README stays one sitting long, and shows the CLI as a command that runs at once', async () => {
    const readme = await doc('README.md');
    assert.ok(readme.split('\n').length <= 250, `README.md has ${readme.split('\n').length} lines`);
    // npx installs the checkout into its own cache first: minutes, silently (issue 40).
    for (const path of ['README.md', ...(await readdir(join(ROOT, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]) {
      const text = await doc(path);
      assert.doesNotMatch(text.replace(/Not `npx voicenote`[^.]*\./g, ''), /npx voicenote/, path);
    }
  });
});
