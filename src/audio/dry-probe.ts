import { randomUUID } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { createAudioAgent, fetchAudio } from './fetch.js';
import { copyLocalSource, exceedsDuration, lengthOf, tooLong } from './pipeline-steps.js';
import { detectSource } from './probe.js';
import { DEFAULT_MAX_SOURCE_BYTES, type AudioTarget } from './targets.js';
import type { AddressPolicy } from './url-check.js';

/** What a dry run learns of a note's audio without converting or keeping it. */
export interface ProbedAudio {
  size_bytes: number;
  container: string;
  codec: string | null;
  duration_seconds: number | null;
}

export interface ProbeAudioInput {
  url: string;
  target: AudioTarget;
  /** Where the download is kept while it is looked at (deleted after). */
  dataDir: string;
  allowPrivate: boolean;
  /** The caller's `duration`, used only when the file does not say its own. */
  durationHint: number | null;
  /** The sandbox's shipped sample, read instead of fetching (as the worker does). */
  localSource?: string | null;
  addressPolicy?: AddressPolicy;
  timeoutMs?: number;
}

const PROBE_TIMEOUT_MS = 30_000;

/**
 * Fetches the audio as the worker would (the same address vetting, redirects and size limit), reads its
 * container, codec and length, and checks them against the platform's limits: the same AudioError the
 * real send would fail with (audio_fetch_failed, audio_fetch_blocked, audio_too_large, audio_too_long,
 * audio_unsupported). Nothing is converted or cached; the download is deleted.
 */
export async function probeAudio(input: ProbeAudioInput): Promise<ProbedAudio> {
  const dir = join(input.dataDir, 'tmp', 'audio');
  await mkdir(dir, { recursive: true });
  const path = join(dir, `dry-${randomUUID()}`);
  const agent = createAudioAgent({ allowPrivate: input.allowPrivate, ...(input.addressPolicy ? { addressPolicy: input.addressPolicy } : {}) });
  try {
    const source =
      input.localSource != null
        ? await copyLocalSource(input.localSource, path, input.url)
        : await fetchAudio({
            url: input.url,
            destPath: path,
            maxBytes: DEFAULT_MAX_SOURCE_BYTES,
            timeoutMs: input.timeoutMs ?? PROBE_TIMEOUT_MS,
            allowPrivate: input.allowPrivate,
            dispatcher: agent,
            ...(input.addressPolicy ? { addressPolicy: input.addressPolicy } : {}),
          });
    const info = await detectSource(source.path, source.sizeBytes);
    const seconds = lengthOf(info.durationSeconds, input.durationHint);
    if (exceedsDuration(seconds, input.target)) throw tooLong(seconds!, input.target.maxDurationSeconds!);
    return { size_bytes: source.sizeBytes, container: info.container, codec: info.codec, duration_seconds: seconds };
  } finally {
    await rm(path, { force: true });
    await agent.close().catch(() => undefined);
  }
}
