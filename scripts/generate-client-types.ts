/**
 * Writes the typed client's types from the OpenAPI document the app serves at /api/v1/openapi.json:
 * the app is built (routes registered, nothing listening) on a throwaway SQLite folder, its document
 * taken, and openapi-typescript turns it into clients/typescript/src/schema.ts.
 *
 * Runs in `npm run build` and `npm run typecheck`, so the types follow every endpoint the app has
 * (a route added anywhere is in the next build's types) and are never committed (nothing to go stale).
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { OpenAPI3 } from 'openapi-typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OUT_DIR = path.join(ROOT, 'clients', 'typescript', 'src');
/** What the last generation was made from: a hash of src/ and package.json, beside the outputs (ignored by git too). */
const STAMP = path.join(OUT_DIR, '..', 'openapi.stamp');

/** The document comes from the app's code only: the same src/ and package.json give the same types. */
async function sourcesHash(): Promise<string> {
  const hash = createHash('sha256');
  const files = (await readdir(path.join(ROOT, 'src'), { recursive: true, withFileTypes: true }))
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name))
    .sort();
  for (const file of [path.join(ROOT, 'package.json'), ...files]) hash.update(file).update(await readFile(file));
  return hash.digest('hex');
}

async function servedDocument(): Promise<OpenAPI3> {
  // Loaded only when the types are made again (loading the app is most of this script's time).
  const { createApp } = await import('../src/app.js');
  const { loadConfig } = await import('../src/config.js');
  const { default: pino } = await import('pino');
  const dataDir = await mkdtemp(path.join(tmpdir(), 'voicenote-openapi-'));
  try {
    const config = loadConfig({ DATA_DIR: dataDir, SECRET_KEY: randomBytes(32).toString('base64'), LOG_LEVEL: 'silent' });
    const app = await createApp(config, { worker: false, logger: pino({ level: 'silent' }) });
    try {
      // The same document GET /api/v1/openapi.json answers with.
      const response = await app.server.app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
      if (response.statusCode !== 200) throw new Error(`GET /api/v1/openapi.json answered ${response.statusCode}`);
      return JSON.parse(response.body) as OpenAPI3;
    } finally {
      await app.close();
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

const hash = await sourcesHash();
const made = await Promise.all([readFile(STAMP, 'utf8'), readFile(path.join(OUT_DIR, 'schema.ts'))]).then(([stamp]) => stamp.trim(), () => '');
if (made === hash) {
  console.log('client types: up to date with src/');
  process.exit(0);
}
const document = await servedDocument();
const { default: openapiTS, astToString } = await import('openapi-typescript');
const ast = await openapiTS(document, { alphabetize: true });
const header = '// Generated from the OpenAPI document the voicenote app serves; do not edit (npm run client:generate).\n';
await writeFile(path.join(OUT_DIR, 'schema.ts'), header + astToString(ast));
await writeFile(path.join(OUT_DIR, '..', 'openapi.json'), `${JSON.stringify(document, null, 2)}\n`);
await writeFile(STAMP, `${hash}\n`);
