/**
 * CPU time, not wall time: the machine is shared, so a wall clock measures the neighbours too.
 * `processCpuSeconds()` is this process (user + system); `childrenCpuSeconds()` is every child it has
 * waited for (Linux's cutime + cstime in /proc/self/stat, in clock ticks of 10 ms): ffmpeg runs
 * spawned by the pipeline are counted once they have exited.
 */
import { readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100;

export function processCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

export function childrenCpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  // Fields after the command name (which may hold spaces) start at field 3 (state).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const cutime = Number(fields[13]);
  const cstime = Number(fields[14]);
  return (cutime + cstime) / TICKS_PER_SECOND;
}

/** Both, so one difference of two readings is what a piece of work cost this process and its ffmpegs. */
export function totalCpuSeconds(): number {
  return processCpuSeconds() + childrenCpuSeconds();
}
