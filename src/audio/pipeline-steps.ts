import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { AudioError } from './errors.js';
import type { FetchedSource } from './fetch.js';
import type { AudioTarget } from './targets.js';

/** The audio pipeline's small steps: waits a caller may abort, the length limits apply to, a shipped file taken as a download. */

// Encoders pad a few frames; a 60.0 s recording must not fail a 60 s limit over 20 ms of padding.
const DURATION_TOLERANCE_SECONDS = 0.1;

/** `promise`, or the signal's reason as soon as it is aborted. */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err as Error);
      },
    );
  });
}

/** The length the limits apply to and platforms are told: the file's own, else the caller's word for it. */
export function lengthOf(measured: number | null, hint: number | null): number | null {
  return measured !== null && Number.isFinite(measured) && measured > 0 ? measured : hint;
}

export function tooLong(seconds: number, max: number): AudioError {
  return new AudioError('audio_too_long', `audio is ${seconds.toFixed(1)} s long; the platform allows at most ${max} s`);
}

export function exceedsDuration(seconds: number | null, target: AudioTarget): boolean {
  return seconds !== null && target.maxDurationSeconds !== null && seconds > target.maxDurationSeconds + DURATION_TOLERANCE_SECONDS;
}

/** A shipped file taken as if downloaded: copied to the download path, hashed on the way. */
export async function copyLocalSource(from: string, destPath: string, url: string): Promise<FetchedSource> {
  const hash = createHash('sha256');
  let sizeBytes = 0;
  await pipeline(
    createReadStream(from),
    async function* (chunks: AsyncIterable<Buffer>) {
      for await (const chunk of chunks) {
        hash.update(chunk);
        sizeBytes += chunk.length;
        yield chunk;
      }
    },
    createWriteStream(destPath),
  );
  return { path: destPath, sizeBytes, sha256: hash.digest('hex'), finalUrl: url };
}
