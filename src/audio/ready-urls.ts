/**
 * URLs whose audio this process recently had ready for a profile (converted, or found in the cache):
 * what the worker's claim guesses from, before any download, whether a note will need a conversion.
 * Only a guess for scheduling: a URL whose bytes changed is found out by its download as before.
 */

/** Long enough that a broadcast's later batches, and a note sent again, count as ready. */
const READY_FOR_MS = 60 * 60_000;
const MAX_READY_URLS = 10_000;

export class ReadyUrls {
  readonly #at = new Map<string, number>();

  constructor(private readonly clock: () => number = Date.now) {}

  static #key(url: string, profile: string): string {
    return `${profile} ${url}`;
  }

  ready(url: string, profile: string): void {
    const key = ReadyUrls.#key(url, profile);
    this.#at.delete(key);
    this.#at.set(key, this.clock());
    for (const oldest of this.#at.keys()) {
      if (this.#at.size <= MAX_READY_URLS) break;
      this.#at.delete(oldest);
    }
  }

  has(url: string, profile: string): boolean {
    const key = ReadyUrls.#key(url, profile);
    const at = this.#at.get(key);
    if (at === undefined) return false;
    if (this.clock() - at < READY_FOR_MS) return true;
    this.#at.delete(key);
    return false;
  }
}
