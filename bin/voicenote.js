#!/usr/bin/env node
// The CLI runs from the compiled output; `npm install` builds it (the `prepare` script).
import { existsSync } from 'node:fs';
import module from 'node:module';
import { fileURLToPath } from 'node:url';

const compiled = new URL('../dist/cli.js', import.meta.url);
if (!existsSync(fileURLToPath(compiled))) {
  process.stderr.write('voicenote: dist/ is missing; run `npm run build` (npm install does it) first\n');
  process.exit(1);
}
// Everything the service creates (DATA_DIR, the database and its WAL, the audio cache, backups,
// ffmpeg's output) is for its own user only: 0700 folders, 0600 files (docs/security.md, "Files at rest").
process.umask(0o077);
// Node 22 and later keep the compiled code of the modules a start loads, so the next start (a CLI
// command, a restart) skips most of the ~1 s of loading them. Beside the installed package, for its
// user only; where that cannot be written (a read-only install), starts are as before. Node 20 has no
// such cache.
try {
  module.enableCompileCache?.(fileURLToPath(new URL('../node_modules/.cache/voicenote-compile/', import.meta.url)));
} catch {
  // No cache: nothing else changes.
}
// Before anything else: V8 collects garbage sooner than it would by itself (src/heap.ts says why).
const { applyHeapSettings } = await import(new URL('../dist/heap.js', import.meta.url).href);
applyHeapSettings();
const { main } = await import(compiled.href);
await main(process.argv);
