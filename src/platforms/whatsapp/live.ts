import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { newWhatsappSessionId } from '../../core/ids.js';
import type { SecretBox } from '../../core/secret-box.js';
import type { Database } from '../../store/schema.js';
import {
  claimSession,
  deleteSessionAndAuth,
  endLiveSession,
  findOrphanedSessions,
  findSessionById,
  releaseLease,
  renewLeases,
} from '../../store/whatsapp-live.js';
import { findWhatsappSession, insertWhatsappSession, transitionWhatsappSession, type Owner, type WhatsappSessionRow } from '../../store/whatsapp-sessions.js';
import { KeyedPacer } from '../pacing.js';
import { createStoredAuthState, newAuthCreds, openAuthValue, sealAuthValue, type StoredAuthState } from './auth-state.js';
import {
  DISCONNECT,
  disconnectCode,
  phoneOfJid,
  type AuthCreds,
  type ConnectionUpdate,
  type KeyData,
  type WhatsappSocket,
  type WhatsappSocketFactory,
} from './socket.js';

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
}

/** An open socket of a session held by this process, for one delivery at a time. */
export interface HeldSession {
  readonly sessionId: string;
  /** Runs `send` with the session's socket once the per-session pacing allows. */
  paced<T>(send: (socket: WhatsappSocket) => Promise<T>): Promise<T>;
}

/**
 * Why a session's socket is not available here: `held_elsewhere` (another live process has it: that
 * process's worker should deliver), `not_open` (reconnecting here), `no_credentials`, `not_held`.
 */
export type Acquired = { held: HeldSession } | { held?: undefined; reason: 'held_elsewhere' | 'not_held' | 'not_open' | 'no_credentials' };

export interface LiveWhatsapp {
  readonly holderId: string;
  /** Starts linking: a row in qr_pending, a socket, the first QR code (raw pairing string). */
  create(owner: Owner): Promise<{ row: WhatsappSessionRow; qr: string }>;
  /** Logs the device out when it can, then erases the session and its credentials. */
  remove(owner: Owner, id: string): Promise<boolean>;
  /** This process runs a delivery worker: it takes over connected sessions nobody holds. */
  serveDeliveries(): void;
  /** The session's socket here, taking the session over first when it is free. */
  acquire(sessionId: string): Promise<Acquired>;
  /** Closes every socket; `release: false` leaves the leases to run out (what a crash looks like). */
  stop(options?: { release?: boolean }): Promise<void>;
}

type Phase = 'connecting' | 'open' | 'waiting' | 'closed';

interface Link {
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
}

