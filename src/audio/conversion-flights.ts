import { rm } from 'node:fs/promises';
import type { AudioCache, AudioLogger, CacheEntry } from './cache.js';
import type { EncoderProcesses } from './encoder-processes.js';
import { Semaphore, type FfmpegRunner } from './ffmpeg.js';
import type { FetchedSource } from './fetch.js';
import { detectSource, type SourceInfo } from './probe.js';
import type { AudioProfile } from './targets.js';
import { convertAudio, type ConversionOutcome } from './transcode.js';

/**
 * One conversion per downloaded source and profile at a time (a flight), shared by every request that
 * wants its result, and at most `maxConversions` of them converting at once. A flight first detects
 * what the source is; the requests waiting on it check their own limits against that, and only if one
 * of them still wants the result does the conversion run (else it ends with NoTakers and the download
 * is deleted). The converted file is committed to the audio cache, where each request pins it.
 */

/** Settles a conversion nobody is waiting for any more (every requester failed its own checks first). */
export class NoTakers extends Error {}

export interface Flight {
  info: Promise<SourceInfo>;
  /** Settles once the requests waiting on `info` have had their say (or detection failed). */
  decided: Promise<void>;
  entry: Promise<CacheEntry>;
  /** Requests that passed their own limit checks and want the result. */
  wanted: number;
}

/** What converting takes: the pipeline's cache, its ffmpeg, its Opus encoders, and where to report. */
export interface ConversionDeps {
  cache: AudioCache;
  runner: FfmpegRunner;
  /** The Opus encoder processes, or null when the libopus binding did not load (ffmpeg encodes). */
  opusEncoder: () => EncoderProcesses | null;
  /**
   * Conversions at once (MAX_CONCURRENT_CONVERSIONS). The one bound on them: a permit is held for the
   * whole conversion, every ffmpeg run and whatever work it does in this process, so FfmpegRunner has none.
   */
  maxConversions: number;
  ffmpegTimeoutMs: number;
  log: AudioLogger | undefined;
  /** Told of each conversion run (for metrics): the format made and how long it took. */
  converted: (format: string, seconds: number) => void;
}

const noop = (): void => undefined;

export class ConversionFlights {
  readonly #inflight = new Map<string, Flight>();
  readonly #conversions: Semaphore;

  constructor(private readonly deps: ConversionDeps) {
    this.#conversions = new Semaphore(deps.maxConversions);
  }

  /** The flight converting `key` now, if any. */
  get(key: string): Flight | undefined {
    return this.#inflight.get(key);
  }

  /**
   * Starts converting `src` (which the flight now owns and deletes when done) for `profile`. The
   * conversion stops with `signal`, the request that started it (others waiting on it then retry).
   */
  start(key: string, src: FetchedSource, profile: AudioProfile, signal: AbortSignal | undefined): Flight {
    const info = detectSource(src.path, src.sizeBytes);
    let markDecided = noop;
    const decided = new Promise<void>((resolve) => {
      markDecided = resolve;
    });
    const flight: Flight = { info, decided, entry: Promise.resolve(null as unknown as CacheEntry), wanted: 0 };
    flight.entry = (async () => {
      try {
        let detected: SourceInfo;
        try {
          detected = await info;
          // Every request already waiting on `info` checks its own limits in the microtasks before this.
          await new Promise<void>((resolve) => setImmediate(resolve));
        } finally {
          markDecided();
        }
        if (flight.wanted === 0) throw new NoTakers();
        return await this.#convert(src, detected, profile, signal);
      } finally {
        await rm(src.path, { force: true });
      }
    })();
    info.catch(noop);
    flight.entry
      .finally(() => {
        if (this.#inflight.get(key) === flight) this.#inflight.delete(key);
      })
      .catch(noop);
    this.#inflight.set(key, flight);
    return flight;
  }

  /** Settles once every flight in the air has ended (the pipeline closing). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#inflight.values()].map((f) => f.entry));
  }

  async #convert(src: FetchedSource, detected: SourceInfo, profile: AudioProfile, signal: AbortSignal | undefined): Promise<CacheEntry> {
    const { cache, runner, log } = this.deps;
    const outputPath = cache.tempPath();
    const started = performance.now();
    try {
      const permit = await this.#conversions.acquire();
      let outcome: ConversionOutcome;
      try {
        outcome = await convertAudio({ runner, sourcePath: src.path, info: detected, profile, outputPath, timeoutMs: this.deps.ffmpegTimeoutMs, opusEncoder: this.deps.opusEncoder, ...(signal ? { signal } : {}) });
      } finally {
        permit();
      }
      const entry = await cache.commit(outcome.passThrough ? src.path : outputPath, {
        sourceSha256: src.sha256,
        profile,
        durationSeconds: Math.round(outcome.decodedSeconds * 1000) / 1000,
        waveform: [...outcome.waveform],
        telegramWaveform: [...outcome.telegramWaveform],
        passThrough: outcome.passThrough,
        source: { container: detected.container, codec: detected.codec, durationSeconds: detected.durationSeconds, sizeBytes: src.sizeBytes },
      });
      this.deps.converted(entry.meta.format, (performance.now() - started) / 1000);
      log?.debug(
        {
          sha256: src.sha256, profile, passThrough: outcome.passThrough, ms: Math.round(performance.now() - started), container: detected.container, codec: detected.codec,
          ...(outcome.opus ? { opus_encoder: outcome.opus.encoder, opus_kbps: outcome.opus.kbps } : {}),
        },
        'audio converted',
      );
      // The commit pin belongs to the flight; it is dropped once every waiter has pinned for itself.
      setImmediate(() => cache.unpin(entry));
      return entry;
    } finally {
      await rm(outputPath, { force: true });
    }
  }
}
