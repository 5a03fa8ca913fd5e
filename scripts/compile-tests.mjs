// Compiles the TypeScript the tests run (src/, test/, clients/typescript/src/) to JavaScript once per
// run, so that each test file starts under plain Node: through tsx's loader a file spent 1.2–1.6 s of
// CPU loading the app, against about 0.3 s from JavaScript, and the suite has over a hundred files.
// Each .ts becomes a .js at the same place in a folder of its own (one per run, so two runs in one
// checkout never remove each other's files), with esbuild — the compiler tsx itself uses — and the
// same tsconfig. Imports need no rewriting: the sources already import `./x.js`.
//
// Paths computed from `import.meta.url` (the checkout's root, fixtures, assets, node_modules through
// createRequire) must resolve as they do from the source, so the compiled copy keeps its source's
// `import.meta.url`, `import.meta.dirname` and `import.meta.filename` (replaced in the syntax tree,
// never inside strings). Nothing else about where a module lives changes.
import { transform } from 'esbuild';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { bundleKysely, pointAtBundle } from './kysely-bundle.mjs';

/** The folders holding TypeScript that test files import (relative to the checkout's root). */
const SOURCE_DIRS = ['src', 'test', join('clients', 'typescript', 'src')];

async function typescriptFiles(dir) {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const files = await Promise.all(
    entries.map((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return typescriptFiles(path);
      return entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
    }),
  );
  return files.flat();
}

/**
 * Compiles every test-reachable .ts under `root` into a new folder under `root/test-artifacts/js/`
 * and returns that folder (`outDir/test/x.test.js` is `test/x.test.ts`). The caller removes it.
 */
export async function compileForTests(root) {
  const tsconfig = JSON.parse(await readFile(join(root, 'tsconfig.json'), 'utf8'));
  const base = join(root, 'test-artifacts', 'js');
  await mkdir(base, { recursive: true });
  await removeAbandoned(base);
  const outDir = await mkdtemp(join(base, 'run-'));
  const files = (await Promise.all(SOURCE_DIRS.map((dir) => typescriptFiles(join(root, dir))))).flat();
  // Kysely in one file, as the build makes it for dist/ (scripts/kysely-bundle.mjs): every compiled
  // file, the app's and the tests', imports that one copy, so `sql` and the classes are shared.
  const kysely = join(outDir, 'vendor', 'kysely.js');
  await bundleKysely(root, kysely, { target: `node${process.versions.node}` });
  await Promise.all(
    files.map(async (file) => {
      const source = await readFile(file, 'utf8');
      const { code } = await transform(source, {
        loader: 'ts',
        format: 'esm',
        platform: 'node',
        target: `node${process.versions.node}`,
        tsconfigRaw: { compilerOptions: tsconfig.compilerOptions },
        sourcefile: file,
        // The source's line numbers in stack traces (Node maps them with --enable-source-maps).
        sourcemap: 'inline',
        sourcesContent: false,
        define: {
          'import.meta.url': JSON.stringify(pathToFileURL(file).href),
          'import.meta.dirname': JSON.stringify(dirname(file)),
          'import.meta.filename': JSON.stringify(file),
        },
      });
      const out = join(outDir, relative(root, file)).replace(/\.ts$/, '.js');
      await mkdir(dirname(out), { recursive: true });
      await writeFile(out, pointAtBundle(code, out, kysely));
    }),
  );
  return outDir;
}

/** Folders a run left behind when it was killed outright (a day old: no run lasts that long). */
async function removeAbandoned(base) {
  const dayAgo = Date.now() - 24 * 3600_000;
  for (const name of await readdir(base)) {
    const dir = join(base, name);
    if ((await stat(dir).catch(() => null))?.mtimeMs < dayAgo) await removeCompiled(dir);
  }
}

export async function removeCompiled(outDir) {
  await rm(outDir, { recursive: true, force: true });
}
