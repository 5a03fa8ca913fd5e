import { spawn, type ChildProcess } from 'node:child_process';
import { getPriority, setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { AudioLogger } from './cache.js';
import type { EncodeReply, EncodeRequest, KillRequest } from './encoder-process.js';
import { chooseOpusEncoder } from './opus-encoder.js';

/**
 * Opus notes decoded and encoded in processes of their own, below normal priority. In the process
 * that delivers, a note's conversion cost the deliveries beside it more than the CPU of its encode:
 * starting ffmpeg (a fork of the whole process, 15–20 ms here), reading 5.8 MB of PCM per
 * audio-minute in 32 KB pieces, and their garbage. On threads of that process it was worse still:
 * while a thread of a process runs on another core, each page the process gives back to the kernel
 * costs it a cross-core TLB flush, and a 240 KB Buffer.concat took 18 times as long (BENCHMARKS.md,
 * the rows of 2026-11-27). An encoder process starts the decoding ffmpeg, encodes what it decodes,
 * folds the waveform and writes the note (encoder-process.ts); the delivering process gets ffmpeg's
 * report and the waveform, a few kilobytes per note.
 */

export interface EncoderProcessesOptions {
  /** Where the binding is loaded from (opus-encoder.ts, OPUS_BINDING). */
  module: string;
  /** For the log: the binding's name and version. */
  name: string;
  /** Processes at most: a pipeline runs this many conversions at once, so each can have one. */
  processes: number;
  /** How much lower than this process's own the encoders' priority (and so their ffmpeg's) is. */
  niceness: number;
  /** Whether the process has deliveries waiting on its CPU: conversions then give way (see #giveWay). */
  busy?: () => boolean;
}

/** While deliveries wait: how long the encoders run, then how long they are stopped. */
const GIVE_WAY_RUN_MS = 10;
const GIVE_WAY_REST_MS = 190;

/** One note for an encoder process: its request (encoder-process.ts) without what the pool adds. */
export type EncodeRun = Omit<EncodeRequest, 'op' | 'id' | 'module'> & {
  /** Kills ffmpeg (the run then answers with `killed`). */
  signal?: AbortSignal;
};

/** The encoder process went away (the pipeline closed, or it crashed): not the audio's fault. */
export class EncoderProcessEnded extends Error {}

interface Pending {
  resolve: (reply: EncodeReply) => void;
  reject: (err: Error) => void;
}

/**
 * The program and the arguments that start an encoder: the JavaScript beside this module (the build's,
 * or the test runner's compiled copy), or in development, where tsx resolves `./x.js` to the
 * TypeScript source, that source through tsx.
 */
function encoderCommand(): string[] {
  const program = fileURLToPath(import.meta.resolve('./encoder-process.js'));
  if (program.endsWith('.ts')) return ['--import', import.meta.resolve('tsx'), program];
  return [program];
}

/** One encoder process and the runs it owes answers for. */
class EncoderProcess {
  readonly child: ChildProcess;
  readonly runs = new Map<number, Pending>();
  ended: EncoderProcessEnded | null = null;
  readonly #idleWaiters: Array<() => void> = [];

  constructor(priority: number, onEnd: (encoder: EncoderProcess) => void) {
    // A process group of its own, which the ffmpeg runs it starts join: giving way stops and continues
    // them all with one signal. If this process dies while they are stopped, the kernel continues the
    // orphaned group with a SIGHUP, which ends them.
    this.child = spawn(process.execPath, encoderCommand(), { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], serialization: 'advanced', detached: true });
    if (this.child.pid !== undefined) {
      try {
        setPriority(this.child.pid, priority);
      } catch {
        // The platform refuses: it runs at normal priority, as ffmpeg did before.
      }
    }
    // An idle encoder must not keep the process alive; one with runs does (see start()).
    this.#unref();
    this.child.on('message', (reply: EncodeReply) => this.#answer(reply));
    const end = (why: string): void => {
      if (this.ended) return;
      this.ended = new EncoderProcessEnded(`the Opus encoder process ended (${why})`);
      for (const run of this.runs.values()) run.reject(this.ended);
      this.runs.clear();
      this.#settled();
      onEnd(this);
    };
    this.child.on('error', (err) => end(err.message));
    this.child.on('exit', (code, signal) => end(signal ? `signal ${signal}` : `exit code ${code}`));
  }

  #unref(): void {
    this.child.unref();
    this.child.channel?.unref();
  }

  start(request: EncodeRequest, pending: Pending): void {
    if (this.runs.size === 0) {
      this.child.ref();
      this.child.channel?.ref();
    }
    this.runs.set(request.id, pending);
    this.child.send(request);
  }

  /** Stops (SIGSTOP) or continues (SIGCONT) the encoder and its ffmpeg runs. */
  signalGroup(signal: 'SIGSTOP' | 'SIGCONT'): void {
    if (this.ended || this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch {
      // It exited meanwhile: its end is handled by the exit event.
    }
  }

  kill(id: number): void {
    if (this.runs.has(id) && !this.ended && this.child.connected) this.child.send({ op: 'kill', id } satisfies KillRequest);
  }

  /** Resolves once no run is left (answered, or failed with the process). */
  idle(): Promise<void> {
    if (this.runs.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #settled(): void {
    if (this.runs.size > 0) return;
    this.#unref();
    for (const waiter of this.#idleWaiters.splice(0)) waiter();
  }

  #answer(reply: EncodeReply): void {
    const run = this.runs.get(reply.id);
    if (!run) return;
    this.runs.delete(reply.id);
    this.#settled();
    run.resolve(reply);
  }
}

/**
 * Encoder processes, started when first needed and kept: each run goes to the one with the fewest
 * runs. One that ends fails the runs it owed (the conversion fails and is retried as any failed
 * conversion is); the next run starts a new one.
 */
export class EncoderProcesses {
  readonly name: string;
  readonly #encoders: EncoderProcess[] = [];
  readonly #priority: number;
  #nextId = 1;
  #closed = false;
  /** The give-way cycle's next step, while runs are in hand. */
  #cycle: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(private readonly options: EncoderProcessesOptions) {
    this.name = options.name;
    this.#priority = Math.min(19, getPriority() + options.niceness);
  }

  /**
   * While runs are in hand and `options.busy()` says so, the encoders (and their ffmpeg) are stopped
   * for GIVE_WAY_REST_MS after each GIVE_WAY_RUN_MS they run: conversions then go on at a twentieth of
   * their pace, and the process's deliveries get the CPU they leave. A lower priority alone was
   * not enough: on this machine conversions on the other core still slowed the deliveries' event loop
   * by a third (caches and memory shared), BENCHMARKS.md.
   */
  #giveWay(): void {
    if (this.#cycle !== undefined || this.options.busy === undefined) return;
    const busy = this.options.busy;
    const step = (): void => {
      this.#cycle = undefined;
      const running = this.#encoders.some((e) => e.runs.size > 0);
      if (this.#stopped) {
        this.#signalAll('SIGCONT');
        if (running) this.#schedule(step, GIVE_WAY_RUN_MS);
        return;
      }
      if (!running) return;
      if (busy()) {
        this.#signalAll('SIGSTOP');
        this.#schedule(step, GIVE_WAY_REST_MS);
      } else {
        this.#schedule(step, GIVE_WAY_RUN_MS);
      }
    };
    this.#schedule(step, GIVE_WAY_RUN_MS);
  }

  /** The cycle runs only while runs are in hand, which keep the process alive anyway. */
  #schedule(step: () => void, ms: number): void {
    this.#cycle = setTimeout(step, ms);
  }

  #signalAll(signal: 'SIGSTOP' | 'SIGCONT'): void {
    this.#stopped = signal === 'SIGSTOP';
    for (const e of this.#encoders) e.signalGroup(signal);
  }

  /** Decodes with ffmpeg in an encoder process, encodes there and writes the note to `outputPath`. */
  encode(run: EncodeRun): Promise<EncodeReply> {
    if (this.#closed) return Promise.reject(new EncoderProcessEnded('the Opus encoder processes are closed'));
    const encoder = this.#leastBusy();
    // A new encoder joins a stopped cycle as it is: continued with the others at the next step.
    if (this.#stopped) encoder.signalGroup('SIGSTOP');
    const id = this.#nextId++;
    this.#giveWay();
    const { signal, ...rest } = run;
    return new Promise<EncodeReply>((resolve, reject) => {
      const onAbort = (): void => encoder.kill(id);
      const settle = (): void => signal?.removeEventListener('abort', onAbort);
      encoder.start({ op: 'encode', id, module: this.options.module, ...rest }, {
        resolve: (reply) => {
          settle();
          resolve(reply);
        },
        reject: (err) => {
          settle();
          reject(err);
        },
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      if (signal?.aborted) onAbort();
    });
  }

  #leastBusy(): EncoderProcess {
    let best: EncoderProcess | undefined;
    for (const e of this.#encoders) if (!best || e.runs.size < best.runs.size) best = e;
    if (best && (best.runs.size === 0 || this.#encoders.length >= this.options.processes)) return best;
    const encoder = new EncoderProcess(this.#priority, (ended) => {
      const at = this.#encoders.indexOf(ended);
      if (at >= 0) this.#encoders.splice(at, 1);
    });
    this.#encoders.push(encoder);
    return encoder;
  }

  /** Kills the runs' ffmpeg and waits for their answers, then ends every encoder process. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#cycle);
    this.#cycle = undefined;
    if (this.#stopped) this.#signalAll('SIGCONT');
    const encoders = [...this.#encoders];
    for (const encoder of encoders) for (const id of encoder.runs.keys()) encoder.kill(id);
    await Promise.all(encoders.map((e) => e.idle()));
    await Promise.all(
      encoders.map(async (e) => {
        if (e.ended) return;
        const exited = new Promise<void>((resolve) => e.child.once('exit', () => resolve()));
        // Waited for: the process must not end (with nothing else to do) before it has.
        e.child.ref();
        // Disconnecting ends it (encoder-process.ts); it exits at once, having nothing left to do.
        if (e.child.connected) e.child.disconnect();
        else e.child.kill();
        await exited;
      }),
    );
  }
}

/**
 * A pipeline's Opus encoders: the binding is loaded (and which encoder Opus notes get is logged) at
 * the first Opus note, the encoder processes started as runs need them. `choice` is null when the
 * binding did not load (ffmpeg then encodes).
 */
export class PipelineEncoders {
  readonly choice: () => EncoderProcesses | null;
  #encoders: EncoderProcesses | undefined;
  #busy: (() => boolean) | undefined;

  constructor(options: { log: AudioLogger | undefined; module: string; processes: number; niceness: number }) {
    const { log, module, processes, niceness } = options;
    this.choice = chooseOpusEncoder(log, module, (native) => {
      this.#encoders = new EncoderProcesses({ module, name: native.name, processes, niceness, busy: () => this.#busy?.() ?? false });
      return this.#encoders;
    });
  }

  /** While `busy()` says so, the encoders give way (EncoderProcesses); returns the undo. */
  giveWayWhile(busy: () => boolean): () => void {
    this.#busy = busy;
    return () => {
      if (this.#busy === busy) this.#busy = undefined;
    };
  }

  async close(): Promise<void> {
    await this.#encoders?.close();
  }
}
