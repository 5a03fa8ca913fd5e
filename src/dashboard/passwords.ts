import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

// The stored form is the one accounts have always used: `scrypt$<salt>$<hash>` (base64url, scrypt with
// N=16384, r=8, p=1, 32-byte hash). Done asynchronously here: a sign-in must not stall other requests.
const KEY_LENGTH = 32;
export const MIN_PASSWORD_LENGTH = 8;
export const MAX_PASSWORD_LENGTH = 1024;

const derive = (password: string, salt: Buffer, length: number): Promise<Buffer> =>
  new Promise((resolve, reject) => scrypt(password, salt, length, (err, key) => (err ? reject(err) : resolve(key))));

export async function hashPasswordAsync(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await derive(password, salt, KEY_LENGTH);
  return `scrypt$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

export async function verifyPasswordAsync(password: string, stored: string | null): Promise<boolean> {
  const [scheme, salt, hash] = (stored ?? '').split('$');
  if (scheme !== 'scrypt' || !salt || !hash) {
    // Same work as a real check, so a wrong email takes as long as a wrong password.
    await derive(password, Buffer.alloc(16), KEY_LENGTH);
    return false;
  }
  const expected = Buffer.from(hash, 'base64url');
  const actual = await derive(password, Buffer.from(salt, 'base64url'), expected.length);
  return timingSafeEqual(actual, expected);
}
