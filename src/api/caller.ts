import type { KeyEnv } from '../core/ids.js';
import { scopeOf, sendersOf, type KeyScope } from '../core/key-scopes.js';
import { billingPeriod, isPlanName, limitsFor, type PlanLimits, type PlanName } from '../core/plans.js';
import type { AccountRow } from '../store/accounts.js';
import { onAuthChange, readAuthChangeToken, type AuthChange } from '../store/auth-changes.js';
import { authenticateHash, hashKeySecret, type KeyRow } from '../store/keys.js';
import { readSent, type UsageScope } from '../store/usage.js';
import type { Db } from '../store/db.js';

/** Who is calling, resolved from the API key: the owner of every resource the request touches. */
export interface Caller {
  keyId: string;
  accountId: string;
  env: KeyEnv;
  plan: PlanName;
  limits: PlanLimits;
  accountCreatedAt: number;
  /** What the key may do (core/key-scopes.ts). */
  scope: KeyScope;
  /** The senders the key may send from; null: any of its account's. */
  senders: readonly string[] | null;
}

export function callerOf(key: KeyRow, account: AccountRow): Caller {
  const plan = isPlanName(account.plan) ? account.plan : 'starter';
  return {
    keyId: key.id,
    accountId: account.id,
    env: key.env === 'live' ? 'live' : 'test',
    plan,
    limits: limitsFor(plan, { rateLimit: account.rate_limit, quota: account.quota }),
    accountCreatedAt: Number(account.created_at),
    scope: scopeOf(key.scope),
    senders: sendersOf(key.senders),
  };
}

export type CallerUsageScope = Readonly<UsageScope & { periodEnd: number }>;

/** Each cached caller's current period: every send and read asks for it, and it changes once a month. */
const currentScopes = new WeakMap<Caller, CallerUsageScope>();

/** The usage row a caller's request counts against now (shared: not to be changed). */
export function usageScope(caller: Caller, now = Date.now()): CallerUsageScope {
  const known = currentScopes.get(caller);
  if (known && known.periodStart <= now && now < known.periodEnd) return known;
  const period = billingPeriod(new Date(caller.accountCreatedAt), new Date(now));
  const scope = { accountId: caller.accountId, env: caller.env, periodStart: period.start.getTime(), periodEnd: period.end.getTime() };
  currentScopes.set(caller, scope);
  return scope;
}

export interface UsageSnapshot {
  limit: number;
  remaining: number;
}

/**
 * How long this process trusts what it read about a key, an account and its usage count. A key
 * revoked or rolled, or a plan set, takes effect at once in the process that made the change, and in
 * every other process (the CLI, another node) within AUTH_WATCH_MS and one read of storage
 * (store/auth-changes.ts); this is the backstop should that read fail. Quotas are not affected: every
 * send counts itself against the stored usage row.
 */
export const CALLER_CACHE_MS = 5_000;
/**
 * How often each process reads the change token of keys and plans (one primary-key read: tens of µs
 * of CPU on SQLite, one round trip on PostgreSQL), off the request path: a request never waits for it.
 */
export const AUTH_WATCH_MS = 100;
const MAX_ENTRIES = 10_000;

interface CachedCaller {
  caller: Caller;
  /** The key's own expiry (rolled keys): checked on every request, not cached. */
  keyExpiresAt: number | null;
  readAt: number;
}

interface CachedCount {
  sent: number;
  readAt: number;
}

const snapshot = (caller: Caller, sent: number): UsageSnapshot => ({ limit: caller.limits.monthlyQuota, remaining: Math.max(0, caller.limits.monthlyQuota - sent) });

const usageKey = (scope: UsageScope): string => `${scope.accountId}\n${scope.env}\n${scope.periodStart}`;

/** Drops the oldest entries (insertion order) once a map holds more than MAX_ENTRIES. */
function bound<V>(map: Map<string, V>): void {
  for (const key of map.keys()) {
    if (map.size <= MAX_ENTRIES) return;
    map.delete(key);
  }
}

/**
 * Callers by key, and each account's count of sends in its billing period, kept in memory for
 * CALLER_CACHE_MS so that a request does not read the key, the account and the usage row first.
 * The send path reports each count it commits, so this process's own sends show in the usage
 * headers at once; another process's within CALLER_CACHE_MS.
 */
export class CallerDirectory {
  readonly #db: Db;
  readonly #ttlMs: number;
  readonly #callers = new Map<string, CachedCaller>();
  readonly #counts = new Map<string, CachedCount>();
  readonly #stopListening: () => void;
  /** Bumped by every change: a lookup that started before one does not fill the cache. */
  #generation = 0;
  readonly #watch: NodeJS.Timeout | undefined;
  /** The last change token read from storage; undefined until the first read. */
  #token: string | undefined;
  #watching = false;

