/**
 * How much of the event loop in-process Opus encodes may take. They run on the main thread of the
 * process that converts (a worker), beside its deliveries: flat out, 50 distinct notes converting
 * took the loop from 1,000 notes whose audio was ready, delivered meanwhile at 15 % of their rate
 * alone (BENCHMARKS.md, "Deliveries while distinct notes convert"). So while the process has notes
 * with their audio ready in hand, an encode rests after each pipe read for long enough that encoding
 * takes at most this share of the time; with nothing else to do, it runs flat out.
 */
export const ENCODE_SHARE_WHILE_DELIVERING = 0.15;

/** Whether this process has deliveries waiting on the event loop (set by its worker). */
let delivering: () => boolean = () => false;

/** The worker says how to tell; returns the undo, for a worker that stops. */
export function shareEncodesWith(hasReadyDeliveries: () => boolean): () => void {
  delivering = hasReadyDeliveries;
  return () => {
    if (delivering === hasReadyDeliveries) delivering = () => false;
  };
}

/** After `spentMs` of encoding, how long the encode rests before its next read (0: go on at once). */
export function restAfterEncoding(spentMs: number): number {
  if (spentMs <= 0 || !delivering()) return 0;
  return (spentMs * (1 - ENCODE_SHARE_WHILE_DELIVERING)) / ENCODE_SHARE_WHILE_DELIVERING;
}
