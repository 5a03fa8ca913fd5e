// Kysely's ES modules (262 files) in one file, and compiled code pointed at it: shared by the build
// (scripts/bundle-kysely.mjs, for dist/) and the tests' compiled copy (scripts/compile-tests.mjs).
// Node loads an ES module graph file by file: 120–200 ms of CPU for Kysely's, about 15–25 ms from one
// file (BENCHMARKS.md, "Changes measured", 2026-11-27).
import { dirname, relative, sep } from 'node:path';
import { build } from 'esbuild';

/** Writes the bundle to `outfile`; `root` is where `kysely` is resolved from. */
export async function bundleKysely(root, outfile, extra = {}) {
  await build({
    stdin: { contents: "export * from 'kysely';", resolveDir: root, loader: 'js' },
    bundle: true,
    format: 'esm',
    platform: 'node',
    outfile,
    logLevel: 'warning',
    ...extra,
  });
}

/** `from 'kysely'` and `import('kysely')` as compilers write them (type-only imports are gone by then). */
const SPECIFIER = /(\bfrom\s*|\bimport\s*\(\s*)(['"])kysely\2/g;

/** The bundle's path as `file` imports it (relative, with a leading `./`). */
export function bundleSpecifier(file, bundle) {
  const target = relative(dirname(file), bundle).split(sep).join('/');
  return target.startsWith('.') ? target : `./${target}`;
}

/** `code` of `file` with its imports of 'kysely' pointed at the bundle. */
export function pointAtBundle(code, file, bundle) {
  const target = bundleSpecifier(file, bundle);
  return code.replace(SPECIFIER, (_match, lead, quote) => `${lead}${quote}${target}${quote}`);
}
