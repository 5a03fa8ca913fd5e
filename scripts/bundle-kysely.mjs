// Part of `npm run build`, after tsc: Kysely's ES modules (262 files) bundled into one file,
// dist/vendor/kysely.js, and the compiled code pointed at it.
//
// Why: every process of the service (`serve`, `worker`, each CLI command) loads Kysely at start, and
// Node loads an ES module graph file by file: 120–165 ms for Kysely's, against about 15 ms for the
// same code in one file (BENCHMARKS.md, "Changes measured", 2026-11-27). The sources keep importing
// 'kysely' (types, tests and `tsx` use the package as it is); only the compiled output changes.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleKysely, bundleSpecifier, pointAtBundle } from './kysely-bundle.mjs';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const dist = join(root, 'dist');
const bundle = join(dist, 'vendor', 'kysely.js');

await bundleKysely(root, bundle, { target: 'node20', legalComments: 'eof' });

// tsc builds incrementally (dist/.tsbuildinfo): files it did not emit again already point at the bundle.
let pointing = 0;
for (const file of await compiledFiles(dist)) {
  if (file === bundle) continue;
  const text = await readFile(file, 'utf8');
  if (!text.includes('kysely')) continue;
  const target = bundleSpecifier(file, bundle);
  const next = pointAtBundle(text, file, bundle);
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
