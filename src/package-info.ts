import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from './config.js';

let version: string | undefined;

/** The installation's package.json version: one number for `voicenote --version`, the OpenAPI document and /docs. */
export function packageVersion(): string {
  version ??= (JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version?: string }).version ?? '0.0.0';
  return version;
}
