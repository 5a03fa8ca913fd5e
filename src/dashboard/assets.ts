import { readFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface Asset {
  body: Buffer;
  contentType: string;
}

const TYPES: Record<string, string> = { css: 'text/css; charset=utf-8', js: 'text/javascript; charset=utf-8' };
const FILES = ['dashboard.css', 'dashboard.js'];

/**
 * The dashboard's stylesheet and script, read once. They live in src/dashboard/assets/; the compiled
 * code (dist/dashboard/) finds them there too, since the build does not copy them.
 */
export function loadAssets(): Map<string, Asset> {
  const candidates = [new URL('./assets/', import.meta.url), new URL('../../src/dashboard/assets/', import.meta.url)];
  const dir = candidates.find((url) => existsSync(fileURLToPath(new URL('dashboard.css', url))));
  if (!dir) throw new Error('dashboard assets not found (src/dashboard/assets/)');
  return new Map(
    FILES.map((name) => [name, { body: readFileSync(fileURLToPath(new URL(name, dir))), contentType: TYPES[name.split('.').pop()!]! }]),
  );
}
