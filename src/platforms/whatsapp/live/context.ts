import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { SecretBox } from '../../../core/secret-box.js';
import type { Database } from '../../../store/schema.js';
import type { Owner, WhatsappSessionRow } from '../../../store/whatsapp-sessions.js';
import type { StoredAuthState } from '../auth-state.js';
import { DISCONNECT, type SentWhatsappMessage, type WhatsappSocket, type WhatsappSocketFactory } from '../socket.js';
import type { OnHeard } from '../../../inbound/recorder.js';
import type { NewChatCapStatus } from '../../../store/new-chat-cap.js';
import type { KeptProxy } from '../../../store/sender-proxy.js';
import type { ConnectionProxies } from '../../proxy/connection-proxy.js';

/**
 * What the parts of live WhatsApp (ownership lease, socket lifecycle, linking, sending) share: the
 * process's sessions, its holder id, its timings, and the types and errors they speak in.
 */

/** Live linking could not reach WhatsApp: no socket, or no QR code in time. */
export class WhatsappUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WhatsappUnavailableError';
  }
}

export interface LiveTuning {
  /** How long the QR code can be scanned (the product promises about 45 s). */
  qrValidityMs?: number;
  /** How long POST /whatsapp/sessions waits for the first QR code before answering 502. */
  qrWaitMs?: number;
  /** A holder's claim on a session; renewed every `renewMs`. */
  leaseMs?: number;
  renewMs?: number;
  /** How often a worker process looks for sessions nobody holds. */
  takeoverScanMs?: number;
  /** Reconnects after an unexpected close: first delay, doubling up to `reconnectMaxDelayMs`, at most `reconnectAttempts` in a row. */
  reconnectFirstDelayMs?: number;
  reconnectMaxDelayMs?: number;
  reconnectAttempts?: number;
  /** Least time between two sends of one session, plus up to `sendJitterMs` (bursts get accounts banned). */
  sendGapMs?: number;
  sendJitterMs?: number;
  /** How long a delivery waits for a session being (re)connected in this process. */
  connectWaitMs?: number;
  /** How long a logout may take before the socket is simply closed. */
  logoutTimeoutMs?: number;
}

export interface LiveWhatsappOptions extends LiveTuning {
  db: Kysely<Database>;
  secretBox: SecretBox;
  logger: Logger;
  socketFactory: WhatsappSocketFactory;
  /** Clock for the timestamps users see (created_at, last_connected_at). Leases always use real time. */
  now?: () => number;
  /** The recorder of what a held session hears (replies from the people it wrote to). */
  onHeard?: OnHeard;
  /** The proxy of each session's next connection, checked (docs/proxies.md); none: every session connects directly. */
  proxies?: ConnectionProxies;
}

/** An open socket of a session held by this process, for one delivery at a time. */
export interface HeldSession {
  readonly sessionId: string;
  /** Runs `send` with the session's socket once the per-session pacing allows. */
  paced<T>(send: (socket: WhatsappSocket) => Promise<T>): Promise<T>;
  /** Keeps what `sendMessage` gave back, sealed, so a recipient's resend request can be answered later (never throws). */
  keepForResend(sent: SentWhatsappMessage | undefined): Promise<void>;
}

/**
 * Why a session's socket is not available here: `held_elsewhere` (another live process has it: that
 * process's worker should deliver), `not_open` (reconnecting here), `no_credentials`, `not_held`.
 */
export type Acquired =
  | { held: HeldSession }
  | { held?: undefined; reason: 'held_elsewhere' | 'not_held' | 'not_open' | 'no_credentials' }
  /** Its proxy does not carry its connection (docs/proxies.md): `message` names the proxy by scheme, host and port. */
  | { held?: undefined; reason: 'proxy_unreachable'; message: string };

export interface LiveWhatsapp {
  readonly holderId: string;
  /**
   * Starts linking: a row in qr_pending, a socket, and the first QR code (raw pairing string), or with
   * `phoneNumber` the 8-character pairing code WhatsApp gave for that number.
   */
  create(owner: Owner, request?: { phoneNumber?: string; proxy?: KeptProxy }): Promise<LiveCreated>;
  /** The session's proxy was changed: if this process holds it linked, it connects again through the new one. */
  proxyChanged(sessionId: string): Promise<void>;
  /** Logs the device out when it can, then erases the session and its credentials. */
  remove(owner: Owner, id: string): Promise<boolean>;
  /** This process runs a delivery worker: it takes over connected sessions nobody holds. */
  serveDeliveries(): void;
  /** The session's socket here, taking the session over first when it is free. */
  acquire(sessionId: string): Promise<Acquired>;
  /** Closes every socket; `release: false` leaves the leases to run out (what a crash looks like). */
  stop(options?: { release?: boolean }): Promise<void>;
}

