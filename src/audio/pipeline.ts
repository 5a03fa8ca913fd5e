import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { PRIVATE_DIR_MODE } from '../core/private-files.js';
import type { LookupFunction } from 'node:net';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { AUDIO_CACHE_DIR, AudioCache, type AudioLogger, type CacheEntry, type SourceFacts } from './cache.js';
import { ConversionFlights, NoTakers } from './conversion-flights.js';
import { AudioError } from './errors.js';
import { PipelineEncoders } from './encoder-processes.js';
import { FfmpegRunner } from './ffmpeg.js';
import { createAudioAgent, fetchAudio } from './fetch.js';
import { KnownUrls } from './known-urls.js';
import { OPUS_BINDING } from './opus-encoder.js';
import { ReadyUrls } from './ready-urls.js';
import { DEFAULT_MAX_SOURCE_BYTES, type AudioFormat, type AudioProfile, type AudioTarget } from './targets.js';
import { abortable, copyLocalSource, exceedsDuration, lengthOf, tooLong } from './pipeline-steps.js';
import type { AddressPolicy } from './url-check.js';

/**
 * What the pipeline reports, for metrics: cache lookups and conversions actually run. Declared here,
 * where it is called; the metrics module implements it and app.ts passes it in.
 */
export interface AudioMetrics {
  cacheLookup(hit: boolean): void;
  converted(format: string, seconds: number): void;
}

export interface AudioPipelineOptions {
  dataDir: string;
  ffmpegPath: string;
  allowPrivateUrls: boolean;
  cacheMaxBytes?: number;
  /**
   * Conversions run at once (MAX_CONCURRENT_CONVERSIONS); default one per core. A permit is held for the
   * whole conversion, every ffmpeg run and whatever work it does in this process, not per ffmpeg run.
   */
  maxConcurrentConversions?: number;
  fetchTimeoutMs?: number;
  maxSourceBytes?: number;
  /**
   * How long what a URL served (its SHA-256) is trusted without downloading it again; 0 downloads
   * every time. Default 60 s.
   */
  urlFreshMs?: number;
  logger?: AudioLogger;
  metrics?: AudioMetrics;
}

/** Seams for tests and tuning that are not part of the service configuration. */
export interface AudioPipelineInternals {
  /** Replaces DNS resolution for fetches. */
  lookup?: LookupFunction;
  /** Replaces the public/non-public address verdict (tests stand a loopback server in for a public host). */
  addressPolicy?: AddressPolicy;
  /** Kill an ffmpeg run after this long; default 10 minutes. */
  ffmpegTimeoutMs?: number;
  /**
   * Where the libopus binding is loaded from, in this thread and the encoder threads (a package
   * name or a file; default opus-encoder.ts's OPUS_BINDING); one that does not load makes the
   * pipeline encode Opus with ffmpeg, as when the binding is not installed.
   */
  opusBinding?: string;
}

export interface PreparedAudio {
  path: string;
  mimeType: string;
  fileName: string;
  format: AudioFormat;
  sizeBytes: number;
  durationSeconds: number;
  waveform: Uint8Array;
  /** Telegram's 100 bars (0–31), when the cache entry has them. */
  telegramWaveform?: Uint8Array;
  sourceSha256: string;
  /** The cache entry's key: names the audio this file holds (see VoiceFile). */
  contentKey: string;
  cacheHit: boolean;
  /** What the message log keeps: the source as detected (null when the cache entry predates that record). */
  facts: AudioFacts;
  release(): void;
}

export interface AudioFacts {
  source: SourceFacts | null;
  /** With the platform's profile, names the converted file in the audio cache. */
  sourceSha256: string;
  format: AudioFormat;
}

export interface PrepareInput {
  url: string;
  /** The platform's voice format and limits. */
  target: AudioTarget;
  /** The caller's `duration`: used only when the file's own length cannot be measured. */
  durationHint?: number;
  /** Stops this request: its download, and a conversion it started (ffmpeg is killed). */
  signal?: AbortSignal;
  /** A local file to read instead of downloading `url` (the sandbox's shipped sample, see samples.ts). */
  localSource?: string;
  /**
   * Told when this request's own download is done (what is left is the conversion): the worker lets
   * a download wait only briefly in a slot meant for conversions.
   */
  onFetched?: () => void;
}

export interface AudioPipeline {
  prepare(input: PrepareInput): Promise<PreparedAudio>;
  /** This process had the audio of `url` ready for the target within the last hour (a guess: no download). */
  isReady(url: string, target: AudioTarget): boolean;
  /**
   * While `busy()` says so, Opus conversions give the CPU way: their encoder processes are stopped most
   * of the time (encoder-processes.ts). The process's worker says when; returns the undo.
   */
  giveWayWhile(busy: () => boolean): () => void;
  close(): Promise<void>;
}

