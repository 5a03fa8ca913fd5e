import v8 from 'node:v8';

/**
 * How far V8 lets the old generation grow past what survived its last full collection before it
 * collects again, in percent. Left to itself V8 picks a factor of its own (up to 4) from how fast it
 * collects and allocates, and under load it let the service's heap fill with garbage: 220–250 MiB of RSS at most on
 * the HTTP bench and 195–215 MiB on the delivery bench, against 160–165 and 155 MiB with 20 % and no
 * measurable change in requests or messages a second (BENCHMARKS.md, "Changes measured", 2026-11-24).
 *
 * It is not a limit: the heap still grows as far as the live data needs (a `serve` process holding many
 * WhatsApp sessions must never crash at a cap, as it would with `--max-old-space-size`); only the
 * garbage between two collections is bounded. V8 reads this flag at every collection, so it can be set
 * once the process runs (heap sizes such as `--max-semi-space-size` cannot).
 */
export const HEAP_GROWING_PERCENT = 20;

const FLAG = '--heap-growing-percent';

/**
 * Applies HEAP_GROWING_PERCENT unless the operator chose a value on node's command line
 * (`node --heap-growing-percent=50 bin/voicenote.js serve`; 0 gives V8 its own choice back). NODE_OPTIONS
 * cannot carry this flag (Node refuses it there), so the command line is the operator's place for it.
 */
export function applyHeapSettings(execArgv: readonly string[] = process.execArgv): void {
  if (execArgv.some((arg) => arg.replaceAll('_', '-').startsWith(FLAG))) return;
  v8.setFlagsFromString(`${FLAG}=${HEAP_GROWING_PERCENT}`);
}
