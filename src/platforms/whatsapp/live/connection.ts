import { createStoredAuthState } from '../auth-state.js';
import { recordWhatsappStatusUpdates } from '../receipts.js';
import type { NewChatCap } from '../../../store/new-chat-cap.js';
import { endLiveSession, releaseLease } from '../../../store/whatsapp-live.js';
import { transitionWhatsappSession } from '../../../store/whatsapp-sessions.js';
import { applyReachoutLock, readReachoutLock } from '../reachout-lock.js';
import { DISCONNECT, disconnectCode, phoneOfJid, type AuthCreds, type ConnectionUpdate, type WhatsappSocket } from '../socket.js';
import { heardFromUpsert, type LidResolver } from '../incoming.js';
import { applyNewChatCap, newChatCapOf, readNewChatCap } from '../new-chat-cap.js';
import { followErrorAcks } from '../refusals.js';
import { resendAnswers } from './resend.js';
import { endQuietly, FINAL_CLOSES, type LiveContext, type Link, type Phase, WhatsappUnavailableError, withTimeout } from './context.js';

/** What the socket lifecycle needs from the ownership lease. */
export interface LeaseHooks {
  onLeaseLost(sessionId: string): void;
  ensureRenewing(): void;
}

export type Connections = ReturnType<typeof createConnections>;

/**
 * The socket lifecycle of the sessions this process holds: open a socket with the stored auth state,
 * follow its connection updates (pairing restart, open, reconnects with backoff, final closes), and
 * let it go (optionally logging the device out).
 */