const DEFAULTS: Required<LiveTuning> = {
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
const FINAL_CLOSES = new Map<number, string>([
  [DISCONNECT.loggedOut, 'the device was logged out from the phone'],
  [DISCONNECT.forbidden, 'WhatsApp refused the account (forbidden)'],
  [DISCONNECT.badSession, 'the stored session is not valid any more'],
  [DISCONNECT.multideviceMismatch, 'the account does not support linked devices'],
]);

const withTimeout = <T>(work: Promise<T>, ms: number): Promise<T | undefined> =>
  Promise.race([work, sleep(ms, undefined, { ref: false })]);

/**
 * Live WhatsApp sessions: one Baileys socket per session, owned by one process at a time through a
 * lease in the database. Pairing runs in the process that answered POST /whatsapp/sessions; connected
 * sessions live in processes that run a delivery worker, which take over any session whose lease is
 * free or ran out (a stopped or crashed process), restoring the auth state from the database.
 */
export function createLiveWhatsapp(options: LiveWhatsappOptions): LiveWhatsapp {
  const tuning: Required<LiveTuning> = { ...DEFAULTS };
  for (const [name, value] of Object.entries(options) as Array<[keyof LiveTuning, unknown]>) {
    if (name in DEFAULTS && typeof value === 'number') tuning[name] = value;
  }
  const { db, secretBox, socketFactory } = options;
  const logger = options.logger.child({ component: 'whatsapp' });
  const now = options.now ?? Date.now;
  const holderId = `wa_${randomUUID()}`;
  const links = new Map<string, Link>();
  let serving = false;
  let stopped = false;
  let renewTimer: NodeJS.Timeout | undefined;
  let scanTimer: NodeJS.Timeout | undefined;
  let scanning: Promise<void> | undefined;
  const restoring = new Map<string, Promise<Link | undefined>>();
  // One send at a time per session, each followed by a gap with jitter: bursts get accounts banned.
  const sendPacer = new KeyedPacer(() => tuning.sendGapMs + Math.random() * tuning.sendJitterMs);

  const log = (id: string) => logger.child({ session_id: id });

  // ---- leases ----------------------------------------------------------------------------------

  function ensureRenewing(): void {
    if (renewTimer || stopped) return;
    renewTimer = setInterval(() => void renew(), tuning.renewMs);
    renewTimer.unref();
  }

  async function renew(): Promise<void> {
    const ids = [...links.keys()];
    if (ids.length === 0) return;
    let held: Set<string>;
    try {
      held = await renewLeases(db, holderId, ids, Date.now() + tuning.leaseMs);
    } catch (err) {
      logger.warn({ err }, 'could not renew WhatsApp session leases');
      return;
    }
    for (const id of ids) {
      const link = links.get(id);
      if (!link || held.has(id)) continue;
      // Deleted while we held it (DELETE answered by another process): unlink the device as DELETE promises.
      const row = await findSessionById(db, id).catch(() => null);
      if (row === undefined) await dropLink(link, { logout: true, release: false });
      else if (row !== null) {
        log(id).warn('lost the lease of a WhatsApp session; another process holds it now');
        await dropLink(link, { release: false });
      }
    }
  }

  function onLeaseLost(id: string): void {
    const link = links.get(id);
    if (link) {
      log(id).warn('a write found the WhatsApp session held by another process; letting it go');
      void dropLink(link, { release: false });
    }
  }

  // ---- sockets ---------------------------------------------------------------------------------

  function newLink(id: string, creds: AuthCreds): Link {
    const link: Link = {
      id,
      auth: createStoredAuthState({ db, box: secretBox, logger: log(id), sessionId: id, holder: holderId, creds, onLeaseLost: () => onLeaseLost(id) }),
      socket: undefined,
      phase: 'connecting',
      attempts: 0,
      reconnectTimer: undefined,
      qrTimer: undefined,
      firstQr: undefined,
      openWaiters: new Set(),
    };
    links.set(id, link);
    ensureRenewing();
    return link;
  }

  const isPaired = (link: Link): boolean => typeof link.auth.creds.me?.id === 'string';

  async function connect(link: Link): Promise<void> {
    if (link.phase === 'closed') return;
    link.phase = 'connecting';
    let socket: WhatsappSocket;
    try {
      socket = await socketFactory({
        sessionId: link.id,
        auth: { creds: link.auth.creds, keys: link.auth.keys },
        logger: log(link.id),
        // Baileys' own QR rotation must not outlive ours: only the first code is ever shown.
        qrTimeoutMs: tuning.qrValidityMs + 15_000,
      });
    } catch (err) {
      log(link.id).warn({ err }, 'could not open a WhatsApp socket');
      onClosed(link, undefined);
      return;
    }
    // Closed while the factory ran (deleted, shut down).
    if ((link.phase as Phase) === 'closed') {
      endQuietly(socket);
      return;
    }
    link.socket = socket;
    socket.ev.on('creds.update', (update) => {
      if (link.socket !== socket) return;
      Object.assign(link.auth.creds, update);
      void link.auth.saveCreds();
    });
    socket.ev.on('connection.update', (update) => {
      if (link.socket !== socket) return;
      void onUpdate(link, socket, update).catch((err: unknown) => log(link.id).error({ err }, 'WhatsApp connection update failed'));
    });
  }

  function endQuietly(socket: WhatsappSocket | undefined): void {
    if (!socket) return;
    try {
      const ended = socket.end(undefined);
      if (ended instanceof Promise) ended.catch(() => undefined);
    } catch {
      // already closed
    }
  }

  async function onUpdate(link: Link, socket: WhatsappSocket, update: ConnectionUpdate): Promise<void> {
    if (update.qr && link.firstQr) {
      const waiter = link.firstQr;
      link.firstQr = undefined;
      waiter.resolve(update.qr);
    }
    if (update.connection === 'open') await onOpen(link, socket);
    else if (update.connection === 'close') {
      link.socket = undefined;
      onClosed(link, disconnectCode(update));
    }
  }

  async function onOpen(link: Link, socket: WhatsappSocket): Promise<void> {
    clearTimeout(link.qrTimer);
    link.qrTimer = undefined;
    link.attempts = 0;
    const at = now();
    const phone = phoneOfJid(socket.user?.id ?? link.auth.creds.me?.id);
    const moved = await transitionWhatsappSession(
      db,
      link.id,
      ['qr_pending', 'connected'],
      { status: 'connected', phone_number: phone, last_connected_at: at, qr_expires_at: null },
      at,
    );
    if (!moved) {
      // Deleted, expired or disconnected meanwhile: nothing may stay linked for a session that is gone.
      await dropLink(link, { logout: true, release: true });
      return;
    }
    link.phase = 'open';
    log(link.id).info({ phone_number: phone }, 'WhatsApp session connected');
    for (const wake of link.openWaiters) wake();
    link.openWaiters.clear();
    // Without a worker here nothing would send through it: hand it to a process that has one.
    if (!serving) await dropLink(link, { release: true });
  }

  function onClosed(link: Link, code: number | undefined): void {
    if (link.phase === 'closed') return;
    link.phase = 'waiting';
    const id = link.id;
    if (link.firstQr) {
      const waiter = link.firstQr;
      link.firstQr = undefined;
      waiter.reject(new WhatsappUnavailableError(`WhatsApp closed the connection before showing a QR code${code ? ` (${code})` : ''}`));
      return;
    }
    if (code === DISCONNECT.restartRequired) {
      // The phone scanned the code: WhatsApp wants a fresh connection with the saved creds. Normal pairing.
      log(id).info('WhatsApp pairing: reconnecting with the new creds');
      clearTimeout(link.qrTimer);
      link.qrTimer = undefined;
      void (async () => {
        await transitionWhatsappSession(db, id, ['qr_pending'], { qr_expires_at: null }, now()).catch(() => false);
        await link.auth.flush();
        await connect(link);
      })();
      return;
    }
    const final = code !== undefined ? FINAL_CLOSES.get(code) : undefined;
    if (final) {
      void voidSession(link, 'disconnected', final);
      return;
    }
    if (code === DISCONNECT.connectionReplaced) {
      log(id).warn('another connection with the same creds replaced this one; letting the session go');
      void dropLink(link, { release: true });
      return;
    }
    if (!isPaired(link)) {
      // Before the scan a new connection would need a new QR code, which nobody would see.
      void voidSession(link, 'qr_expired', 'the QR code is no longer valid');
      return;
    }
    link.attempts += 1;
    if (link.attempts > tuning.reconnectAttempts) {
      void voidSession(link, 'disconnected', `WhatsApp could not be reached after ${tuning.reconnectAttempts} attempts`);
      return;
    }
    const delay = Math.min(tuning.reconnectFirstDelayMs * 2 ** (link.attempts - 1), tuning.reconnectMaxDelayMs);
    log(id).info({ code, attempt: link.attempts, delay_ms: delay }, 'WhatsApp connection closed; reconnecting');
    link.reconnectTimer = setTimeout(() => {
      link.reconnectTimer = undefined;
      void connect(link);
    }, delay * (0.8 + 0.4 * Math.random()));
    link.reconnectTimer.unref();
  }

  /** Ends the session for good: a final status, the creds voided, the socket closed, the lease let go. */
  async function voidSession(link: Link, status: 'disconnected' | 'qr_expired', why: string): Promise<void> {
    log(link.id).info({ status }, `WhatsApp session ends: ${why}`);
    const from = status === 'qr_expired' ? (['qr_pending'] as const) : (['qr_pending', 'connected'] as const);
    endQuietly(closeLocally(link));
    await link.auth.flush();
    try {
      await endLiveSession(db, link.id, [...from], status, now());
    } catch (err) {
      log(link.id).error({ err }, 'could not record the end of a WhatsApp session');
    }
  }

  /** Stops everything this process does for the session, without touching its status. */
  function closeLocally(link: Link): WhatsappSocket | undefined {
    link.phase = 'closed';
    clearTimeout(link.qrTimer);
    clearTimeout(link.reconnectTimer);
    link.auth.stopWriting();
    const socket = link.socket;
    link.socket = undefined;
    if (link.firstQr) {
      link.firstQr.reject(new WhatsappUnavailableError('the session was closed before a QR code arrived'));
      link.firstQr = undefined;
    }
    for (const wake of link.openWaiters) wake();
    link.openWaiters.clear();
    if (links.get(link.id) === link) links.delete(link.id);
    return socket;
  }

  /** Lets go of a session: writes what is pending, optionally unlinks the device, closes the socket. */
  async function dropLink(link: Link, how: { logout?: boolean; release: boolean }): Promise<void> {
    if (link.phase === 'closed') return;
    const socket = link.socket;
    link.socket = undefined;
    await link.auth.flush();
    closeLocally(link);
    if (socket && how.logout) {
      const out = await withTimeout(
        socket.logout().then(
          () => true,
          (err: unknown) => log(link.id).warn({ err }, 'WhatsApp logout failed'),
        ),
        tuning.logoutTimeoutMs,
      );
      if (out === undefined) log(link.id).warn('WhatsApp logout timed out');
    }
    endQuietly(socket);
    if (how.release) await releaseLease(db, link.id, holderId).catch((err: unknown) => log(link.id).warn({ err }, 'could not release a WhatsApp lease'));
  }

  // ---- taking sessions over ----------------------------------------------------------------------

  /** Claims a free session and reconnects it from the stored auth state. Undefined when it cannot. */
  function restore(id: string): Promise<Link | undefined> {
    const existing = links.get(id);
    if (existing) return Promise.resolve(existing);
    let pending = restoring.get(id);
    if (!pending) {
      pending = (async () => {
        if (stopped || !(await claimSession(db, id, holderId, Date.now(), tuning.leaseMs))) return undefined;
        const row = await findSessionById(db, id);
        if (!row || row.auth_state === null || row.env !== 'live') {
          await releaseLease(db, id, holderId);
          return undefined;
        }
        let creds: AuthCreds;
        try {
          creds = await openAuthValue<AuthCreds>(secretBox, row.auth_state);
        } catch (err) {
          log(id).error({ err }, 'the stored WhatsApp creds cannot be opened (was SECRET_KEY changed?)');
          await releaseLease(db, id, holderId);
          return undefined;
        }
        log(id).info('taking over WhatsApp session');
        const link = newLink(id, creds);
        await connect(link);
        return link;
      })().finally(() => restoring.delete(id));
      restoring.set(id, pending);
    }
    return pending;
  }

  async function scan(): Promise<void> {
    if (stopped) return;
    try {
      const ids = await findOrphanedSessions(db, Date.now(), 20);
      for (const id of ids) {
        if (stopped) break;
        if (!links.has(id)) await restore(id);
      }
    } catch (err) {
      logger.warn({ err }, 'could not look for WhatsApp sessions to take over');
    }
  }

  function waitOpen(link: Link, ms: number): Promise<boolean> {
    if (link.phase === 'open') return Promise.resolve(true);
    if (link.phase === 'closed') return Promise.resolve(false);
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        link.openWaiters.delete(wake);
        resolve(link.phase === 'open');
      };
      const timer = setTimeout(wake, ms);
      timer.unref();
      link.openWaiters.add(wake);
    });
  }

  function heldSession(link: Link): HeldSession {
    return {
      sessionId: link.id,
      paced<T>(send: (socket: WhatsappSocket) => Promise<T>): Promise<T> {
        return sendPacer.run(link.id, async () => {
          const socket = link.socket;
          if (link.phase !== 'open' || !socket) throw new SessionNotOpenError(link.id);
          return send(socket);
        });
      },
    };
  }

  // ---- the service -------------------------------------------------------------------------------

  return {
    holderId,

    async create(owner) {
      if (stopped) throw new WhatsappUnavailableError('the service is shutting down');
      const createdAt = now();
      const creds = await newAuthCreds();
      const row: WhatsappSessionRow = {
        id: newWhatsappSessionId(createdAt),
        account_id: owner.accountId,
        env: owner.env,
        status: 'qr_pending',
        phone_number: null,
        // A deadline other processes can read if this one dies while the code is on screen.
        qr_expires_at: createdAt + tuning.qrWaitMs + tuning.qrValidityMs,
        auto_connect_at: null,
        auth_state: await sealAuthValue(secretBox, creds),
        created_at: createdAt,
        updated_at: createdAt,
        last_connected_at: null,
      };
      await insertWhatsappSession(db, row);
      // A new id: nobody else can hold it yet.
      await claimSession(db, row.id, holderId, Date.now(), tuning.leaseMs);
      const link = newLink(row.id, creds);
      const firstQr = new Promise<string>((resolve, reject) => {
        link.firstQr = { resolve, reject };
      });
      const noQr = setTimeout(() => {
        link.firstQr?.reject(new WhatsappUnavailableError(`WhatsApp sent no QR code within ${Math.round(tuning.qrWaitMs / 1000)} s`));
        link.firstQr = undefined;
      }, tuning.qrWaitMs);
      try {
        await connect(link);
        const qr = await firstQr;
        link.qrTimer = setTimeout(() => {
          if (!isPaired(link)) void voidSession(link, 'qr_expired', 'nobody scanned the QR code in time');
        }, tuning.qrValidityMs);
        link.qrTimer.unref();
        return { row, qr };
      } catch (error) {
        const socket = closeLocally(link);
        endQuietly(socket);
        await link.auth.flush();
        await deleteSessionAndAuth(db, row.id).catch((err: unknown) => log(row.id).error({ err }, 'could not remove a failed WhatsApp session'));
        throw error instanceof WhatsappUnavailableError ? error : new WhatsappUnavailableError(`could not reach WhatsApp: ${(error as Error).message}`);
      } finally {
        clearTimeout(noQr);
      }
    },

    async remove(owner, id) {
      if (!(await findWhatsappSession(db, owner, id))) return false;
      const row = await findSessionById(db, id);
      if (!row) return false;
      const link = links.get(id);
      let detachedLogout: { creds: AuthCreds } | undefined;
      if (link) {
        // Between two connections there is no socket to log out with: use a short-lived one.
        if (!link.socket && isPaired(link)) detachedLogout = { creds: link.auth.creds };
        await dropLink(link, { logout: true, release: false });
      } else if (row.auth_state !== null && (row.holder === null || Number(row.holder_expires_at) < Date.now())) {
        // Nobody holds it: unlink the device from here, after the stored credentials are gone.
        detachedLogout = { creds: await openAuthValue<AuthCreds>(secretBox, row.auth_state).catch(() => ({}) as AuthCreds) };
      }
      // Held by another live process: it sees the row gone at its next lease renewal and logs out then.
      const removed = await deleteSessionAndAuth(db, id);
      if (detachedLogout && typeof detachedLogout.creds.me?.id === 'string') void logoutDetached(id, detachedLogout.creds);
      return removed;
    },

    serveDeliveries() {
      if (serving || stopped) return;
      serving = true;
      const tick = (): void => {
        scanning = scan().finally(() => {
          scanning = undefined;
        });
      };
      scanTimer = setInterval(tick, tuning.takeoverScanMs);
      scanTimer.unref();
      tick();
    },

    async acquire(sessionId) {
      let link = links.get(sessionId);
      if (!link) {
        if (!serving) return { reason: 'not_held' };
        link = await restore(sessionId);
        if (!link) {
          const row = await findSessionById(db, sessionId);
          if (row && row.auth_state === null) return { reason: 'no_credentials' };
          const heldElsewhere = row?.holder != null && row.holder !== holderId && Number(row.holder_expires_at) > Date.now();
          return { reason: heldElsewhere ? 'held_elsewhere' : 'not_held' };
        }
      }
      if (!(await waitOpen(link, tuning.connectWaitMs))) return { reason: 'not_open' };
      return { held: heldSession(link) };
    },

    async stop(opts = {}) {
      if (stopped) return;
      stopped = true;
      clearInterval(renewTimer);
      clearInterval(scanTimer);
      await scanning;
      await Promise.allSettled([...restoring.values()]);
      const release = opts.release ?? true;
      await Promise.allSettled([...links.values()].map((link) => dropLink(link, { release })));
    },
  };

  /** Unlinks a device whose session nobody holds: connect with its creds, log out, forget. */
  async function logoutDetached(id: string, creds: AuthCreds): Promise<void> {
    const memory = new Map<string, unknown>();
    const keys = {
      async get(type: string, ids: string[]) {
        const out: Record<string, unknown> = {};
        for (const keyId of ids) if (memory.has(`${type}/${keyId}`)) out[keyId] = memory.get(`${type}/${keyId}`);
        return out;
      },
      async set(data: KeyData) {
        for (const [type, values] of Object.entries(data)) {
          for (const [keyId, value] of Object.entries(values ?? {})) {
            if (value === null || value === undefined) memory.delete(`${type}/${keyId}`);
            else memory.set(`${type}/${keyId}`, value);
          }
        }
      },
    };
    let socket: WhatsappSocket | undefined;
    try {
      socket = await socketFactory({ sessionId: id, auth: { creds, keys }, logger: log(id), qrTimeoutMs: tuning.qrValidityMs });
      const opened = new Promise<boolean>((resolve) => {
        socket!.ev.on('connection.update', (update) => {
          if (update.connection === 'open') resolve(true);
          else if (update.connection === 'close') resolve(false);
        });
      });
      if (await withTimeout(opened, tuning.logoutTimeoutMs)) await withTimeout(socket.logout(), tuning.logoutTimeoutMs);
    } catch (err) {
      log(id).warn({ err }, 'could not log out a deleted WhatsApp session');
    } finally {
      endQuietly(socket);
    }
  }
}

/** The session's socket closed between acquiring it and its turn to send. */
export class SessionNotOpenError extends Error {
  constructor(sessionId: string) {
    super(`WhatsApp session ${sessionId} is not open right now`);
    this.name = 'SessionNotOpenError';
  }
}
