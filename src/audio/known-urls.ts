/**
 * What each audio URL served last (its SHA-256) and when, so a URL downloaded less than `freshMs` ago
 * is taken from the cache without downloading it again; and which request leads a URL's download while
 * the others for it wait (a thousand recipients of one URL: one download, one conversion).
 */

const MAX_KNOWN_URLS = 10_000;

const noop = (): void => undefined;

/** Either this request leads the URL's download (and calls `done` when it ends), or it waits for the leader. */
export type UrlTurn = { leads: true; done: () => void } | { leads: false; leader: Promise<void> };

export class KnownUrls {
  /** Oldest first: the map's order is the order of last downloads. */
  readonly #served = new Map<string, { sha256: string; at: number }>();
  readonly #leaders = new Map<string, Promise<void>>();

  /** `freshMs`: how long what a URL served is trusted; 0 downloads every time. */
  constructor(readonly freshMs: number) {}

  /** The SHA-256 of what `url` served less than `freshMs` ago; forgets an older one. */
  fresh(url: string): string | undefined {
    const known = this.#served.get(url);
    if (!known) return undefined;
    if (Date.now() - known.at >= this.freshMs) {
      this.#served.delete(url);
      return undefined;
    }
    return known.sha256;
  }

  remember(url: string, sha256: string): void {
    if (this.freshMs <= 0) return;
    this.#served.delete(url);
    this.#served.set(url, { sha256, at: Date.now() });
    for (const oldest of this.#served.keys()) {
      if (this.#served.size <= MAX_KNOWN_URLS) break;
      this.#served.delete(oldest);
    }
  }

  /** Decided with no await in between: the first caller for a URL leads until it calls `done`. */
  turn(url: string): UrlTurn {
    const leader = this.#leaders.get(url);
    if (leader) return { leads: false, leader };
    let release = noop;
    this.#leaders.set(url, new Promise<void>((resolve) => (release = resolve)));
    return {
      leads: true,
      done: () => {
        this.#leaders.delete(url);
        release();
      },
    };
  }
}
