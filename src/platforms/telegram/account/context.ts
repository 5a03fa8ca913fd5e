import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { SecretBox } from '../../../core/secret-box.js';
import type { Database } from '../../../store/schema.js';
import type { ConnectionProxies } from '../../proxy/connection-proxy.js';
import { gramjsProxyOf, type GramjsSocksProxy, type TelegramAccountClient, type TelegramClientFactory } from './client.js';
import type { UpdateFeed } from './update-feed.js';

/** What the parts of live Telegram accounts (linking, leases, sending) share. */

/** Live linking cannot reach Telegram right now (no API id configured, no connection, no token in time). */
export class TelegramUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TelegramUnavailableError';
  }
}

/** The operator has not configured live Telegram accounts (TELEGRAM_API_ID, TELEGRAM_API_HASH): no retry helps. */
export class TelegramNotConfiguredError extends TelegramUnavailableError {
  constructor() {
    super('live Telegram accounts need the operator to set TELEGRAM_API_ID and TELEGRAM_API_HASH (an application registered at my.telegram.org); until then only sandbox keys can link Telegram accounts');
    this.name = 'TelegramNotConfiguredError';
  }
}

/** A move the session's status does not allow (e.g. a password for a session that asked for none). */
export class TelegramSessionStateError extends Error {
  constructor(
    message: string,
    readonly status: string,
  ) {
    super(message);
    this.name = 'TelegramSessionStateError';
  }
}

/**
 * Wrong cloud passwords one linking takes: the last ends it (`qr_expired`), so a key cannot go on
 * guessing an account's two-step password through the service.
 */
export const MAX_PASSWORD_TRIES = 10;

/** The cloud password was not the account's; `triesLeft` 0: that was the last try, the linking has ended. */
export class WrongPasswordError extends Error {
  constructor(readonly triesLeft: number) {
    super(
      triesLeft > 0
        ? `the password is not the cloud password (two-step verification) of this Telegram account; ${triesLeft} ${triesLeft === 1 ? 'try' : 'tries'} left`
        : `the password is not the cloud password (two-step verification) of this Telegram account, and that was the ${MAX_PASSWORD_TRIES}th wrong one: the linking has ended (qr_expired); start a new session`,
    );
    this.name = 'WrongPasswordError';
  }
}

/** The password tries of the sessions being linked in this process (each asks for its password here). */
export class PasswordTries {
  readonly #taken = new Map<string, number>();

  /** Takes a try before the check (parallel tries count too); false when none is left. */
  take(sessionId: string): boolean {
    const taken = this.#taken.get(sessionId) ?? 0;
    if (taken >= MAX_PASSWORD_TRIES) return false;
    this.#taken.set(sessionId, taken + 1);
    return true;
  }

  /** Tries left after those taken. */
  left(sessionId: string): number {
    return MAX_PASSWORD_TRIES - (this.#taken.get(sessionId) ?? 0);
  }

  /** The session's linking ended (linked, expired, deleted): its count goes. */
  forget(sessionId: string): void {
    this.#taken.delete(sessionId);
  }
}

export interface TelegramAccountTuning {
  /** How long POST /telegram/sessions waits for the connection and first login token. */
  qrWaitMs?: number;
  /** How long a QR code keeps being renewed before the session is qr_expired (and a password awaited). */
  linkWindowMs?: number;
  /** Least time between two renewals of the login token (Telegram's tokens last about 30 s). */
  minRenewMs?: number;
  leaseMs?: number;
  renewMs?: number;
  takeoverScanMs?: number;
  /** How long auth.logOut may take on DELETE before the keys are erased anyway. */
  logoutTimeoutMs?: number;
  /** Telegram may stop pushing without a word: after this long without an update, the difference is asked (core.telegram.org/api/updates). */
  idleDifferenceMs?: number;
  /** How often the accounts' silence is looked at. */
  idleCheckMs?: number;
}

export const ACCOUNT_DEFAULTS: Required<TelegramAccountTuning> = {
  qrWaitMs: 20_000,
  linkWindowMs: 180_000,
  minRenewMs: 5_000,
  leaseMs: 30_000,
  renewMs: 10_000,
  takeoverScanMs: 5_000,
  logoutTimeoutMs: 10_000,
  idleDifferenceMs: 15 * 60_000,
  idleCheckMs: 30_000,
};

export interface LiveTelegramOptions extends TelegramAccountTuning {
  db: Kysely<Database>;
  secretBox: SecretBox;
  logger: Logger;
  clientFactory: TelegramClientFactory;
  /** The application's api_id / api_hash from my.telegram.org; without them live linking is unavailable. */
  apiId?: number;
  apiHash?: string;
  /** Clock for the timestamps users see and for the accounts' silence; leases always use real time. */
  now?: () => number;
  /**
   * The id this process holds affinity leases under: the delivery worker claims the messages of the
   * sessions held under it, so it is the process's one holder id (shared with WhatsApp sessions).
   */
  holderId?: string;
  /** The proxy of each account's next connection, checked (docs/proxies.md); none: every account connects directly. */
  proxies?: ConnectionProxies;
}

export type Phase = 'linking' | 'password' | 'open' | 'closed';

/** A session's connection held by this process. */
export interface AccountLink {
  id: string;
  client: TelegramAccountClient;
  phase: Phase;
  renewTimer: NodeJS.Timeout | undefined;
  /** A scan being completed (UpdateLoginToken), so a second update does not run it twice. */
  completing: Promise<void> | undefined;
  /** The account's updates in order, once it is linked (update-feed.ts). */
  feed?: UpdateFeed;
  /** The proxy URL its connection went through (null: direct), to see a change (never logged). */
  proxyUrl?: string | null;
}

export interface AccountContext {
  readonly tuning: Required<TelegramAccountTuning>;
  readonly db: Kysely<Database>;
  readonly secretBox: SecretBox;
  readonly clientFactory: TelegramClientFactory;
  readonly credentials: { apiId: number; apiHash: string } | undefined;
  readonly logger: Logger;
  readonly now: () => number;
  readonly holderId: string;
  readonly links: Map<string, AccountLink>;
  readonly proxies: ConnectionProxies | undefined;
  readonly state: { serving: boolean; stopped: boolean };
}

export const withTimeout = <T>(work: Promise<T>, ms: number): Promise<T | undefined> =>
  Promise.race([work, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms).unref())]);

/** Closes a connection without waiting on it. */
export function closeLink(link: AccountLink): void {
  link.phase = 'closed';
  clearTimeout(link.renewTimer);
  link.client.disconnect().catch(() => undefined);
}

/**
 * The proxy of a session's next connection in GramJS's shape, checked first (connection-proxy.ts): throws
 * a ProxyFailure (the sender marked `proxy_unreachable`) rather than connect directly. `{}`: direct.
 */
export async function proxyOptionFor(ctx: AccountContext, sessionId: string): Promise<{ proxy?: GramjsSocksProxy }> {
  if (!ctx.proxies) return {};
  const proxy = gramjsProxyOf((await ctx.proxies.next(sessionId)).url);
  return proxy ? { proxy } : {};
}

/** The login URL a QR code shows: Telegram's token in base64url, as the official apps encode it. */
export const loginUrl = (token: Uint8Array): string => `tg://login?token=${Buffer.from(token).toString('base64url')}`;
