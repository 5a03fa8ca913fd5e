// Part of `npm run build`, after tsc: Kysely's ES modules (262 files) bundled into one file,
// dist/vendor/kysely.js, and the compiled code pointed at it.
//
// Why: every process of the service (`serve`, `worker`, each CLI command) loads Kysely at start, and
// Node loads an ES module graph file by file: 120–165 ms for Kysely's, against about 15 ms for the
// same code in one file (BENCHMARKS.md, "Changes measured", 2026-11-27). The sources keep importing
// 'kysely' (types, tests and `tsx` use the package as it is); only the compiled output changes.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const dist = join(root, 'dist');
const bundle = join(dist, 'vendor', 'kysely.js');

await build({
  stdin: { contents: "export * from 'kysely';", resolveDir: root, loader: 'js' },
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outfile: bundle,
  legalComments: 'eof',
  logLevel: 'warning',
});

// `from 'kysely'` as tsc writes it (type-only imports are gone by then).
const SPECIFIER = /(\bfrom\s*|\bimport\s*\(\s*)(['"])kysely\2/g;
// tsc builds incrementally (dist/.tsbuildinfo): files it did not emit again already point at the bundle.
let pointing = 0;
for (const file of await compiledFiles(dist)) {
  if (file === bundle) continue;
  const text = await readFile(file, 'utf8');
  if (!text.includes('kysely')) continue;
  let target = relative(dirname(file), bundle).split(sep).join('/');
  if (!target.startsWith('.')) target = `./${target}`;
  const next = text.replace(SPECIFIER, (_, lead, quote) => `${lead}${quote}${target}${quote}`);
  if (next !== text) await writeFile(file, next);
  if (next.includes(`${target}'`) || next.includes(`${target}"`)) pointing++;
}
if (pointing === 0) throw new Error('bundle-kysely: no compiled file imports kysely; is dist/ built?');

async function compiledFiles(dir) {
  const files = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...(await compiledFiles(path)));
    else if (entry.name.endsWith('.js')) files.push(path);
  }
  return files;
}
