import { randomUUID } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PRIVATE_DIR_MODE } from '../core/private-files.js';
import { AUDIO_PROFILES, formatOfProfile, type AudioFormat, type AudioProfile } from './targets.js';
import { TELEGRAM_WAVEFORM_BARS, WAVEFORM_BARS } from './waveform.js';

export interface AudioLogger {
  debug(obj: object, msg?: string): void;
  /** Once per pipeline: which Opus encoder it uses. */
  info?(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface CachedMeta {
  /**
   * Bump when encoder settings change: older records then fail validation and are swept.
   * 2: files per profile (WhatsApp's push-to-talk profile apart from Telegram's Ogg Opus).
   */
  version: 2;
  sourceSha256: string;
  profile: AudioProfile;
  format: AudioFormat;
  sizeBytes: number;
  durationSeconds: number;
  waveform: number[];
  /** Telegram's 100 bars (0–31); absent in records written before they were computed. */
  telegramWaveform?: number[];
  passThrough: boolean;
  createdAt: string;
  /** The source as detected when this was converted (the message log shows it); absent in older records. */
  source?: SourceFacts;
}

export interface SourceFacts {
  container: string;
  codec: string | null;
  durationSeconds: number | null;
  sizeBytes: number;
}

function parseSource(value: unknown): SourceFacts | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (typeof v.container !== 'string' || typeof v.sizeBytes !== 'number') return undefined;
  return {
    container: v.container,
    codec: typeof v.codec === 'string' ? v.codec : null,
    durationSeconds: typeof v.durationSeconds === 'number' ? v.durationSeconds : null,
    sizeBytes: v.sizeBytes,
  };
}

export interface CacheEntry {
  readonly key: string;
  readonly audioPath: string;
  readonly metaPath: string;
  readonly meta: CachedMeta;
  readonly bytes: number;
  pins: number;
  lastUsed: number;
}

const EXT: Record<AudioFormat, string> = { ogg_opus: 'ogg', m4a_aac: 'm4a' };
const TEMP_PREFIX = '.tmp-';
const CACHE_VERSION = 2;
// Another process sharing DATA_DIR may be mid-write; only leftovers older than this are debris.
const STALE_TEMP_MS = 15 * 60 * 1000;

const isTelegramWaveform = (value: unknown): value is number[] =>
  Array.isArray(value) && value.length === TELEGRAM_WAVEFORM_BARS && value.every((v) => Number.isInteger(v) && v >= 0 && v <= 31);

function parseMeta(text: string): CachedMeta | null {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof raw !== 'object' || raw === null) return null;
  const m = raw as Record<string, unknown>;
  const waveform = m.waveform;
  if (
    m.version !== CACHE_VERSION ||
    typeof m.sourceSha256 !== 'string' || !/^[0-9a-f]{64}$/.test(m.sourceSha256) ||
    !AUDIO_PROFILES.includes(m.profile as AudioProfile) ||
    m.format !== formatOfProfile(m.profile as AudioProfile) ||
    typeof m.sizeBytes !== 'number' ||
    typeof m.durationSeconds !== 'number' ||
    typeof m.passThrough !== 'boolean' ||
    typeof m.createdAt !== 'string' ||
    !Array.isArray(waveform) || waveform.length !== WAVEFORM_BARS ||
    !waveform.every((v) => typeof v === 'number' && v >= 0 && v <= 100)
  ) {
    return null;
  }
  return {
    version: CACHE_VERSION,
    sourceSha256: m.sourceSha256,
    profile: m.profile as AudioProfile,
    format: m.format as AudioFormat,
    sizeBytes: m.sizeBytes,
    durationSeconds: m.durationSeconds,
    waveform: waveform as number[],
    passThrough: m.passThrough,
    createdAt: m.createdAt,
    ...(parseSource(m.source) ? { source: parseSource(m.source)! } : {}),
    ...(isTelegramWaveform(m.telegramWaveform) ? { telegramWaveform: m.telegramWaveform } : {}),
  };
}

/**
 * Converted audio keyed by (source sha256, profile), bounded by total bytes with LRU
 * eviction. Entries handed out are pinned until unpinned, and pinned entries are never evicted.
 * Map insertion order is the LRU order (oldest first).
 */
/** The cache's directory under DATA_DIR. */
export const AUDIO_CACHE_DIR = 'audio-cache';

