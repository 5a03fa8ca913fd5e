import { randomUUID } from 'node:crypto';
import { releaseAffinity, renewAffinities } from '../../../store/affinity.js';
import {
  claimTelegramSession,
  deleteTelegramSession,
  findOrphanedTelegramSessions,
  findTelegramSession,
  findTelegramSessionById,
  transitionTelegramSession,
  type Owner,
  type TelegramSessionRow,
} from '../../../store/telegram-sessions.js';
import { FLOOD_SLEEP_THRESHOLD, rpcErrorName, type TelegramAccountClient } from './client.js';
import { ACCOUNT_DEFAULTS, closeLink, proxyOptionFor, withTimeout, type AccountContext, type AccountLink, type LiveTelegramOptions, type TelegramAccountTuning } from './context.js';
import { createAccountLinking } from './linking.js';
import { createUpdateFeed } from './update-feed.js';

/** Telegram's answers that mean the authorization is gone (logged out from the phone, revoked). */
import { REVOKED } from './revoked.js';
import type { KeptProxy } from '../../../store/sender-proxy.js';

export interface LiveTelegramAccounts {
  readonly holderId: string;
  create(owner: Owner, request?: { proxy?: KeptProxy }): Promise<{ row: TelegramSessionRow; qr: string }>;
  /** The account's proxy was changed: if this process holds its connection, it lets it go, and it is taken over again through the new one. */
  proxyChanged(id: string): Promise<void>;
  /** Why the account's proxy did not carry its last connection here (scheme, host and port only), until one goes through. */
  proxyFailure(id: string): string | undefined;
  password(owner: Owner, id: string, password: string): Promise<TelegramSessionRow | undefined>;
  /** Logs the authorization out at Telegram (auth.logOut) when it can, then erases the session and its keys. */
  remove(owner: Owner, id: string): Promise<boolean>;
  /** This process runs a delivery worker: it takes over connected sessions nobody holds. */
  serveDeliveries(): void;
  /** The session's open connection here, taking the session over first when it is free. */
  acquire(id: string): Promise<AccountLink | undefined>;
  /** Called with every update of an open session (receipts, replies). */
  onAccountUpdate(handler: (sessionId: string, update: unknown) => void): void;
  /** The authorization is gone at Telegram: the session is disconnected and its key erased. */
  revoked(id: string, reason: string): Promise<void>;
  stop(options?: { release?: boolean }): Promise<void>;
}

/**
 * Live Telegram accounts: one MTProto connection per session, held by one process at a time under an
 * affinity lease (as WhatsApp sockets are). Linking runs in the process that answered POST; connected
 * sessions live in processes with a delivery worker, which take over any whose lease is free or ran
 * out, restoring the connection from the sealed key.
 */
