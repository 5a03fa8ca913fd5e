import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { AudioTarget } from '../audio/targets.js';
import type { Config } from '../config.js';
import type { Db } from '../store/db.js';
import type { Violation } from './rules.js';
import type { Rhythm } from '../core/rhythm.js';
import type { LiveWhatsapp } from './whatsapp/live.js';
import type { WhatsappSessions } from './whatsapp/sessions.js';
import type { LiveTelegramAccounts } from './telegram/account/live.js';
import type { TelegramSessions } from './telegram/account/sessions.js';

/** Why a delivery failed, as `error.code` on the message (docs/sending.md, "Live delivery"). */
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
  | 'platform_refused'
  | 'platform_error'
  /** The sender's proxy did not carry the connection (docs/proxies.md); never sent directly instead. */
  | 'proxy_unreachable';

/**
 * A failed delivery attempt. `transient` ones are tried again later (after `retryAfterMs` when the
 * platform said so); the others settle the message as failed at once. `notAttempted`: nothing reached
 * the platform (the message belongs to another process, which will deliver it), so the try neither
 * counts as an attempt nor moves the message up the backoff ladder.
 */
export class DeliveryError extends Error {
  readonly notAttempted: boolean;
  /**
   * Not a failure but a wait the platform imposed on the sender (Telegram's PEER_FLOOD rest): back to the
   * queue for exactly `retryAfterMs`, with no attempt counted and no retry window, as a daily cap waits.
   */
  readonly waits: boolean;

  constructor(
    readonly code: FailureCode,
    message: string,
    readonly transient: boolean,
    readonly retryAfterMs?: number,
    options: { notAttempted?: boolean; waits?: boolean } = {},
  ) {
    super(message);
    this.name = 'DeliveryError';
    this.notAttempted = options.notAttempted === true || options.waits === true;
    this.waits = options.waits === true;
  }
}

/** A restriction whose end nobody told us is looked at again after this long (delivery/sender-gate.ts). */
export const UNKNOWN_HOLD_RECHECK_MS = 15 * 60_000;

/**
 * The platform keeps this sender from starting new chats for now (WhatsApp's reachout lock, its 463
 * answer): the note is tried again, and the sender shows as `restricted` until `until` (epoch ms; null
 * when the platform did not say).
 */