const GiB = 1024 * 1024 * 1024;
const DEFAULT_FETCH_TIMEOUT_MS = 30_000;
const DEFAULT_FFMPEG_TIMEOUT_MS = 10 * 60_000;
const STALE_DOWNLOAD_MS = 15 * 60_000;
const DEFAULT_URL_FRESH_MS = 60_000;
/**
 * ffmpeg and the Opus encoder processes run this much below the process's priority: on a busy machine
 * deliveries go first, conversions take what is left.
 */
const FFMPEG_NICENESS = 10;

const noop = (): void => undefined;

export function createAudioPipeline(opts: AudioPipelineOptions, internals: AudioPipelineInternals = {}): AudioPipeline {
  const log = opts.logger;
  const tmpDir = join(opts.dataDir, 'tmp', 'audio');
  const cache = new AudioCache(join(opts.dataDir, AUDIO_CACHE_DIR), opts.cacheMaxBytes ?? GiB, log);
  const maxConversions = opts.maxConcurrentConversions ?? availableParallelism();
  // No bound of its own: every ffmpeg run is part of a conversion, which `flights` bounds.
  const runner = new FfmpegRunner(opts.ffmpegPath, FFMPEG_NICENESS);
  // The caller is told only that the host is not public; the operator's log says which and why.
  const onRefused = (detail: { host: string; reason: string }): void => opts.logger?.warn({ audio_host: detail.host, reason: detail.reason }, 'audio fetch refused: the host is not a public address');
  const agent = createAudioAgent({ allowPrivate: opts.allowPrivateUrls, lookup: internals.lookup, addressPolicy: internals.addressPolicy, onRefused });
  const fetchTimeoutMs = opts.fetchTimeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS;
  const maxSourceBytes = opts.maxSourceBytes ?? DEFAULT_MAX_SOURCE_BYTES;
  // Decided at the first Opus note, so a process that never converts one never loads the binding.
  // Opus notes are encoded in processes of their own below normal priority, one per conversion at once.
  const opus = new PipelineEncoders({ log, module: internals.opusBinding ?? OPUS_BINDING, processes: maxConversions, niceness: FFMPEG_NICENESS });
  const flights = new ConversionFlights({
    cache,
    runner,
    opusEncoder: opus.choice,
    maxConversions,
    ffmpegTimeoutMs: internals.ffmpegTimeoutMs ?? DEFAULT_FFMPEG_TIMEOUT_MS,
    log,
    converted: (format, seconds) => opts.metrics?.converted(format, seconds),
  });
  const closing = new AbortController();
  const knownUrls = new KnownUrls(opts.urlFreshMs ?? DEFAULT_URL_FRESH_MS);
  const pending = new Set<Promise<unknown>>();
  const readyUrls = new ReadyUrls();
  let closed = false;

  const ready = (async () => {
    await mkdir(tmpDir, { recursive: true, mode: PRIVATE_DIR_MODE });
    const now = Date.now();
    for (const name of await readdir(tmpDir)) {
      const path = join(tmpDir, name);
      const st = await stat(path).catch(() => null);
      if (st !== null && now - st.mtimeMs > STALE_DOWNLOAD_MS) await rm(path, { force: true });
    }
    await cache.init();
  })();
  ready.catch(noop);

  function hand(entry: CacheEntry, target: AudioTarget, hint: number | null, cacheHit: boolean): PreparedAudio {
    opts.metrics?.cacheLookup(cacheHit);
    const durationSeconds = lengthOf(entry.meta.durationSeconds, hint) ?? 0;
    try {
      if (exceedsDuration(durationSeconds, target)) throw tooLong(durationSeconds, target.maxDurationSeconds ?? 0);
      if (entry.meta.sizeBytes > target.maxBytes) {
        throw new AudioError('audio_too_large', `converted audio is ${entry.meta.sizeBytes} bytes; the platform allows at most ${target.maxBytes}`);
      }
    } catch (err) {
      cache.unpin(entry);
      throw err;
    }
    let released = false;
    return {
      path: entry.audioPath,
      mimeType: target.mimeType,
      fileName: target.fileName,
      format: target.format,
      sizeBytes: entry.meta.sizeBytes,
      durationSeconds,
      waveform: Uint8Array.from(entry.meta.waveform),
      ...(entry.meta.telegramWaveform ? { telegramWaveform: Uint8Array.from(entry.meta.telegramWaveform) } : {}),
      sourceSha256: entry.meta.sourceSha256,
      contentKey: entry.key,
      cacheHit,
      facts: { source: entry.meta.source ?? null, sourceSha256: entry.meta.sourceSha256, format: target.format },
      release() {
        if (released) return;
        released = true;
        cache.unpin(entry);
      },
    };
  }

  /** The converted audio for a URL downloaded less than `urlFreshMs` ago, without downloading it again. */
  async function fromKnownUrl(url: string, profile: AudioProfile): Promise<CacheEntry | null> {
    const sha256 = knownUrls.fresh(url);
    if (sha256 === undefined) return null;
    return cache.acquireKnown(sha256, profile) ?? (await cache.acquire(sha256, profile));
  }

  async function prepareOnce(input: PrepareInput): Promise<PreparedAudio> {
    const target = input.target;
    const hintRaw = input.durationHint;
    const hint = typeof hintRaw === 'number' && Number.isFinite(hintRaw) && hintRaw > 0 ? hintRaw : null;
    await ready;
    if (knownUrls.freshMs <= 0) return prepareFromSource(input, target, hint);
    // A thousand recipients of one URL: the first request downloads (and converts) while the others
    // wait for it, then take its result from the cache. Leading is decided with no await in between.
    const known = knownUrls.fresh(input.url);
    const inMemory = known !== undefined ? cache.acquireKnown(known, target.profile) : null;
    if (inMemory) return hand(inMemory, target, hint, true);
    const turn = knownUrls.turn(input.url);
    if (turn.leads) {
      try {
        const cached = await fromKnownUrl(input.url, target.profile);
        if (cached) return hand(cached, target, hint, true);
        return await prepareFromSource(input, target, hint);
      } finally {
        turn.done();
      }
    }
    await abortable(turn.leader, input.signal);
    const cached = await fromKnownUrl(input.url, target.profile);
    if (cached) return hand(cached, target, hint, true);
    return prepareFromSource(input, target, hint);
  }

  async function prepareFromSource(input: PrepareInput, target: AudioTarget, hint: number | null): Promise<PreparedAudio> {
    const downloadPath = join(tmpDir, `dl-${randomUUID()}`);
    let handedOver = false;
    try {
      const src = input.localSource !== undefined ? await copyLocalSource(input.localSource, downloadPath, input.url) : await fetchAudio({
        url: input.url,
        destPath: downloadPath,
        maxBytes: maxSourceBytes,
        timeoutMs: fetchTimeoutMs,
        allowPrivate: opts.allowPrivateUrls,
        addressPolicy: internals.addressPolicy,
        onRefused,
        dispatcher: agent,
        signal: input.signal ? AbortSignal.any([closing.signal, input.signal]) : closing.signal,
      });
      knownUrls.remember(input.url, src.sha256);
      input.onFetched?.();
      const key = AudioCache.keyOf(src.sha256, target.profile);
      for (;;) {
        const cached = await cache.acquire(src.sha256, target.profile);
        if (cached) return hand(cached, target, hint, true);
        let flight = flights.get(key);
        let mine = false;
        if (!flight) {
          // A conversion may have finished while the lookup above was reading the disk.
          const justCommitted = cache.acquireKnown(src.sha256, target.profile);
          if (justCommitted) return hand(justCommitted, target, hint, true);
          if (handedOver) throw new Error('audio conversion was abandoned twice'); // cannot happen: we voted for our own
          flight = flights.start(key, src, target.profile, input.signal);
          handedOver = true;
          mine = true;
        }
        try {
          const info = await abortable(flight.info, input.signal);
          const declared = lengthOf(info.durationSeconds, hint);
          if (exceedsDuration(declared, target)) throw tooLong(declared ?? 0, target.maxDurationSeconds ?? 0);
        } catch (err) {
          // Our download now belongs to the flight: when nobody wants its result, wait for it to
          // clean up, so a failed prepare() never leaves a temp file behind it.
          if (mine) {
            await flight.decided;
            if (flight.wanted === 0) await flight.entry.catch(noop);
          }
          throw err;
        }
        flight.wanted++;
        let entry: CacheEntry;
        try {
          entry = cache.pin(await abortable(flight.entry, input.signal));
        } catch (err) {
          if (err instanceof NoTakers) continue;
          throw err;
        }
        return hand(entry, target, hint, false);
      }
    } finally {
      if (!handedOver) await rm(downloadPath, { force: true });
    }
  }

  return {
    prepare(input) {
      if (closed) return Promise.reject(new Error('audio pipeline is closed'));
      const job = prepareOnce(input);
      job.then(() => readyUrls.ready(input.url, input.target.profile), noop);
      pending.add(job);
      job.then(noop, noop).finally(() => pending.delete(job));
      return job;
    },
    isReady(url, target) {
      return readyUrls.has(url, target.profile);
    },
    giveWayWhile(busy) {
      return opus.giveWayWhile(busy);
    },
    async close() {
      if (closed) return;
      closed = true;
      closing.abort();
      await runner.close();
      await opus.close();
      await Promise.allSettled([...pending]);
      await flights.settled();
      await agent.close().catch(noop);
      await cache.settle();
    },
  };
}
