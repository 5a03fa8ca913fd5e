import { readdir, readFile } from 'node:fs/promises';

/**
 * What a process and the processes it started cost, read from /proc (Linux): its own CPU, its
 * conversions' CPU (the children it started and reaped, the ones running, and the ffmpeg runs those
 * start in turn), and how many ffmpeg run now. bench/starvation.ts samples its worker with it.
 */

const CLOCK_TICKS = 100;

export interface Sample {
  at: number;
  ffmpegs: number;
  /** The worker's own CPU, and that of its conversions (ffmpeg runs and encoder processes, reaped and running), in ms. */
  workerCpuMs: number;
  ffmpegCpuMs: number;
}

/** A process's children, from /proc: pid and command name. */
async function childrenOf(pid: number): Promise<Array<{ pid: number; comm: string }>> {
  const found: Array<{ pid: number; comm: string }> = [];
  for (const task of await readdir(`/proc/${pid}/task`).catch(() => [])) {
    const text = await readFile(`/proc/${pid}/task/${task}/children`, 'utf8').catch(() => '');
    for (const child of text.split(' ').filter(Boolean).map(Number)) {
      found.push({ pid: child, comm: (await readFile(`/proc/${child}/comm`, 'utf8').catch(() => '')).trim() });
    }
  }
  return found;
}

/** CPU of a process (utime + stime) and of its reaped children (cutime + cstime), in ms. */
async function cpuOf(pid: number): Promise<{ own: number; reaped: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  if (stat === '') return { own: 0, reaped: 0 };
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').slice(11, 15).map(Number);
  const tick = 1000 / CLOCK_TICKS;
  return { own: ((f[0] ?? 0) + (f[1] ?? 0)) * tick, reaped: ((f[2] ?? 0) + (f[3] ?? 0)) * tick };
}

/**
 * The worker's own CPU, and that of its conversions: the ffmpeg runs it starts (the ffmpeg encode)
 * and its Opus encoder processes with the ffmpeg runs they start (the libopus encode), reaped or running.
 */
export async function sample(pid: number): Promise<Sample> {
  const at = Date.now();
  const worker = await cpuOf(pid);
  let ffmpegs = 0;
  let conversions = worker.reaped;
  for (const child of await childrenOf(pid)) {
    const cpu = await cpuOf(child.pid);
    conversions += cpu.own + cpu.reaped;
    if (child.comm.startsWith('ffmpeg')) ffmpegs++;
    for (const grandchild of await childrenOf(child.pid)) {
      if (!grandchild.comm.startsWith('ffmpeg')) continue;
      ffmpegs++;
      conversions += (await cpuOf(grandchild.pid)).own;
    }
  }
  return { at, ffmpegs, workerCpuMs: worker.own, ffmpegCpuMs: conversions };
}
