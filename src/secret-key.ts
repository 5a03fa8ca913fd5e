import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseSecretKey } from './config.js';
import { PRIVATE_DIR_MODE } from './core/private-files.js';

/**
 * The key that seals credentials at rest: SECRET_KEY when set, else one generated once into
 * DATA_DIR/secret.key (mode 0600) and reused on every later start.
 */
export function loadOrCreateSecretKey(dataDir: string, fromConfig: Buffer | undefined): Buffer {
  if (fromConfig) return fromConfig;
  const file = path.join(dataDir, 'secret.key');
  fs.mkdirSync(dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  try {
    fs.writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  return parseSecretKey(fs.readFileSync(file, 'utf8'), file);
}
