// A node:test reporter for scripts/test-batch.mjs: one line per test file (a top-level suite of the
// batch) when it ends, `SUMMARY_MARK` and JSON: its tests' counts, and whether the file's suite itself
// failed. scripts/run-tests.mjs takes these lines out of the output, with the batch's `USAGE_MARK` lines
// (each file's wall and CPU time); the spec reporter beside it writes what people read. They go to
// stderr: a pipe, written at once, so the last line is out before --test-force-exit ends the process
// (a file destination lost it).
export const SUMMARY_MARK = '##test-file-summary ';
export const USAGE_MARK = '##test-file-usage ';

export default async function* fileSummaries(source) {
  let current;
  for await (const event of source) {
    const { type, data } = event;
    if (type !== 'test:start' && type !== 'test:pass' && type !== 'test:fail') continue;
    if (data.nesting === 0) {
      if (type === 'test:start') {
        current = { file: data.name, tests: 0, pass: 0, fail: 0, skipped: 0, todo: 0, cancelled: 0 };
        continue;
      }
      if (!current) continue;
      const counts = current;
      current = undefined;
      const error = data.details?.error;
      yield `${SUMMARY_MARK}${JSON.stringify({
        ...counts,
        ms: Math.round(data.details?.duration_ms ?? 0),
        // The file's suite failed although no test did: its import threw, or one of its hooks failed.
        fileFailed: type === 'test:fail',
        ...(type === 'test:fail' && counts.fail === 0 && error ? { error: String(error.cause?.stack ?? error.cause ?? error.message ?? error) } : {}),
      })}\n`;
      continue;
    }
    // A suite's own pass or fail is its tests'; count tests only, as the spec reporter's summary does.
    if (!current || type === 'test:start' || data.details?.type === 'suite') continue;
    current.tests += 1;
    if (type === 'test:pass') {
      if (data.skip) current.skipped += 1;
      else if (data.todo) current.todo += 1;
      else current.pass += 1;
    } else if (data.details?.error?.failureType === 'cancelledByParent') current.cancelled += 1;
    else current.fail += 1;
  }
}