  constructor(db: Db, options: { ttlMs?: number; watchMs?: number } = {}) {
    this.#db = db;
    this.#ttlMs = options.ttlMs ?? CALLER_CACHE_MS;
    this.#stopListening = onAuthChange((change) => this.#forget(change));
    const watchMs = options.watchMs ?? AUTH_WATCH_MS;
    if (watchMs > 0) {
      this.#watch = setInterval(() => void this.#checkToken(), watchMs);
      this.#watch.unref();
      void this.#checkToken();
    }
  }

  /** Another process changed a key or a plan (a new token): nothing cached is trusted any more. */
  async #checkToken(): Promise<void> {
    if (this.#watching) return;
    this.#watching = true;
    try {
      const token = await readAuthChangeToken(this.#db.kysely);
      if (token !== this.#token) {
        // The first read too: what was cached before it is of unknown age relative to the token.
        this.#token = token;
        this.#forgetAll();
      }
    } catch {
      // Storage is away: nothing can change meanwhile; the entries' own age still bounds them.
    } finally {
      this.#watching = false;
    }
  }

  #forgetAll(): void {
    this.#generation++;
    this.#callers.clear();
  }

  /**
   * The caller a secret authenticates as; undefined when unknown, revoked or expired. At once when this
   * process read the key less than CALLER_CACHE_MS ago (most requests: no promise to wait on), else once read.
   */
  resolve(secret: string, now = Date.now()): Caller | undefined | Promise<Caller | undefined> {
    const hash = hashKeySecret(secret);
    const hit = this.#callers.get(hash);
    if (hit && now - hit.readAt < this.#ttlMs && now >= hit.readAt) {
      return hit.keyExpiresAt !== null && hit.keyExpiresAt <= now ? undefined : hit.caller;
    }
    return this.#read(hash, now);
  }

  async #read(hash: string, now: number): Promise<Caller | undefined> {
    const generation = this.#generation;
    const found = await authenticateHash(this.#db.kysely, hash, now);
    if (!found) {
      this.#callers.delete(hash);
      return undefined;
    }
    const caller = callerOf(found.key, found.account);
    if (generation === this.#generation) {
      this.#callers.delete(hash); // re-inserted last: the map's order is the age order `bound` relies on
      this.#callers.set(hash, { caller, keyExpiresAt: found.key.expires_at === null ? null : Number(found.key.expires_at), readAt: now });
      bound(this.#callers);
    }
    return caller;
  }

  /** What the usage headers show: the period's count as this process last committed or read it (at once when known). */
  usage(caller: Caller, now = Date.now()): UsageSnapshot | Promise<UsageSnapshot> {
    const scope = usageScope(caller, now);
    const hit = this.#counts.get(usageKey(scope));
    if (hit && now - hit.readAt < this.#ttlMs && now >= hit.readAt) return snapshot(caller, hit.sent);
    return readSent(this.#db.kysely, scope).then((sent) => {
      this.noteSent(scope, sent, now);
      return snapshot(caller, sent);
    });
  }

  /**
   * A count read from or committed to the usage row. Counts only grow within a period, so a smaller
   * one (a read or commit that finished after a newer one) does not replace a larger one.
   */
  noteSent(scope: UsageScope, sent: number, now = Date.now()): void {
    const key = usageKey(scope);
    const hit = this.#counts.get(key);
    const value = hit ? Math.max(hit.sent, sent) : sent;
    this.#counts.delete(key);
    this.#counts.set(key, { sent: value, readAt: now });
    bound(this.#counts);
  }

  /**
   * The count after a canceled note was given back (the one case where a count goes down): replaces
   * what this process knew, so X-Usage-Remaining shows the returned note at once.
   */
  noteReturned(scope: UsageScope, sent: number, now = Date.now()): void {
    const key = usageKey(scope);
    this.#counts.delete(key);
    this.#counts.set(key, { sent, readAt: now });
    bound(this.#counts);
  }

  close(): void {
    clearInterval(this.#watch);
    this.#stopListening();
    this.#callers.clear();
    this.#counts.clear();
  }

  #forget(change: AuthChange): void {
    this.#generation++;
    for (const [hash, entry] of this.#callers) {
      if ('keyId' in change ? entry.caller.keyId === change.keyId : entry.caller.accountId === change.accountId) this.#callers.delete(hash);
    }
  }
}
