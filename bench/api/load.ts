/** Load from another process (bench/loadgen.ts), and what a process costs, read from /proc. */
import { fork } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { LoadRequest, LoadResult, LoadSpec } from '../loadgen.js';
import { CLOCK_TICKS, CONNECTIONS, LOADGEN, RSS_SAMPLE_MS, SECONDS, WARMUP_SECONDS } from './settings.js';

export function runLoad(spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = fork(LOADGEN, [JSON.stringify(spec)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let result: LoadResult | undefined;
    child.on('message', (m) => {
      result = m as LoadResult;
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (result) resolve(result);
      else reject(new Error(`load generator exited with ${code} and no result`));
    });
  });
}

/** The load's figures, and the server process's CPU time (all its threads, from /proc) per request answered meanwhile. */
export async function measure(pid: number, url: string, requests: LoadRequest[]): Promise<{ load: LoadResult; cpuUsPerRequest: number }> {
  if (WARMUP_SECONDS > 0) await runLoad({ url, connections: CONNECTIONS, seconds: WARMUP_SECONDS, requests });
  const before = (await procStats(pid)).cpuMs;
  const load = await runLoad({ url, connections: CONNECTIONS, seconds: SECONDS, requests });
  const cpuMs = (await procStats(pid)).cpuMs - before;
  return { load, cpuUsPerRequest: (cpuMs * 1000) / Math.max(1, load.total) };
}

/** The largest RSS of process `pid` seen between start and stop(), sampled from /proc every RSS_SAMPLE_MS. */
export function rssSampler(pid: number, start: number): { stop(): Promise<number> } {
  let max = start;
  const timer = setInterval(() => {
    procStats(pid).then(
      (stats) => (max = Math.max(max, stats.rss)),
      () => undefined, // the process is gone: the run fails on its own
    );
  }, RSS_SAMPLE_MS);
  return {
    async stop() {
      clearInterval(timer);
      return Math.max(max, (await procStats(pid)).rss);
    },
  };
}

/** A process's resident set now and at its largest (VmRSS, VmHWM), and its CPU time so far, from /proc. */
export async function procStats(pid: number): Promise<{ rss: number; hwm: number; cpuMs: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  // Fields 14 and 15 of /proc/PID/stat (after the command name in parentheses): user and system time in ticks.
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const [utime, stime] = stat.slice(stat.lastIndexOf(')') + 2).split(' ').slice(11, 13).map(Number);
  return { rss: kib('VmRSS'), hwm: kib('VmHWM'), cpuMs: ((utime ?? 0) + (stime ?? 0)) * (1000 / CLOCK_TICKS) };
}
