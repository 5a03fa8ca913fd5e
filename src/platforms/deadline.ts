/**
 * A signal that aborts when `parent` does (if there is one), or once `ms` have passed: whichever comes
 * first. `clear()` when the work is done.
 *
 * For the platform call every delivery makes, and Telegram's chat actions (whose repetitions have no parent). `AbortSignal.any([AbortSignal.timeout(ms), parent])`
 * makes two signals (creating one costs Node about 10 µs) and leaves the timeout's timer, and the
 * signals it holds, behind until `ms` have passed: thousands of them in a busy worker. This makes one
 * signal and clears its timer (74 → 33 µs with the attempt's own signal; BENCHMARKS.md).
 */
export interface Deadline {
  readonly signal: AbortSignal;
  /** The time ran out (rather than `parent` aborting). */
  readonly timedOut: boolean;
  clear(): void;
}

export function deadline(parent: AbortSignal | undefined, ms: number): Deadline {
  const controller = new AbortController();
  let timedOut = false;
  const onParentAbort = () => controller.abort(parent?.reason);
  const timer = setTimeout(() => {
    timedOut = true;
    // The reason AbortSignal.timeout gives.
    controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
  }, ms);
  // Like AbortSignal.timeout's: the call in flight keeps the process up, not its deadline.
  timer.unref();
  if (parent?.aborted) onParentAbort();
  else parent?.addEventListener('abort', onParentAbort, { once: true });
  return {
    signal: controller.signal,
    get timedOut() {
      return timedOut;
    },
    clear() {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onParentAbort);
    },
  };
}
