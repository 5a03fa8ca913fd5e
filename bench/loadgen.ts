/**
 * The load generator of bench/api.ts, in a process of its own so that it does not share an event loop
 * with the server it measures. Started with fork(); takes one LoadSpec as JSON in argv[2], runs
 * autocannon once and sends back a LoadResult over IPC.
 */
import { createRequire } from 'node:module';

export interface LoadRequest {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface LoadSpec {
  url: string;
  connections: number;
  seconds: number;
  /** Cycled through in order on every connection (several keys spread one endpoint over rate-limit buckets). */
  requests: LoadRequest[];
  /**
   * One cycle for all connections together instead of one per connection: each request sent is the
   * list's next. Without it, connections started together go through the list side by side, so a list
   * of sends to many chats becomes bursts of one send per connection to one chat at a time.
   */
  shareCycle?: boolean;
  /** Requests per second over all connections; as fast as possible when absent. */
  rate?: number;
}

export interface LoadResult {
  /** Mean requests per second over the per-second samples. */
  rps: number;
  p50: number;
  p99: number;
  total: number;
  ok2xx: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  seconds: number;
}

/** The part of autocannon's result this script reads (autocannon ships no types). */
interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number };
  '2xx': number;
  non2xx: number;
  errors: number;
  timeouts: number;
  duration: number;
}
type Autocannon = (opts: Record<string, unknown>) => Promise<AutocannonResult>;

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '') as LoadSpec;
  const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;
  let next = 0;
  const requests = spec.shareCycle
    ? [{ setupRequest: (request: object) => ({ ...request, ...spec.requests[next++ % spec.requests.length] }) }]
    : spec.requests;
  const result = await autocannon({
    url: spec.url,
    connections: spec.connections,
    duration: spec.seconds,
    requests,
    ...(spec.rate ? { overallRate: spec.rate } : {}),
  });
  const out: LoadResult = {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    total: result.requests.total,
    ok2xx: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    seconds: result.duration,
  };
  process.send!(out, () => process.exit(0));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
