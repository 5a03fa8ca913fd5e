import { open } from 'node:fs/promises';
import type { VoiceFile } from './platform.js';

/**
 * The bytes of small voice files kept in memory, so a thousand recipients of one recording cost one
 * read of the file rather than four file operations each (open, stat, read, close). Only files that
 * carry a `contentKey` are kept (converted files of the audio cache, named by what they hold), bounded
 * in total bytes, oldest dropped first.
 */
export class VoiceBytes {
  readonly #kept = new Map<string, Buffer>();
  #total = 0;

  constructor(
    /** Larger files are streamed from disk by the caller, never kept. */
    readonly maxFileBytes = 1024 * 1024,
    readonly maxTotalBytes = 16 * 1024 * 1024,
  ) {}

  /** Whether `read` takes this file (it is small enough to sit in memory whole). */
  fits(voice: VoiceFile): boolean {
    return voice.sizeBytes <= this.maxFileBytes;
  }

  /**
   * The whole file. One handle for the whole read: the bytes are the file's as of this moment even if
   * the audio cache replaces its path meanwhile.
   */
  async read(voice: VoiceFile): Promise<Buffer> {
    const key = voice.contentKey;
    const kept = key !== undefined ? this.#kept.get(key) : undefined;
    if (kept !== undefined) {
      // Most recently used last: the Map's order is the order of eviction.
      this.#kept.delete(key!);
      this.#kept.set(key!, kept);
      return kept;
    }
    const file = await open(voice.path, 'r');
    let bytes: Buffer;
    try {
      const { size } = await file.stat();
      if (size > this.maxFileBytes) throw new Error(`the voice file grew to ${size} bytes since it was prepared`);
      bytes = Buffer.allocUnsafe(size);
      let position = 0;
      while (position < size) {
        const { bytesRead } = await file.read(bytes, position, size - position, position);
        if (bytesRead === 0) throw new Error('the voice file is shorter than its own size');
        position += bytesRead;
      }
    } finally {
      await file.close();
    }
    if (key !== undefined) this.#keep(key, bytes);
    return bytes;
  }

  #keep(key: string, bytes: Buffer): void {
    if (bytes.length > this.maxTotalBytes) return;
    this.#kept.set(key, bytes);
    this.#total += bytes.length;
    for (const [oldKey, old] of this.#kept) {
      if (this.#total <= this.maxTotalBytes) break;
      this.#kept.delete(oldKey);
      this.#total -= old.length;
    }
  }
}