/** The converted file of (source, profile) under a DATA_DIR, while the cache keeps it (the dashboard's player reads it). */
export function cachedAudioFile(dataDir: string, sha256: string, profile: AudioProfile): string {
  return join(dataDir, AUDIO_CACHE_DIR, `${AudioCache.keyOf(sha256, profile)}.${EXT[formatOfProfile(profile)]}`);
}

export class AudioCache {
  private readonly entries = new Map<string, CacheEntry>();
  private readonly deleting = new Map<string, Promise<void>>();
  private total = 0;

  constructor(
    readonly dir: string,
    readonly maxBytes: number,
    private readonly log?: AudioLogger,
  ) {}

  static keyOf(sha256: string, profile: AudioProfile): string {
    return `${sha256}.${profile}`;
  }

  get totalBytes(): number {
    return this.total;
  }

  get size(): number {
    return this.entries.size;
  }

  private pathsFor(sha256: string, profile: AudioProfile): { key: string; audioPath: string; metaPath: string } {
    const key = AudioCache.keyOf(sha256, profile);
    return { key, audioPath: join(this.dir, `${key}.${EXT[formatOfProfile(profile)]}`), metaPath: join(this.dir, `${key}.json`) };
  }

  /** A path inside the cache directory, so the final rename is atomic. */
  tempPath(): string {
    return join(this.dir, `${TEMP_PREFIX}${randomUUID()}`);
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: PRIVATE_DIR_MODE });
    const names = await readdir(this.dir);
    const now = Date.now();
    const found: CacheEntry[] = [];
    const claimed = new Set<string>();
    for (const name of names) {
      if (!name.endsWith('.json') || name.startsWith(TEMP_PREFIX)) continue;
      const metaPath = join(this.dir, name);
      const meta = parseMeta(await readFile(metaPath, 'utf8').catch(() => ''));
      if (meta === null) {
        await this.removeIfStale(metaPath, now);
        continue;
      }
      const p = this.pathsFor(meta.sourceSha256, meta.profile);
      if (p.metaPath !== metaPath) continue;
      const st = await stat(p.audioPath).catch(() => null);
      if (st === null || st.size !== meta.sizeBytes) {
        await this.removeIfStale(metaPath, now);
        continue;
      }
      claimed.add(p.audioPath).add(metaPath);
      const metaBytes = (await stat(metaPath)).size;
      found.push({ ...p, meta, bytes: st.size + metaBytes, pins: 0, lastUsed: Math.max(st.atimeMs, st.mtimeMs) });
    }
    for (const name of names) {
      const path = join(this.dir, name);
      if (!claimed.has(path) && !name.endsWith('.json')) await this.removeIfStale(path, now);
    }
    found.sort((a, b) => a.lastUsed - b.lastUsed);
    for (const e of found) {
      this.entries.set(e.key, e);
      this.total += e.bytes;
    }
    this.evict();
    this.log?.debug({ entries: this.entries.size, bytes: this.total }, 'audio cache loaded');
  }

  private async removeIfStale(path: string, now: number): Promise<void> {
    const st = await stat(path).catch(() => null);
    if (st !== null && now - st.mtimeMs > STALE_TEMP_MS) await rm(path, { force: true });
  }

  pin(entry: CacheEntry): CacheEntry {
    entry.pins++;
    return entry;
  }

  unpin(entry: CacheEntry): void {
    entry.pins = Math.max(0, entry.pins - 1);
    if (entry.pins === 0) this.evict();
  }

  private touch(entry: CacheEntry, mtimeMs?: number): void {
    entry.lastUsed = Date.now();
    this.entries.delete(entry.key);
    this.entries.set(entry.key, entry);
    // atime carries the LRU order across restarts, even on relatime/noatime mounts; mtime stays the write time.
    if (mtimeMs !== undefined) utimes(entry.audioPath, entry.lastUsed / 1000, mtimeMs / 1000).catch(() => undefined);
  }

  private forget(entry: CacheEntry): void {
    if (this.entries.get(entry.key) === entry) {
      this.entries.delete(entry.key);
      this.total -= entry.bytes;
    }
  }

  /** Synchronous, memory-only lookup: closes the gap between an async miss and starting a conversion. */
  acquireKnown(sha256: string, profile: AudioProfile): CacheEntry | null {
    const known = this.entries.get(AudioCache.keyOf(sha256, profile));
    if (!known) return null;
    this.touch(known);
    return this.pin(known);
  }

  /** A pinned entry for (sha256, profile), or null on a miss. Also finds entries another process wrote. */
  async acquire(sha256: string, profile: AudioProfile): Promise<CacheEntry | null> {
    const p = this.pathsFor(sha256, profile);
    await this.deleting.get(p.key);
    const known = this.entries.get(p.key);
    if (known) {
      this.pin(known);
      const st = await stat(known.audioPath).catch(() => null);
      if (st === null || st.size !== known.meta.sizeBytes) {
        known.pins--;
        this.forget(known);
        return null;
      }
      this.touch(known, st.mtimeMs);
      return known;
    }
    const meta = parseMeta(await readFile(p.metaPath, 'utf8').catch(() => ''));
    if (meta === null) return null;
    const [st, metaSt] = await Promise.all([stat(p.audioPath).catch(() => null), stat(p.metaPath).catch(() => null)]);
    if (st === null || metaSt === null || st.size !== meta.sizeBytes) return null;
    const raced = this.entries.get(p.key);
    if (raced) return this.pin(raced);
    const entry: CacheEntry = { ...p, meta, bytes: st.size + metaSt.size, pins: 1, lastUsed: Date.now() };
    this.entries.set(p.key, entry);
    this.total += entry.bytes;
    this.evict();
    return entry;
  }

  /**
   * Moves a finished file into the cache (atomic rename; the metadata lands last, so a visible
   * .json always has its audio) and returns the entry pinned once for the caller.
   */
  async commit(producedPath: string, meta: Omit<CachedMeta, 'version' | 'format' | 'sizeBytes' | 'createdAt'>): Promise<CacheEntry> {
    const p = this.pathsFor(meta.sourceSha256, meta.profile);
    await this.deleting.get(p.key);
    const sizeBytes = (await stat(producedPath)).size;
    const full: CachedMeta = { version: CACHE_VERSION, ...meta, format: formatOfProfile(meta.profile), sizeBytes, createdAt: new Date().toISOString() };
    const metaTemp = this.tempPath();
    const json = JSON.stringify(full);
    await writeFile(metaTemp, json);
    try {
      await rename(producedPath, p.audioPath).catch(async (err: unknown) => {
        if ((err as { code?: unknown }).code !== 'EXDEV') throw err;
        // A download on another filesystem: copy next to the target first so the swap stays atomic.
        const audioTemp = this.tempPath();
        try {
          await copyFile(producedPath, audioTemp);
          await rename(audioTemp, p.audioPath);
        } finally {
          await rm(audioTemp, { force: true });
        }
      });
      await rename(metaTemp, p.metaPath);
    } finally {
      await rm(metaTemp, { force: true });
    }
    const previous = this.entries.get(p.key);
    if (previous) {
      // Same content under the same key (another process got there first): keep one entry so pins add up.
      this.touch(previous, Date.now());
      return this.pin(previous);
    }
    const entry: CacheEntry = { ...p, meta: full, bytes: sizeBytes + Buffer.byteLength(json), pins: 1, lastUsed: Date.now() };
    this.entries.set(p.key, entry);
    this.total += entry.bytes;
    this.evict();
    return entry;
  }

  /** Drops least-recently-used unpinned entries until the cache fits (pinned ones may overshoot it). */
  private evict(): void {
    if (this.total <= this.maxBytes) return;
    for (const entry of [...this.entries.values()]) {
      if (this.total <= this.maxBytes) break;
      if (entry.pins > 0) continue;
      this.forget(entry);
      const removal = Promise.all([rm(entry.metaPath, { force: true }), rm(entry.audioPath, { force: true })])
        .then(() => undefined)
        .catch((err: unknown) => this.log?.warn({ err, key: entry.key }, 'audio cache eviction failed'))
        .finally(() => {
          if (this.deleting.get(entry.key) === removal) this.deleting.delete(entry.key);
        });
      this.deleting.set(entry.key, removal);
      this.log?.debug({ key: entry.key, bytes: entry.bytes }, 'audio cache evicted');
    }
  }

  /** Waits for pending evictions (tests and shutdown). */
  async settle(): Promise<void> {
    await Promise.all([...this.deleting.values()]);
  }
}