export function createConnections(ctx: LiveContext, hooks: LeaseHooks) {
  const { db, secretBox, socketFactory, tuning, links, holderId, now, state } = ctx;
  const log = (id: string) => ctx.log(id);

  function newLink(id: string, creds: AuthCreds): Link {
    const link: Link = {
      id,
      auth: createStoredAuthState({ db, box: secretBox, logger: log(id), sessionId: id, holder: holderId, creds, onLeaseLost: () => hooks.onLeaseLost(id) }),
      socket: undefined,
      phase: 'connecting',
      attempts: 0,
      reconnectTimer: undefined,
      qrTimer: undefined,
      firstQr: undefined,
      openWaiters: new Set(),
      awaitingCode: false,
      newChatCap: undefined,
      proxyUrl: null,
      proxyFailures: 0,
      proxyFailure: undefined,
    };
    links.set(id, link);
    hooks.ensureRenewing();
    return link;
  }

  // A pairing code sets `me` before the phone has linked the device: not paired until WhatsApp restarts the connection.
  const isPaired = (link: Link): boolean => typeof link.auth.creds.me?.id === 'string' && !link.awaitingCode;

  async function connect(link: Link): Promise<void> {
    if (link.phase === 'closed') return;
    link.phase = 'connecting';
    // Its proxy first (docs/proxies.md): checked before each connection; one that fails is never a reason to go direct.
    let proxyUrl: string | null = null;
    if (ctx.proxies) {
      try {
        proxyUrl = (await ctx.proxies.next(link.id)).url;
      } catch (err) {
        // The proxy it waits for: only another one (changed meanwhile) is a reason to try before its time.
        link.proxyUrl = (await ctx.proxies.current(link.id)) ?? link.proxyUrl;
        if ((link.phase as Phase) !== 'closed') onProxyFailed(link, err);
        return;
      }
      if ((link.phase as Phase) === 'closed') return;
    }
    link.proxyUrl = proxyUrl;
    link.proxyFailures = 0;
    link.proxyFailure = undefined;
    let socket: WhatsappSocket;
    try {
      socket = await socketFactory({
        sessionId: link.id,
        auth: { creds: link.auth.creds, keys: link.auth.keys },
        logger: log(link.id),
        // Baileys' own QR rotation must not outlive ours: only the first code is ever shown.
        qrTimeoutMs: tuning.qrValidityMs + 15_000,
        getMessage: resendAnswers(ctx, link),
        proxyUrl,
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
    // Listen receipts: the recipient's device reports delivery, read and played for what we sent; and
    // WhatsApp's refusals of what it had taken (refusals.ts).
    socket.ev.on('messages.update', (updates) => {
      void recordWhatsappStatusUpdates(db, updates, now()).catch((err: unknown) => log(link.id).warn({ err }, 'could not record WhatsApp receipts'));
      void followErrorAcks({ db, logger: log(link.id), now }, { id: link.id, socket }, updates).catch((err: unknown) =>
        log(link.id).warn({ err }, 'could not record a refusal of WhatsApp'),
      );
    });
    // WhatsApp's new-chat message cap tightened or eased (new-chat-cap.ts).
    socket.ev.on('message-capping.update', (info) => {
      if (link.socket === socket) void followNewChatCap(link, newChatCapOf(info));
    });
    listenForReplies(link, socket);
  }

  /** The session's sends and sender follow the new-chat message cap (new-chat-cap.ts). */
  async function followNewChatCap(link: Link, cap: NewChatCap | undefined): Promise<void> {
    if (!cap) return;
    link.newChatCap = cap.status;
    await applyNewChatCap(db, link.id, cap).catch((err: unknown) => log(link.id).warn({ err }, 'could not record the new-chat message cap'));
  }

  /** Replies: new messages to this session, from the people its notes went to (incoming.ts; the recorder decides who counts). */
  function listenForReplies(link: Link, socket: WhatsappSocket): void {
    const onHeard = ctx.onHeard;
    if (!onHeard) return;
    const lids: LidResolver = { learned: new Map(), lookup: (lid) => socket.signalRepository?.lidMapping?.getPNForLID(lid) ?? Promise.resolve(null) };
    socket.ev.on('lid-mapping.update', (mapping) => {
      const phone = phoneOfJid(mapping.pn);
      if (phone) lids.learned.set(mapping.lid.split('@')[0]!.split(':')[0]!, phone);
    });
    socket.ev.on('messages.upsert', (upsert) => {
      void heardFromUpsert(upsert, link.id, lids, Date.now())
        .then(async (heard) => {
          for (const reply of heard) await onHeard(reply);
        })
        .catch((err: unknown) => log(link.id).warn({ err }, 'could not read incoming WhatsApp messages'));
    });
  }

  async function onUpdate(link: Link, socket: WhatsappSocket, update: ConnectionUpdate): Promise<void> {
    if (update.qr && link.firstQr) {
      const waiter = link.firstQr;
      link.firstQr = undefined;
      waiter.resolve(update.qr);
    }
    // WhatsApp's reachout lock started or ended (Baileys announces both): the session's sender follows.
    if (update.reachoutTimeLock) await applyReachoutLock(db, link.id, update.reachoutTimeLock);
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
    // Whether the number is locked out of new chats right now (a lock set while no socket was open).
    void readReachoutLock(socket).then(
      (lock) => (lock ? applyReachoutLock(db, link.id, lock) : undefined),
      () => undefined,
    ).catch((err: unknown) => log(link.id).warn({ err }, 'could not record the reachout lock'));
    // And where it stands against the new-chat message cap.
    void readNewChatCap(socket).then((cap) => followNewChatCap(link, cap));
    for (const wake of link.openWaiters) wake();
    link.openWaiters.clear();
    // Without a worker here nothing would send through it: hand it to a process that has one.
    if (!state.serving) await dropLink(link, { release: true });
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
      link.awaitingCode = false;
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
      // Logged out, refused, a session no longer valid: the sender's credential is dead.
      void voidSession(link, 'disconnected', final, 'expired');
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
      void voidSession(link, 'disconnected', `WhatsApp could not be reached after ${tuning.reconnectAttempts} attempts`, 'disconnected');
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

  /**
   * The session's proxy did not carry its connection (the sender is already marked `proxy_unreachable`):
   * a linked session waits and tries again, longer each time, for as long as it takes; it is never voided
   * for its proxy's sake. A session still linking cannot wait (nobody would see a new code).
   */
  function onProxyFailed(link: Link, err: unknown): void {
    const why = err instanceof Error ? err.message : 'its proxy did not carry the connection';
    if (link.firstQr) {
      const waiter = link.firstQr;
      link.firstQr = undefined;
      link.phase = 'waiting';
      waiter.reject(new WhatsappUnavailableError(why));
      return;
    }
    if (!isPaired(link)) {
      onClosed(link, undefined);
      return;
    }
    link.phase = 'waiting';
    link.proxyFailures += 1;
    link.proxyFailure = why;
    const delay = Math.min(tuning.reconnectFirstDelayMs * 2 ** Math.min(link.proxyFailures - 1, 20), tuning.reconnectMaxDelayMs);
    log(link.id).info({ attempt: link.proxyFailures, delay_ms: delay }, 'WhatsApp session waits for its proxy');
    clearTimeout(link.reconnectTimer);
    link.reconnectTimer = setTimeout(() => {
      link.reconnectTimer = undefined;
      void connect(link);
    }, delay);
    link.reconnectTimer.unref();
  }

  /**
   * The session's proxy was changed (PATCH /senders/{id}, here or in another process): a linked session
   * connects again now, through the new one. Nothing happens while it is being linked (the change applies
   * from its next connection).
   */
  async function followProxyChange(link: Link): Promise<void> {
    // A connection being made (its proxy checked, its socket not made yet) reads the proxy itself.
    if (!ctx.proxies || link.phase === 'closed' || (link.phase === 'connecting' && !link.socket) || !isPaired(link)) return;
    const current = await ctx.proxies.current(link.id);
    if (current === undefined || current === link.proxyUrl || (link.phase as Phase) === 'closed') return;
    log(link.id).info('the WhatsApp session\'s proxy changed; connecting again through the new one');
    const socket = link.socket;
    link.socket = undefined;
    clearTimeout(link.reconnectTimer);
    link.reconnectTimer = undefined;
    endQuietly(socket);
    await connect(link);
  }

  /** Ends the session for good: a final status, the creds voided, the socket closed, the lease let go. */
  async function voidSession(link: Link, status: 'disconnected' | 'qr_expired', why: string, sender?: 'expired' | 'disconnected'): Promise<void> {
    log(link.id).info({ status }, `WhatsApp session ends: ${why}`);
    const from = status === 'qr_expired' ? (['qr_pending'] as const) : (['qr_pending', 'connected'] as const);
    endQuietly(closeLocally(link));
    await link.auth.flush();
    try {
      await endLiveSession(db, link.id, [...from], status, now(), sender ? { status: sender, reason: why } : undefined);
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

  return { newLink, isPaired, connect, voidSession, closeLocally, dropLink, waitOpen, followProxyChange };
}