export type Phase = 'connecting' | 'open' | 'waiting' | 'closed';

export interface Link {
  id: string;
  auth: StoredAuthState;
  socket: WhatsappSocket | undefined;
  phase: Phase;
  attempts: number;
  reconnectTimer: NodeJS.Timeout | undefined;
  qrTimer: NodeJS.Timeout | undefined;
  /** The creation request waiting for the first QR code. */
  firstQr: { resolve(qr: string): void; reject(error: Error): void } | undefined;
  openWaiters: Set<() => void>;
  /** A pairing code was asked for and not entered yet. */
  awaitingCode: boolean;
  /** WhatsApp's new-chat message cap as last heard: its warnings space the session's sends further apart. */
  newChatCap: NewChatCapStatus | undefined;
  /** The proxy URL the current connection went through (null: direct), to see a change (never logged). */
  proxyUrl: string | null;
  /** Connections its proxy did not carry in a row (they wait longer each time, and never end the session). */
  proxyFailures: number;
  /** Why its proxy did not carry the last one (scheme, host and port only), until one goes through. */
  proxyFailure: string | undefined;
}

export type LiveCreated = { row: WhatsappSessionRow; qr: string; pairingCode?: undefined } | { row: WhatsappSessionRow; pairingCode: string; qr?: undefined };

export const DEFAULTS: Required<LiveTuning> = {
  qrValidityMs: 45_000,
  qrWaitMs: 20_000,
  leaseMs: 30_000,
  renewMs: 10_000,
  takeoverScanMs: 5_000,
  reconnectFirstDelayMs: 1_000,
  reconnectMaxDelayMs: 60_000,
  // 1 s doubling to 60 s: about half an hour of trying before the session counts as lost.
  reconnectAttempts: 36,
  sendGapMs: 3_000,
  sendJitterMs: 2_000,
  connectWaitMs: 15_000,
  logoutTimeoutMs: 10_000,
};

// Closes after which the device can never come back: the session is disconnected and its creds void.
export const FINAL_CLOSES = new Map<number, string>([
  [DISCONNECT.loggedOut, 'the device was logged out from the phone'],
  [DISCONNECT.forbidden, 'WhatsApp refused the account (forbidden)'],
  [DISCONNECT.badSession, 'the stored session is not valid any more'],
  [DISCONNECT.multideviceMismatch, 'the account does not support linked devices'],
]);

export const withTimeout = <T>(work: Promise<T>, ms: number): Promise<T | undefined> =>
  Promise.race([work, sleep(ms, undefined, { ref: false })]);

/** The session's socket closed between acquiring it and its turn to send. */
export class SessionNotOpenError extends Error {
  constructor(sessionId: string) {
    super(`WhatsApp session ${sessionId} is not open right now`);
    this.name = 'SessionNotOpenError';
  }
}

export interface LiveContext {
  readonly tuning: Required<LiveTuning>;
  readonly db: Kysely<Database>;
  readonly secretBox: SecretBox;
  readonly socketFactory: WhatsappSocketFactory;
  readonly logger: Logger;
  /** Clock for the timestamps users see; leases always use real time. */
  readonly now: () => number;
  /** The id this process holds sessions (their affinity leases) under. */
  readonly holderId: string;
  /** Where replies heard by a held session go; none: not listened to. */
  readonly onHeard: OnHeard | undefined;
  /** The proxy of each session's next connection; undefined: direct. */
  readonly proxies: ConnectionProxies | undefined;
  /** The sessions this process holds, by id. */
  readonly links: Map<string, Link>;
  readonly state: { serving: boolean; stopped: boolean };
  log(sessionId: string): Logger;
}

/** Closes a socket without waiting, whatever state it is in. */
export function endQuietly(socket: WhatsappSocket | undefined): void {
  if (!socket) return;
  try {
    const ended = socket.end(undefined);
    if (ended instanceof Promise) ended.catch(() => undefined);
  } catch {
    // already closed
  }
}
