#!/usr/bin/env node
// The CLI runs from the compiled output; `npm install` builds it (the `prepare` script).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const compiled = new URL('../dist/cli.js', import.meta.url);
if (!existsSync(fileURLToPath(compiled))) {
  process.stderr.write('voicenote: dist/ is missing; run `npm run build` (npm install does it) first\n');
  process.exit(1);
}
// Everything the service creates (DATA_DIR, the database and its WAL, the audio cache, backups,
// ffmpeg's output) is for its own user only: 0700 folders, 0600 files (docs/security.md, "Files at rest").
process.umask(0o077);
// Before anything else: V8 collects garbage sooner than it would by itself (src/heap.ts says why).
const { applyHeapSettings } = await import(new URL('../dist/heap.js', import.meta.url).href);
applyHeapSettings();
const { main } = await import(compiled.href);
await main(process.argv);
