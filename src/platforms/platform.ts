import type { Platform, PlatformSession } from '../core/send-rules.js';

/** Why a delivery failed, as `error.code` on the message (PRODUCT.md, "Messages"). */
export type FailureCode =
  | 'session_expired'
  | 'invalid_session'
  | 'session_not_connected'
  | 'recipient_not_found'
  | 'recipient_blocked'
  | 'audio_fetch_failed'
  | 'audio_fetch_blocked'
  | 'audio_too_large'
  | 'audio_too_long'
  | 'audio_unsupported'
  | 'platform_rate_limited'
  | 'platform_error';

/**
 * A failed delivery attempt. `transient` ones are tried again later (after `retryAfterMs` when the
 * platform said so); the others settle the message as failed at once. `notAttempted`: nothing reached
 * the platform (the message belongs to another process, which will deliver it), so the try neither
 * counts as an attempt nor moves the message up the backoff ladder.
 */
export class DeliveryError extends Error {
  readonly notAttempted: boolean;

  constructor(
    readonly code: FailureCode,
    message: string,
    readonly transient: boolean,
    readonly retryAfterMs?: number,
    options: { notAttempted?: boolean } = {},
  ) {
    super(message);
    this.name = 'DeliveryError';
    this.notAttempted = options.notAttempted === true;
  }
}

/** The voice note, ready in the platform's format. */
export interface VoiceFile {
  path: string;
  mimeType: string;
  fileName: string;
  sizeBytes: number;
  durationSeconds: number;
  /** 64 values 0–100, for WhatsApp. */
  waveform: Uint8Array;
}

export interface DeliveryJob {
  messageId: string;
  accountId: string;
  env: 'test' | 'live';
  platform: Platform;
  recipient: string;
  session: PlatformSession;
  caption: string | null;
  audio: VoiceFile;
  /** 1 on the first try. */
  attempt: number;
  /**
   * Aborted when this attempt must stop (shutdown, or the worker lost its lease on the message):
   * pass it to every network call so an aborted attempt never reaches the platform afterwards.
   * `messageId` stays the same across attempts: use it as the idempotency key where a platform has one.
   */
  signal: AbortSignal;
}

/** One platform's way of handing over a voice note. Resolves when the platform accepted it. */
export interface PlatformAdapter {
  deliver(job: DeliveryJob): Promise<void>;
}
