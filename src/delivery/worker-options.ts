import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { AudioFacts } from '../audio/pipeline.js';
import type { AudioTarget } from '../audio/targets.js';
import type { SecretBox } from '../core/secret-box.js';
import type { Db } from '../store/db.js';
import type { MessageRow } from '../store/messages.js';
import type { Database } from '../store/schema.js';
import type { DeliveryError, PlatformAdapter, VoiceFile } from '../platforms/platform.js';
import type { DeliveryGate } from './rhythm-gate.js';

/** What the delivery worker is given (app.ts wires it), and what it asks of the message log. */

/** Turns an audio URL into the platform's voice format (the audio pipeline). */
export interface AudioSource {
  prepare(input: {
    url: string;
    target: AudioTarget;
    durationHint?: number;
    /** Stops the download and the conversion of this request. */
    signal?: AbortSignal;
    /** A shipped sample read instead of downloading `url` (sandbox only). */
    localSource?: string;
    /** Told when the source is downloaded (what is left is converting it); not when nothing was downloaded. */
    onFetched?: () => void;
  }): Promise<PreparedVoice>;
  /**
   * Whether the audio of `url` is known to be ready for the target (no conversion to wait for): the
   * claim's guess, before any download. Without it every note counts as ready.
   */
  isReady?(url: string, target: AudioTarget): boolean;
  /**
   * While `busy()` says so, conversions give the CPU way to the deliveries (the pipeline pauses its
   * encoders most of the time); returns the undo, for a worker that stops.
   */
  giveWayWhile?(busy: () => boolean): () => void;
}

/** `facts` (source as detected, cache key) is what the message log keeps of the audio. */
export type PreparedVoice = VoiceFile & { release(): void; facts?: AudioFacts };

export interface WorkerOptions {
  db: Db;
  secretBox: SecretBox;
  audio: AudioSource;
  /** The adapter for a message's environment and platform. */
  adapterFor(env: 'test' | 'live', platform: string): PlatformAdapter;
  /** The voice format and limits of a platform; undefined for a platform this build does not have. */
  audioTargetFor(platform: string): AudioTarget | undefined;
  logger: Logger;
  /** Messages handled at once by this process (besides those in conversion slots). */
  concurrency?: number;
  /**
   * Slots of their own, beside `concurrency`'s, for notes whose audio may need converting (claimed
   * while their audio was not known to be ready), held until their audio is ready; a note then takes
   * one of its account's slots for its platform call, which may leave this process that many over
   * `concurrency` for a moment. A conversion holds its slot for seconds, most of it waiting for the
   * transcoder: `concurrency` stays for notes whose audio is ready. Undefined: no such slots, every
   * note takes one of `concurrency`'s.
   */
  conversionSlots?: number;
  /**
   * The most of those slots one account may hold, in percent (WORKER_ACCOUNT_SHARE): the rest stays free
   * for other accounts (fair-share.ts).
   */
  accountSharePercent?: number;
  leaseMs?: number;
  /** Longest sleep between looks at the queue, for work that other processes accepted. */
  pollMs?: number;
  /**
   * The id under which this process holds affinity leases (platform resources such as a session's
   * connection): messages whose key another process holds are left to that process's worker.
   */
  affinityHolder?: string;
  /** The message log: told of each attempt and its audio (never throws; delivery does not depend on it). */
  recorder?: AttemptRecorder;
  /**
   * This process's clock (tests skew it). Only differences of it are used: every time stored or
   * compared is the database's.
   */
  clock?: () => number;
  /** The clock send windows are weighed on (tests set it; default Date.now): only what the window says of its instant is used. */
  windowClock?: () => number;
  /** Sending like a person: each sender's daily cap and the "recording…" indicator, around the platform call. */
  gate?: DeliveryGate;
  /** OUTBOUND_PROXY: the proxy of live senders without one of their own (docs/proxies.md). */
  outboundProxy?: string;
  /** ALLOW_PRIVATE_URLS: a sender's proxy at a private address is used; otherwise it is checked again before each attempt. */
  allowPrivateProxies?: boolean;
  /** The kind of a sender (`whatsapp_session`, `telegram_bot`, …) by its platform and key, for its record (docs/senders.md, "Senders"). */
  senderKind?(platform: string, senderKey: string): string;
  /** Told of each message this worker settled as delivered, once its outcome is written (the sandbox's answering recipients). */
  onDelivered?: (message: MessageRow) => void;
}

/** What the message log keeps of an attempt; `error` null when the platform accepted the voice note. */
export interface AttemptRecord {
  startedAt: number;
  endedAt: number;
  error: DeliveryError | null;
  /** When it is tried again; null when the attempt settled the message. */
  retryAt: number | null;
}

/** Writes one attempt's record in the transaction it is given; throws when it cannot. */
export type RecordWrite = (trx: Kysely<Database>) => Promise<void>;

export interface AttemptRecorder {
  audioPrepared(message: MessageRow, audio: PreparedVoice): Promise<void>;
  /**
   * An attempt ended (called once per attempt): the write of its record, which the worker runs in the
   * transaction that writes the attempt's outcome, in a savepoint of its own. So the record commits with
   * the outcome (one transaction and one flush instead of two), and one that cannot be written is
   * logged and dropped while the outcome stands.
   */
  attemptEnded(message: MessageRow, attempt: AttemptRecord): RecordWrite | undefined;
}
