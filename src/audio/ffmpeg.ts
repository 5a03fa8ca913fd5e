import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import { createRequire } from 'node:module';
import { getPriority, setPriority } from 'node:os';
import { delimiter, join } from 'node:path';

/** FFMPEG_PATH value if given, else `ffmpeg` on PATH if present, else the bundled @ffmpeg-installer binary. */
export function resolveFfmpegPath(fromEnv?: string): string {
  if (fromEnv !== undefined && fromEnv.trim() !== '') return fromEnv.trim();
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, process.platform === 'win32' ? 'ffmpeg.exe' : 'ffmpeg');
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not here; keep looking
    }
  }
  const required: unknown = createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg');
  if (typeof required === 'object' && required !== null && 'path' in required && typeof required.path === 'string') {
    return required.path;
  }
  throw new Error('no ffmpeg found: set FFMPEG_PATH, install ffmpeg, or install @ffmpeg-installer/ffmpeg');
}

/** FIFO counting semaphore: ffmpeg is CPU-bound, so running more than the cores only adds latency. */
export class Semaphore {
  private available: number;
  private readonly waiters: Array<() => void> = [];

  constructor(permits: number) {
    this.available = Math.max(1, Math.floor(permits));
  }

  async acquire(): Promise<() => void> {
    if (this.available > 0) {
      this.available--;
    } else {
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (next) next();
      else this.available++;
    };
  }
}

export interface FfmpegResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  killed: boolean;
  /** Last part of stderr: ffmpeg reports stream layout and errors there. */
  stderr: string;
}

export interface FfmpegRunOptions {
  timeoutMs: number;
  /**
   * What ffmpeg writes to `pipe:1` and `pipe:3`, handed over as it arrives. A handler works
   * synchronously, so ffmpeg waits on a full pipe while it does (the pipes' own backpressure); if it
   * throws, ffmpeg is killed and run() rejects with that error.
   */
  onStdout?: (chunk: Buffer) => void;
  onPipe3?: (chunk: Buffer) => void;
  /** Kills the run (an attempt that was stopped must not keep a transcoder busy). */
  signal?: AbortSignal;
}

const STDERR_KEEP = 64 * 1024;

/**
 * Spawns ffmpeg without a shell, with a timeout; close() kills what still runs. How many run at once
 * is the caller's to bound (the pipeline's limit of concurrent conversions).
 */
export class FfmpegRunner {
  private readonly running = new Map<ChildProcess, { kill: () => void; exited: Promise<void> }>();
  private closed = false;

  /**
   * `niceness`: how much lower than this process's own the scheduling priority of each ffmpeg is, so
   * that on a busy machine the process's deliveries (and whatever else runs at normal priority) go
   * first and conversions take the CPU left over; 0 leaves ffmpeg at this process's priority.
   */
  constructor(readonly ffmpegPath: string, private readonly niceness = 0) {}

  async run(args: readonly string[], opts: FfmpegRunOptions): Promise<FfmpegResult> {
    if (this.closed) throw new Error('audio pipeline is closed');
    return this.spawnOnce(args, opts);
  }

  private spawnOnce(args: readonly string[], opts: FfmpegRunOptions): Promise<FfmpegResult> {
    return new Promise((resolve, reject) => {
      const stdio = ['ignore', opts.onStdout ? 'pipe' : 'ignore', 'pipe', ...(opts.onPipe3 ? ['pipe' as const] : [])] as const;
      const child = spawn(this.ffmpegPath, args, { stdio: [...stdio], shell: false });
      if (this.niceness > 0 && child.pid !== undefined) lowerPriority(child.pid, this.niceness);
      let stderr = '';
      let timedOut = false;
      let killed = false;
      let handlerFailed: { err: unknown } | undefined;
      const guarded = (handler: (chunk: Buffer) => void) => (chunk: Buffer): void => {
        if (handlerFailed) return;
        try {
          handler(chunk);
        } catch (err) {
          handlerFailed = { err };
          child.kill('SIGKILL');
        }
      };
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, opts.timeoutMs);
      const onAbort = (): void => {
        killed = true;
        child.kill('SIGKILL');
      };
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      if (opts.signal?.aborted) onAbort();
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (chunk: string) => {
        stderr += chunk;
        if (stderr.length > 2 * STDERR_KEEP) stderr = stderr.slice(-STDERR_KEEP);
      });
      if (opts.onStdout) child.stdout?.on('data', guarded(opts.onStdout));
      if (opts.onPipe3) (child.stdio[3] as NodeJS.ReadableStream | null)?.on('data', guarded(opts.onPipe3));
      const exited = new Promise<void>((done) => {
        child.once('close', () => done());
        child.once('error', () => done());
      });
      this.running.set(child, {
        kill: () => {
          killed = true;
          child.kill('SIGKILL');
        },
        exited,
      });
      child.once('error', (err) => {
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        this.running.delete(child);
        reject(err);
      });
      child.once('close', (exitCode, signal) => {
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        this.running.delete(child);
        if (handlerFailed) reject(handlerFailed.err as Error);
        else resolve({ exitCode, signal, timedOut, killed, stderr: stderr.slice(-STDERR_KEEP) });
      });
    });
  }

  /** Kills every running ffmpeg and waits until they have exited. */
  async close(): Promise<void> {
    this.closed = true;
    const exits = [...this.running.values()].map((entry) => {
      entry.kill();
      return entry.exited;
    });
    await Promise.all(exits);
  }
}

/** Lowers a process's priority by `by` below this process's (at most to 19); one that already ended is left alone. */
function lowerPriority(pid: number, by: number): void {
  try {
    setPriority(pid, Math.min(19, getPriority() + by));
  } catch {
    // It exited already, or the platform refuses: it runs at normal priority, as without this.
  }
}

/** Arguments every invocation shares: quiet, no stdin, no network, no probing of input by guesswork. */
export function baseInputArgs(inputPath: string, demuxer: string): string[] {
  return [
    '-nostdin', '-hide_banner', '-nostats', '-loglevel', 'info', '-y',
    '-protocol_whitelist', 'file,pipe',
    '-f', demuxer,
    '-i', `file:${inputPath}`,
  ];
}
