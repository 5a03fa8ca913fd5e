import { randomFillSync } from 'node:crypto';

/**
 * Random bytes from the operating system's CSPRNG, drawn 4 KiB at a time. One `randomBytes` call is a
 * system call (about 8 µs on a virtual machine); the request path needs a few small values per request
 * (a request id, a message id, a nonce), so it takes them from a pool filled by one call. Each value is
 * handed out once; a used pool is dropped, never refilled in place, so bytes already given stay as given.
 */
const POOL_SIZE = 4096;

let pool = Buffer.alloc(0);
let offset = 0;

/** `size` fresh random bytes (at most 256; larger requests are for keys and belong to `randomBytes`). */
export function randomBytesPooled(size: number): Buffer {
  if (!Number.isInteger(size) || size < 0 || size > 256) throw new RangeError(`randomBytesPooled takes 0 to 256 bytes, got ${size}`);
  if (offset + size > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafe(POOL_SIZE));
    offset = 0;
  }
  const bytes = pool.subarray(offset, offset + size);
  offset += size;
  return bytes;
}
