/** What one item of a batch came to: its value, or the error that item alone ran into. */
export type ItemResult<T> = { ok: true; value: T } | { ok: false; error: unknown };

/**
 * Collects the items asked for in one turn of the event loop (requests that arrived together) and
 * hands them to `run` together, once that turn is over; each caller's promise settles with its own
 * item's result. When `run` throws, every item of the batch fails with that error.
 */
export class TurnBatch<In, Out> {
  readonly #run: (inputs: In[]) => Promise<Array<ItemResult<Out>>> | Array<ItemResult<Out>>;
  readonly #maxItems: number;
  readonly #maxInFlight: number;
  #inFlight = 0;
  #queue: Array<{ input: In; resolve(value: Out): void; reject(error: unknown): void }> = [];
  #scheduled = false;

  /**
   * `maxInFlight`: batches that may be running at once (unbounded when absent); what arrives while
   * that many run waits and goes together into the next one (larger batches, for work where each
   * batch costs a commit and a disk flush).
   */
  constructor(run: (inputs: In[]) => Promise<Array<ItemResult<Out>>> | Array<ItemResult<Out>>, options: { maxItems: number; maxInFlight?: number }) {
    this.#run = run;
    this.#maxItems = options.maxItems;
    this.#maxInFlight = options.maxInFlight ?? Infinity;
  }

  add(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.#queue.push({ input, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      const batch = this.#queue.splice(0, this.#maxItems);
      this.#inFlight++;
      void this.#settle(batch).finally(() => {
        this.#inFlight--;
        if (this.#queue.length > 0) this.#schedule();
      });
      if (this.#queue.length > 0) this.#schedule();
    });
  }

  async #settle(batch: Array<{ input: In; resolve(value: Out): void; reject(error: unknown): void }>): Promise<void> {
    let results: Array<ItemResult<Out>>;
    try {
      results = await this.#run(batch.map((item) => item.input));
    } catch (error) {
      for (const item of batch) item.reject(error);
      return;
    }
    batch.forEach((item, i) => {
      const result = results[i]!;
      if (result.ok) item.resolve(result.value);
      else item.reject(result.error);
    });
  }
}

/** Runs `fn`, catching what it throws as the item's own result. */
export function itemResult<T>(fn: () => T): ItemResult<T> {
  try {
    return { ok: true, value: fn() };
  } catch (error) {
    return { ok: false, error };
  }
}
