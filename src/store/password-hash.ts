import { randomBytes, scrypt, scryptSync, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { DEFAULT_PASSWORD_HASH_COST, MAX_PASSWORD_HASH_COST } from '../config.js';

/**
 * Dashboard passwords, hashed with scrypt at OWASP's current parameters (Password Storage Cheat
 * Sheet: N=2^17, r=8, p=1), the parameters stored with the hash:
 *   scrypt$ln=17,r=8,p=1$<salt>$<hash>        (base64url, 16-byte salt, 32-byte hash)
 * Hashes from before have no parameters, `scrypt$<salt>$<hash>`, and were made with N=2^14: they are
 * still checked, and replaced at the next sign-in (needsRehash).
 *
 * The operator may set N's exponent, the cost, with PASSWORD_HASH_COST (docs/operations.md): 17 by
 * default, never under 14 (the cost of those older hashes). Each hash takes 128 × 2^cost × 8 bytes
 * and about a second of CPU at 17; the test suite, which signs in hundreds of times, sets 14.
 */
export interface ScryptParameters {
  /** log2 of N, the CPU and memory cost. */
  ln: number;
  r: number;
  p: number;
}

/** The parameters new hashes are made with at a given cost. */
export function scryptParameters(cost: number = DEFAULT_PASSWORD_HASH_COST): ScryptParameters {
  return { ln: cost, r: 8, p: 1 };
}

export const CURRENT_PARAMETERS: ScryptParameters = scryptParameters(DEFAULT_PASSWORD_HASH_COST);
const LEGACY_PARAMETERS: ScryptParameters = { ln: 14, r: 8, p: 1 };
const KEY_LENGTH = 32;
// Bounds for parameters read back from storage: a stored hash must not make a check cost a fortune.
const MAX_LN = MAX_PASSWORD_HASH_COST;

/** scrypt needs 128 × N × r bytes; Node refuses anything over 32 MiB unless told (N=2^17, r=8: 128 MiB). */
function options(params: ScryptParameters): ScryptOptions {
  const N = 2 ** params.ln;
  return { N, r: params.r, p: params.p, maxmem: 128 * N * params.r * params.p + 16 * 1024 * 1024 };
}

const format = (params: ScryptParameters): string => `ln=${params.ln},r=${params.r},p=${params.p}`;

interface Parsed {
  params: ScryptParameters;
  salt: Buffer;
  hash: Buffer;
}

function parse(stored: string | null): Parsed | null {
  const parts = (stored ?? '').split('$');
  if (parts[0] !== 'scrypt') return null;
  if (parts.length === 3 && parts[1] && parts[2]) return { params: LEGACY_PARAMETERS, salt: Buffer.from(parts[1], 'base64url'), hash: Buffer.from(parts[2], 'base64url') };
  if (parts.length !== 4 || !parts[2] || !parts[3]) return null;
  const match = /^ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})$/.exec(parts[1] ?? '');
  if (!match) return null;
  const params = { ln: Number(match[1]), r: Number(match[2]), p: Number(match[3]) };
  if (params.ln < 10 || params.ln > MAX_LN || params.r < 1 || params.p < 1) return null;
  return { params, salt: Buffer.from(parts[2], 'base64url'), hash: Buffer.from(parts[3], 'base64url') };
}

/**
 * Password hashes running at once in this process, at most; the rest wait their turn in order. Each
 * takes one of libuv's four threads (UV_THREADPOOL_SIZE) for about half a second and 128 MiB: ten at
 * once (a burst of sign-ins) held all four for seconds, and audio downloads' DNS look-ups and file
 * writes, which need those threads too, waited behind them. Two leave two threads for everything else.
 */
export const MAX_CONCURRENT_HASHES = 2;
let hashing = 0;
const waitingForHash: Array<() => void> = [];

async function inHashTurn<T>(work: () => Promise<T>): Promise<T> {
  if (hashing >= MAX_CONCURRENT_HASHES) await new Promise<void>((resolve) => waitingForHash.push(resolve));
  else hashing++;
  try {
    return await work();
  } finally {
    // The turn passes straight to the next in line (the count stays), or is given back.
    const next = waitingForHash.shift();
    if (next) next();
    else hashing--;
  }
}

const derive = (password: string, salt: Buffer, length: number, params: ScryptParameters): Promise<Buffer> =>
  inHashTurn(() => new Promise((resolve, reject) => scrypt(password, salt, length, options(params), (err, key) => (err ? reject(err) : resolve(key)))));

const encode = (params: ScryptParameters, salt: Buffer, hash: Buffer): string => `scrypt$${format(params)}$${salt.toString('base64url')}$${hash.toString('base64url')}`;

/** Off the event loop (libuv's thread pool): a sign-in must not stall other requests. */
export async function hashPasswordAsync(password: string, params: ScryptParameters = CURRENT_PARAMETERS): Promise<string> {
  const salt = randomBytes(16);
  return encode(params, salt, await derive(password, salt, KEY_LENGTH, params));
}

/** For the CLI (creating an account), where nothing else waits. */
export function hashPasswordSync(password: string, params: ScryptParameters = CURRENT_PARAMETERS): string {
  const salt = randomBytes(16);
  return encode(params, salt, scryptSync(password, salt, KEY_LENGTH, options(params)));
}

/** `params`: what new hashes are made with, the work done for an unknown account (`stored` null). */
export async function verifyPasswordAsync(password: string, stored: string | null, params: ScryptParameters = CURRENT_PARAMETERS): Promise<boolean> {
  const parsed = parse(stored);
  if (!parsed) {
    // Same work as a real check, so a wrong email takes as long as a wrong password.
    await derive(password, Buffer.alloc(16), KEY_LENGTH, params);
    return false;
  }
  const actual = await derive(password, parsed.salt, parsed.hash.length, parsed.params);
  return timingSafeEqual(actual, parsed.hash);
}

export function verifyPasswordSync(password: string, stored: string): boolean {
  const parsed = parse(stored);
  if (!parsed) return false;
  return timingSafeEqual(scryptSync(password, parsed.salt, parsed.hash.length, options(parsed.params)), parsed.hash);
}

/** A stored hash made with other parameters than `params` (today's): replace it once the password is known (at sign-in). */
export function needsRehash(stored: string | null, params: ScryptParameters = CURRENT_PARAMETERS): boolean {
  const parsed = parse(stored);
  if (!parsed) return false;
  const { ln, r, p } = parsed.params;
  return ln !== params.ln || r !== params.r || p !== params.p;
}
