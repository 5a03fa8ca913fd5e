/** Pacing shared by the platforms: how sends of one account, bot or session are spread out in time. */

/** More sends of one key are lined up in this process than may wait here. */
export class PacingBacklog extends Error {
  constructor(readonly ahead: number) {
    super(`${ahead} sends of this key are already in line`);
    this.name = 'PacingBacklog';
  }
}

/**
 * One piece of work at a time per key (an account, a session), each followed by a gap, so one key never
 * sends in bursts; other keys are not held up. In-process only. At most `maxWaiting` pieces wait for
 * their turn; more are refused with PacingBacklog, so one busy key cannot fill every worker slot.
 */
export class KeyedPacer {
  readonly #tails = new Map<string, Promise<void>>();
  /** Pieces of work per key that hold the turn (running or in their gap) or wait for it. */
  readonly #lined = new Map<string, number>();
  constructor(
    private readonly gapMs: () => number,
    private readonly maxWaiting = Number.POSITIVE_INFINITY,
  ) {}

  async run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const ahead = this.#lined.get(key) ?? 0;
    if (ahead > this.maxWaiting) throw new PacingBacklog(ahead);
    this.#lined.set(key, ahead + 1);
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release = (): void => undefined;
    const done = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => done);
    this.#tails.set(key, tail);
    await previous;
    try {
      return await work();
    } finally {
      setTimeout(() => {
        if (this.#tails.get(key) === tail) this.#tails.delete(key);
        const left = (this.#lined.get(key) ?? 1) - 1;
        if (left > 0) this.#lined.set(key, left);
        else this.#lined.delete(key);
        release();
      }, this.gapMs());
    }
  }
}