export function createLiveTelegramAccounts(options: LiveTelegramOptions): LiveTelegramAccounts {
  const tuning: Required<TelegramAccountTuning> = { ...ACCOUNT_DEFAULTS };
  for (const name of Object.keys(ACCOUNT_DEFAULTS) as Array<keyof TelegramAccountTuning>) {
    const value = options[name];
    if (typeof value === 'number') tuning[name] = value;
  }
  const ctx: AccountContext = {
    tuning,
    db: options.db,
    secretBox: options.secretBox,
    clientFactory: options.clientFactory,
    credentials: options.apiId && options.apiHash ? { apiId: options.apiId, apiHash: options.apiHash } : undefined,
    logger: options.logger.child({ component: 'telegram-account' }),
    now: options.now ?? Date.now,
    holderId: options.holderId ?? `tg_${randomUUID()}`,
    links: new Map(),
    proxies: options.proxies,
    state: { serving: false, stopped: false },
  };
  const { db, links, holderId, secretBox } = ctx;
  const log = (id: string) => ctx.logger.child({ session_id: id });
  const updateHandlers: Array<(sessionId: string, update: unknown) => void> = [];
  let renewTimer: NodeJS.Timeout | undefined;
  let idleTimer: NodeJS.Timeout | undefined;
  let scanTimer: NodeJS.Timeout | undefined;
  let scanning: Promise<void> | undefined;
  const restoring = new Map<string, Promise<AccountLink | undefined>>();
  // Why an account's proxy did not carry its last connection here (ProxyFailure's words: the proxy's scheme, host and port).
  const proxyFailures = new Map<string, string>();

  function ensureRenewing(): void {
    if (renewTimer || ctx.state.stopped) return;
    renewTimer = setInterval(() => void renew(), tuning.renewMs);
    renewTimer.unref();
    idleTimer = setInterval(catchUpSilent, tuning.idleCheckMs);
    idleTimer.unref();
  }
  const heard = (sessionId: string, update: unknown): void => {
    for (const handle of updateHandlers) handle(sessionId, update);
  };

  /** Telegram can stop pushing to a connection without a word: a long silence is checked with the difference. */
  function catchUpSilent(): void {
    for (const link of links.values()) {
      if (link.phase === 'open' && link.feed && ctx.now() - link.feed.lastHeardAt >= tuning.idleDifferenceMs) void link.feed.catchUp('silence').catch(() => undefined);
    }
  }

  /** The open connection's updates go through its feed: in order, and what a drop lost fetched again. */
  function follow(link: AccountLink): void {
    const id = link.id;
    link.feed = createUpdateFeed({
      db,
      holderId,
      sessionId: id,
      client: link.client,
      logger: ctx.logger,
      now: ctx.now,
      deliver: (update) => heard(id, update),
      onRefused: (err) => {
        const name = rpcErrorName(err);
        if (name && REVOKED.has(name)) void revoked(id, name).catch(() => undefined);
      },
    });
    link.client.onReconnected(() => {
      if (link.phase === 'open') void link.feed?.catchUp('reconnected').catch(() => undefined);
    });
  }

  const linking = createAccountLinking(ctx, {
    ensureRenewing,
    received: (link, update) => link.feed?.receive(update),
    async opened(link) {
      follow(link);
      // Telegram's state now is where listening starts (updates.getState, kept with the session).
      await link.feed!.catchUp('linked').catch(() => undefined);
      // Without a worker here nothing would send through it: hand it to a process that has one (as WhatsApp does).
      if (!ctx.state.serving) {
        links.delete(link.id);
        closeLink(link);
        await releaseAffinity(db, link.id, holderId);
      }
    },
  });

  async function renew(): Promise<void> {
    const ids = [...links.keys()];
    if (ids.length === 0) return;
    let held: Set<string>;
    try {
      held = await renewAffinities(db, holderId, ids, Date.now() + tuning.leaseMs);
    } catch (err) {
      ctx.logger.warn({ err }, 'could not renew Telegram session leases');
      return;
    }
    for (const id of ids) {
      const link = links.get(id);
      if (link && held.has(id)) {
        // A proxy changed in another process (PATCH /senders/{id}) applies from here too.
        if (link.phase === 'open' && link.proxyUrl !== undefined && ctx.proxies) {
          const current = await ctx.proxies.current(id);
          if (current !== undefined && current !== link.proxyUrl) await proxyChanged(id).catch(() => undefined);
        }
        continue;
      }
      if (!link || held.has(id)) continue;
      // Deleted (DELETE answered elsewhere, which logged it out) or taken over: let the connection go.
      links.delete(id);
      closeLink(link);
      if (await findTelegramSessionById(db, id).catch(() => undefined)) log(id).warn('lost the lease of a Telegram session; another process holds it now');
    }
  }

  async function revoked(id: string, reason: string): Promise<void> {
    const link = links.get(id);
    if (link) {
      links.delete(id);
      closeLink(link);
    }
    log(id).warn({ reason }, 'the Telegram authorization is gone; the session is disconnected');
    await transitionTelegramSession(db, id, ['connected'], { status: 'disconnected', auth_key: null }, ctx.now());
    await releaseAffinity(db, id, holderId);
  }

  /** The account's proxy changed: its connection here is let go and taken over again (by the scan here or elsewhere) through the new one. */
  async function proxyChanged(id: string): Promise<void> {
    const link = links.get(id);
    if (!link || link.phase !== 'open') return;
    log(id).info("the Telegram account's proxy changed; connecting again through the new one");
    links.delete(id);
    closeLink(link);
    await releaseAffinity(db, id, holderId);
    if (ctx.state.serving) await restore(id);
  }

  function open(id: string, client: TelegramAccountClient): AccountLink {
    const link: AccountLink = { id, client, phase: 'open', renewTimer: undefined, completing: undefined };
    follow(link);
    client.onUpdate((update) => {
      if (link.phase === 'open') link.feed?.receive(update);
    });
    return link;
  }

  /** Claims a free connected session and reconnects it from its sealed key. */
  function restore(id: string): Promise<AccountLink | undefined> {
    const existing = links.get(id);
    if (existing) return Promise.resolve(existing.phase === 'open' ? existing : undefined);
    let pending = restoring.get(id);
    if (!pending) {
      pending = (async () => {
        if (ctx.state.stopped || !ctx.credentials || !(await claimTelegramSession(db, id, holderId, Date.now(), tuning.leaseMs))) return undefined;
        const row = await findTelegramSessionById(db, id);
        if (!row || row.auth_key === null || row.env !== 'live' || row.status !== 'connected') {
          await releaseAffinity(db, id, holderId);
          return undefined;
        }
        let session: string;
        try {
          session = secretBox.open(row.auth_key);
        } catch (err) {
          log(id).error({ err }, 'the stored Telegram key cannot be opened (was SECRET_KEY changed?)');
          await releaseAffinity(db, id, holderId);
          return undefined;
        }
        let proxy: Awaited<ReturnType<typeof proxyOptionFor>>;
        try {
          proxy = await proxyOptionFor(ctx, id);
          proxyFailures.delete(id);
        } catch (error) {
          // Its proxy does not answer (the sender says so): nothing connects directly; the scan tries again.
          proxyFailures.set(id, error instanceof Error ? error.message : "the account's proxy did not carry the connection");
          await releaseAffinity(db, id, holderId);
          return undefined;
        }
        log(id).info('taking over Telegram session');
        const link = open(id, ctx.clientFactory({ ...ctx.credentials, session, floodSleepThreshold: FLOOD_SLEEP_THRESHOLD, ...proxy }));
        link.proxyUrl = (await ctx.proxies?.current(id)) ?? null;
        links.set(id, link);
        ensureRenewing();
        try {
          await link.client.connect();
          // Asking for the difference since the kept state gives what arrived while no process listened, and
          // makes Telegram push this connection its updates (and proves the key).
          await link.feed!.catchUp('taken over');
          return link;
        } catch (err) {
          const name = rpcErrorName(err);
          if (name && REVOKED.has(name)) await revoked(id, name);
          else {
            log(id).warn({ error: name ?? String(err) }, 'could not reconnect a Telegram session; another try later');
            links.delete(id);
            closeLink(link);
            await releaseAffinity(db, id, holderId);
          }
          return undefined;
        }
      })().finally(() => restoring.delete(id));
      restoring.set(id, pending);
    }
    return pending;
  }

  async function scan(): Promise<void> {
    if (ctx.state.stopped) return;
    try {
      for (const id of await findOrphanedTelegramSessions(db, Date.now(), 20)) {
        if (ctx.state.stopped) break;
        if (!links.has(id)) await restore(id);
      }
    } catch (err) {
      ctx.logger.warn({ err }, 'could not look for Telegram sessions to take over');
    }
  }

  return {
    holderId,
    create: (owner, request) => linking.create(owner, request),
    proxyChanged,
    proxyFailure: (id) => proxyFailures.get(id),
    password: (owner, id, password) => linking.password(owner, id, password),
    async remove(owner, id) {
      const row = await findTelegramSession(db, owner, id);
      if (!row) return false;
      const link = links.get(id);
      if (link) {
        links.delete(id);
        if (row.status === 'connected') await linking.logOut(link).catch(() => undefined);
        closeLink(link);
      } else if (row.status === 'connected' && row.auth_key !== null && ctx.credentials) {
        // Held by another process or by none: log out over a connection of our own with the same key, through its proxy.
        const proxy = await proxyOptionFor(ctx, id).catch(() => undefined);
        if (proxy === undefined) {
          log(id).warn("the account's proxy did not answer: auth.logOut is not sent (never directly); the keys are erased anyway");
          return deleteTelegramSession(db, owner, id);
        }
        const client = ctx.clientFactory({ ...ctx.credentials, session: secretBox.open(row.auth_key), floodSleepThreshold: FLOOD_SLEEP_THRESHOLD, ...proxy });
        const other = { id, client, phase: 'open' as const, renewTimer: undefined, completing: undefined };
        await withTimeout(client.connect().then(() => linking.logOut(other)), tuning.logoutTimeoutMs).catch((err: unknown) =>
          log(id).warn({ error: rpcErrorName(err) ?? String(err) }, 'auth.logOut failed; the keys are erased anyway'),
        );
        closeLink(other);
      }
      return deleteTelegramSession(db, owner, id);
    },
    serveDeliveries() {
      if (ctx.state.serving || ctx.state.stopped) return;
      ctx.state.serving = true;
      const tick = (): void => {
        scanning ??= scan().finally(() => (scanning = undefined));
      };
      scanTimer = setInterval(tick, tuning.takeoverScanMs);
      scanTimer.unref();
      tick();
    },
    acquire: restore,
    onAccountUpdate(handler) {
      updateHandlers.push(handler);
    },
    revoked,
    async stop(opts = {}) {
      if (ctx.state.stopped) return;
      ctx.state.stopped = true;
      clearInterval(renewTimer);
      clearInterval(idleTimer);
      clearInterval(scanTimer);
      await scanning;
      await Promise.allSettled([...restoring.values()]);
      const release = opts.release ?? true;
      for (const link of links.values()) {
        closeLink(link);
        if (release) await releaseAffinity(db, link.id, holderId).catch(() => undefined);
      }
      links.clear();
    },
  };
}
