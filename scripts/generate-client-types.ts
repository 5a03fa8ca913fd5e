/**
 * Writes the typed client's types from the OpenAPI document the app serves at /api/v1/openapi.json:
 * the app is built (routes registered, nothing listening) on a throwaway SQLite folder, its document
 * taken, and openapi-typescript turns it into clients/typescript/src/schema.ts.
 *
 * Runs in `npm run build` and `npm run typecheck`, so the types follow every endpoint the app has
 * (a route added anywhere is in the next build's types) and are never committed (nothing to go stale).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import pino from 'pino';
import { createApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OUT_DIR = path.join(ROOT, 'clients', 'typescript', 'src');

async function servedDocument(): Promise<OpenAPI3> {
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

const document = await servedDocument();
const ast = await openapiTS(document, { alphabetize: true });
const header = '// Generated from the OpenAPI document the voicenote app serves; do not edit (npm run client:generate).\n';
await writeFile(path.join(OUT_DIR, 'schema.ts'), header + astToString(ast));
await writeFile(path.join(OUT_DIR, '..', 'openapi.json'), `${JSON.stringify(document, null, 2)}\n`);
