/**
 * The loop shared by the delivery worker and the webhook sender: take a turn (claim what is due and
 * start it), then sleep until the next due time or until a notice (new work accepted in this process,
 * a slot freed) cuts the sleep short; while storage is away, a real pause that notices do not cut short;
 * on stop, no more turns and the work in hand gets a grace to finish. What a turn claims, and how, is
 * its owner's: this module knows only turns, sleeps and the work in flight.
 */

/** What the loop does after a turn. */
export type NextTurn =
  /** Claimed all it could take: look again at once. */
  | { next: 'again' }
  /** Sleep up to `ms` (the next due time, or the poll): a notice ends it early. */
  | { next: 'sleep'; ms: number }
  /** Storage is away: wait `ms` whatever notices come (only stop() ends it early). */
  | { next: 'pause'; ms: number };

export interface DueLoopOptions {
  /** One turn. `woken`: the sleep before it was ended by a notice, not by its time. */
  turn(context: { woken: boolean }): Promise<NextTurn>;
  /** How long to pause after a turn that threw (nothing should throw; the loop must live on). */
  pollMs: number;
  onError(err: unknown): void;
}

/** Milliseconds to sleep for an item due in `wait` ms (undefined: nothing due): at most `pollMs`, at least 5; `pollMs` when storage cannot say. */
export async function untilNextDue(read: () => Promise<number | undefined>, pollMs: number): Promise<number> {
  try {
    const wait = await read();
    return wait === undefined ? pollMs : Math.min(pollMs, Math.max(wait, 5));
  } catch {
    return pollMs;
  }
}

export class DueLoop {
  readonly #options: DueLoopOptions;
  readonly #inFlight = new Map<string, Promise<void>>();
  #running = false;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #wakeRequested = false;

  constructor(options: DueLoopOptions) {
    this.#options = options;
  }

  get running(): boolean {
    return this.#running;
  }

  /** Work started by the turns and not finished yet, by id. */
  get inFlight(): ReadonlyMap<string, Promise<void>> {
    return this.#inFlight;
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  /** A notice: new work or a free slot; the current sleep ends (or the next one does not begin). */
  nudge(): void {
    this.#wakeRequested = true;
    this.#wake?.();
  }

  /** Keeps `done` as work in flight until it settles; its end is a notice (a slot is free). */
  track(id: string, done: Promise<void>): void {
    const tracked = done.finally(() => {
      this.#inFlight.delete(id);
      this.nudge();
    });
    this.#inFlight.set(id, tracked);
  }

  /** No more turns (the current one ends first); then up to `graceMs` for the work in flight. */
  async stop(graceMs: number): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    this.#wake?.();
    await this.#loop;
    await this.settleWithin(graceMs);
  }

  /** Waits until the work in flight is done or `ms` have passed. */
  async settleWithin(ms: number): Promise<void> {
    if (this.#inFlight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.#inFlight.values()]), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  }

  async #run(): Promise<void> {
    let woken = false;
    while (this.#running) {
      // Reset on every turn, whatever happens in it: a notice left pending would make the sleep return at
      // once and spin this loop on microtasks, starving timers and the very work whose end frees a slot.
      this.#wakeRequested = false;
      let next: NextTurn;
      try {
        next = await this.#options.turn({ woken });
      } catch (err) {
        this.#options.onError(err);
        next = { next: 'pause', ms: this.#options.pollMs };
      }
      if (next.next === 'again') {
        woken = false;
        continue;
      }
      if (next.next === 'pause') await this.#pause(next.ms);
      else await this.#sleep(next.ms);
      woken = this.#wakeRequested;
    }
  }

  /** While storage is away: a real wait (notices do not cut it short), ended early only by stop(). */
  #pause(ms: number): Promise<void> {
    if (!this.#running) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = () => {
        if (!this.#running) done();
      };
    });
  }

  #sleep(ms: number): Promise<void> {
    if (this.#wakeRequested || !this.#running) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }
}
