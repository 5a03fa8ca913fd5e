// Runs several test files in one Node process, one after another (scripts/run-tests.mjs starts it).
//
//   node --test-reporter=… scripts/test-batch.mjs COMPILED_DIR test/a.test.ts test/b.test.ts …
//
// Why: a test file's own process costs about 1.8 s of CPU before its first test (Node, the app's
// modules, the first server's compiled schemas), as much as a small file's tests themselves. In one
// process the second file finds all of that done.
//
// Each file becomes a top-level suite named by its path, and the file is imported inside that suite,
// so everything it declares — suites, tests, and its top-level `before`/`after` hooks — belongs to it:
// a file's `after` runs when its own tests end, not at the end of the batch. Each file's import starts
// as its suite is declared (all of them at the start, in order); their tests run one file after
// another, in the order given.
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { pathToFileURL } from 'node:url';
import { USAGE_MARK } from './test-batch-reporter.mjs';

const [compiledDir, ...files] = process.argv.slice(2);
for (const file of files) {
  const url = pathToFileURL(join(compiledDir, file.replace(/\.ts$/, '.js'))).href;
  describe(file, () => {
    // The file's own CPU and wall time, from before its first test to after its last (hooks of the
    // file's suite: the reporter hears of a suite late, once its first test reports).
    let cpu;
    let startedAt;
    before(() => {
      cpu = process.cpuUsage();
      startedAt = performance.now();
    });
    after(() => {
      const used = process.cpuUsage(cpu);
      process.stderr.write(`${USAGE_MARK}${JSON.stringify({ file, ms: Math.round(performance.now() - startedAt), cpuMs: Math.round((used.user + used.system) / 1000) })}\n`);
    });
    return import(url);
  });
}
