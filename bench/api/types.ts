/** What the API bench's server processes measure and hand back to the orchestrator. */
import type { LoadResult } from '../loadgen.js';
import type { Storage } from './settings.js';

export interface Endpoint {
  label: string;
  what: string;
  /** Index of the endpoint this one is compared with (its bare twin); itself for a baseline. */
  baseline: number;
  load: LoadResult;
  /** CPU time of the server process (every thread) per request, in µs. */
  cpuUsPerRequest: number;
}

export type Phase = 'http' | 'delivery';

/** What one server process measured: one storage, one phase. */
export interface StorageResult {
  storage: Storage;
  phase: Phase;
  endpoints: Endpoint[];
  readKeys: number;
  rowsAfterSendLoad: number;
  /** SQLite: the size of the write-ahead log file after the send load. */
  walBytesAfterSendLoad?: number;
  delivery?: {
    messages: number;
    delivered: number;
    failed: number;
    firstError: string | null;
    ms: number;
    /** From starting the worker process to its first claim (not in `ms`). */
    startupMs: number;
    concurrency: string;
    telegramCalls: number;
    /** 429s the fake's flood control answered: a send that came faster than Telegram allows. */
    floodRefusals: number;
    /** CPU time over the run's wall time, in cores: the worker process, and the fake Bot API's. */
    serverCpu: number;
    fakeCpu: number;
  };
  /** RSS at the start of the measured phase, the largest sample during it, and the process maximum. */
  rss: { start: number; max: number; peak: number };
}
