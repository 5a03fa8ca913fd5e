import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { ROOT } from './fixtures/cli-process.js';

/**
 * Every relative link of the README and the guide pages in docs/ reaches a file that exists and, with an
 * #anchor, a heading of that file: the README was split into docs/ pages, and a moved section must still
 * be found from every page that links to it.
 */

/** Markdown outside fenced code blocks, with inline code spans blanked (a `[x](y)` inside one is no link). */
function prose(markdown: string): string[] {
  let fenced = false;
  return markdown.split('\n').map((line) => {
    if (line.startsWith('```')) {
      fenced = !fenced;
      return '';
    }
    return fenced ? '' : line.replace(/`[^`]*`/g, (code) => ' '.repeat(code.length));
  });
}

/**
 * GitHub's anchor for a heading: its text as shown (code spans and links reduced to their text),
 * lowercased, punctuation other than '-' and '_' removed, spaces to '-'; a repeated one gets -1, -2 …
 */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6} (.+)$/.exec(line);
    if (!heading) continue;
    const text = heading[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/`/g, '').trim();
    const slug = text.toLowerCase().replace(/[^\p{L}\p{N}_\- ]/gu, '').replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** The broken relative links of these files (paths relative to `root`): "file:line → target: why". */
async function brokenLinks(root: string, files: readonly string[]): Promise<string[]> {
  const broken: string[] = [];
  const anchorsOf = new Map<string, Set<string>>();
  const anchors = async (path: string): Promise<Set<string>> => {
    if (!anchorsOf.has(path)) anchorsOf.set(path, headingAnchors(await readFile(path, 'utf8')));
    return anchorsOf.get(path)!;
  };
  for (const file of files) {
    const path = join(root, file);
    const lines = prose(await readFile(path, 'utf8'));
    for (const [i, line] of lines.entries()) {
      for (const match of line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        const target = match[1]!;
        if (/^[a-z][a-z+.-]*:/i.test(target)) continue; // https:, mailto: …: not a file of the repository
        const [file0, anchor] = target.split('#', 2) as [string, string | undefined];
        const destination = file0 === '' ? path : resolve(dirname(path), decodeURIComponent(file0));
        const where = `${file}:${i + 1} → ${target}`;
        if (!existsSync(destination)) broken.push(`${where}: no file ${relative(root, destination)}`);
        else if (anchor !== undefined && destination.endsWith('.md') && !(await anchors(destination)).has(anchor)) {
          broken.push(`${where}: no heading #${anchor} in ${relative(root, destination)}`);
        }
      }
    }
  }
  return broken;
}

describe('links between the README and docs/', () => {
  test('every relative link reaches a file, and every #anchor a heading of it', async () => {
    const pages = (await readdir(join(ROOT, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`);
    assert.ok(pages.length >= 10, `docs/ holds the guide pages (${pages.join(', ')})`);
    assert.deepEqual(await brokenLinks(ROOT, ['README.md', ...pages]), []);
  });

  test('the check finds a missing file, a missing heading and a link to a heading of the same page', async (t) => {
    const root = await mkdtemp(join(tmpdir(), 'voicenote-links-'));
    t.after(() => rm(root, { recursive: true, force: true }));
    await mkdir(join(root, 'docs'));
    await writeFile(join(root, 'docs', 'a.md'), '# A page\n\n## Sending: `send_at`, the rules\n\n## Notes\n\n## Notes\n');
    await writeFile(
      join(root, 'README.md'),
      [
        '# Top',
        '[ok](docs/a.md#sending-send_at-the-rules) [ok](docs/a.md#notes-1) [ok](#top) [web](https://example.com/x#y)',
        '`[in code](docs/none.md)`',
        '```',
        '[in a fence](docs/none.md)',
        '```',
        '[gone](docs/b.md) [no heading](docs/a.md#sending) [not here](#bottom)',
      ].join('\n'),
    );
    assert.deepEqual(await brokenLinks(root, ['README.md', 'docs/a.md']), [
      'README.md:7 → docs/b.md: no file docs/b.md',
      'README.md:7 → docs/a.md#sending: no heading #sending in docs/a.md',
      'README.md:7 → #bottom: no heading #bottom in README.md',
    ]);
  });
});
