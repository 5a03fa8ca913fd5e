// Copies what n8n reads beside the compiled nodes and credentials (icons, codex files) into dist/, as
// `n8n-node build` does: tsc compiles only the TypeScript.
import { copyFile, mkdir, readdir } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

async function* staticFiles(dir) {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* staticFiles(path);
    else if (/\.(svg|png|json)$/.test(entry.name)) yield path;
  }
}

for (const folder of ['credentials', 'nodes']) {
  for await (const file of staticFiles(join(root, folder))) {
    const target = join(root, 'dist', relative(root, file));
    await mkdir(dirname(target), { recursive: true });
    await copyFile(file, target);
  }
}