export class SenderRestricted extends DeliveryError {
  constructor(
    message: string,
    readonly until: number | null,
    retryAfterMs: number,
  ) {
    super('platform_rate_limited', message, true, retryAfterMs);
    this.name = 'SenderRestricted';
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
  /** 100 values 0–31 from the same decode, as Telegram's apps draw them (absent for files cached before). */
  telegramWaveform?: Uint8Array;
  /**
   * Names what the file holds (the audio cache's key: source and format): files with the same key
   * hold the same audio, so an adapter may send bytes it read earlier under this key. Absent: read the file.
   */
  contentKey?: string;
}

/** A send's `session` once its platform's rules accepted it: string fields, tagged with the platform's name. */
export interface PlatformSession {
  platform: string;
  [field: string]: string;
}

export interface DeliveryJob {
  messageId: string;
  accountId: string;
  env: 'test' | 'live';
  platform: string;
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
  /** The "recording…" indicator was shown before this delivery: end it once the note is sent, where the platform needs that. */
  recordingIndicator?: boolean;
  /**
   * The sender's proxy URL, credentials included (its own, else OUTBOUND_PROXY), or null: every connection
   * of this delivery goes through it (platforms/proxy/). Never logged nor shown.
   */
  proxy?: string | null;
  /** Tells what a person recognises the sender by, when the platform's answer names it (a bot's @username); never a credential. */
  onSenderLabel?(label: string): void;
}

/** One platform's way of handing over a voice note. Resolves when the platform accepted it. */
export interface PlatformAdapter {
  deliver(job: DeliveryJob): Promise<void>;
  /**
   * Shows the recipient the platform's own "recording…" indicator for about `ms` (docs/sending.md, "Sending
   * like a person"). Resolves once it is showing: keeping it up meanwhile must not hold the caller (a light timer
   * at most; if the process dies the indicator just stops). Absent: the adapter has none to show.
   */
  showRecording?(job: DeliveryJob, ms: number): Promise<void>;
}

/** What a platform said of a recipient (POST /recipients/check): `exists` null when it did not say. */
export interface RecipientCheck {
  exists: boolean | null;
  reason: string | null;
}

/** Who a send belongs to. */
export interface Owner {
  accountId: string;
  env: 'test' | 'live';
}

/** A send refused at accept time by a check that needs storage (an error code of the API, a message, details). */
export interface AcceptProblem {
  code: 'invalid_parameter' | 'session_not_connected';
  message: string;
  details: Record<string, unknown>;
}

/**
 * The part of the process's shared services that platforms use. Declared here, where it is consumed, so
 * platforms need not know the services of the layers above them; app.ts passes its services, which have
 * all of these (and more).
 */
export interface PlatformServices {
  config: Config;
  db: Db;
  /** The shared Redis, when REDIS_URL is set (pacing that spans processes). */
  redis: Redis | undefined;
  /** The key prefix every Redis counter of this app carries. */
  redisKeyPrefix: string | undefined;
  logger: Logger;
  whatsappSessions: WhatsappSessions;
  /** Live WhatsApp sockets held by this process. */
  whatsappLive: LiveWhatsapp;
  /** Live Telegram accounts (`ts_…` sessions) held by this process. */
  telegramAccounts?: LiveTelegramAccounts;
  /** Telegram account sessions (`ts_…`), for their status at acceptance. */
  telegramSessions?: TelegramSessions;
}

/** What a platform's adapters are built from: the process's shared services, and tests' timings by platform name. */
export interface PlatformContext {
  services: PlatformServices;
  /** Tests: per-platform timings (the platform reads and checks its own entry). */
  tuning: Readonly<Record<string, unknown>>;
}

/**
 * Everything that is one platform's, in one value: its rules, its audio, its adapters. Each lives in
 * src/platforms/<name>/ and is listed once in src/platforms/registry.ts.
 */
export interface PlatformDefinition {
  /** The `platform` value of a send. */
  readonly name: string;
  /** The voice note format and limits (size, duration) the platform takes. */
  readonly audio: AudioTarget;
  /** Longest caption; null when the platform takes none. */
  readonly maxCaptionLength: number | null;
  /**
   * The names a send's `session` may carry: any other is refused as an unknown field
   * (`session.<name>`, 400). Absent: not checked (platforms that tests register for themselves).
   */
  readonly sessionFields?: readonly string[];
  checkRecipient(recipient: string): Violation | null;
  checkSession(session: Record<string, unknown>): PlatformSession | Violation;
  /** The platform shows a "recording…" indicator (`recording_indicator: true` on a send is refused elsewhere). */
  readonly recordingIndicator?: boolean;
  /**
   * Names the sender of a send (a bot, a cookie, a linked session) for its daily rhythm: a hash of its
   * credential or a public id, never the credential. Absent: no cap applies on this platform.
   */
  senderKey?(session: PlatformSession): string;
  /**
   * What kind of sender a key names, as GET /senders shows it (`whatsapp_session`, `telegram_bot`,
   * `linkedin_cookie`, …). Absent: the platform's name.
   */
  senderKind?(senderKey: string): string;
  /**
   * Live keys: asks the platform whether `recipient` exists for this sender (POST /recipients/check).
   * Absent: the platform is not asked (`exists` null).
   */
  recipientExists?(input: { session: PlatformSession; recipient: string; owner: Owner; /** The sender's proxy URL (docs/proxies.md), or null: direct. */ proxy?: string | null }, services: PlatformServices): Promise<RecipientCheck>;
  /**
   * The built-in daily rhythm of this kind of sender when it differs from the platform's (a Telegram
   * account beside bots); an account's own rhythm for the platform still wins. Absent or undefined: the platform's.
   */
  senderRhythm?(session: PlatformSession): Rhythm | undefined;
  /** Checks at accept time that need storage (a linked session that must be connected, say). */
  checkAtAccept?(session: PlatformSession, owner: Owner, services: PlatformServices): Promise<AcceptProblem | null>;
  /**
   * The process-affinity key of a message (a resource whose connection lives in one process): only the
   * process holding it takes the message. Null or absent: any process.
   */
  affinityKey?(session: PlatformSession): string | null;
  /** The live adapter, built once per worker. */
  createLiveAdapter(context: PlatformContext): PlatformAdapter;
  /** Sandbox (`sk_test_`): checks before the simulated platform call, where this platform differs. */
  sandboxCheck?(job: DeliveryJob, context: PlatformContext): Promise<void>;
}
