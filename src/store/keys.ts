import { hash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { newKeyId, newKeySecret, type KeyEnv } from '../core/ids.js';
import { scopeOf, sendersOf, type KeyScope } from '../core/key-scopes.js';
import { announceAuthChange, markAuthChanged } from './auth-changes.js';
import { checkKeyRoom, withinLimit } from './limits.js';
import type { AccountsTable, ApiKeysTable, Database } from './schema.js';

export type KeyRow = ApiKeysTable;

/** Keys are stored as SHA-256 of the secret: the secret itself is shown once and never kept. */
// The one-shot hash: every API request hashes its key, and it costs less than a Hash object.
export const hashKeySecret = (secret: string): string => hash('sha256', secret, 'hex');

// "sk_test_" plus four characters: enough to tell keys apart in a list, useless to an attacker.
const displayPrefix = (secret: string): string => secret.slice(0, secret.indexOf('_', 3) + 5);

export interface IssuedKey {
  row: KeyRow;
  secret: string;
}

/** What a new key may do: its scope (default full) and the senders it may send from (default any). */
export interface KeyGrant {
  scope?: KeyScope;
  senders?: readonly string[] | null;
}

export async function issueKey(
  db: Kysely<Database>,
  accountId: string,
  env: KeyEnv,
  options: { replaces?: string; now?: number } & KeyGrant = {},
): Promise<IssuedKey> {
  const secret = newKeySecret(env);
  const row: KeyRow = {
    id: newKeyId(),
    account_id: accountId,
    env,
    prefix: displayPrefix(secret),
    secret_hash: hashKeySecret(secret),
    replaces: options.replaces ?? null,
    created_at: options.now ?? Date.now(),
    expires_at: null,
    revoked_at: null,
    last_used_at: null,
    scope: options.scope ?? 'full',
    senders: options.senders && options.senders.length > 0 ? JSON.stringify([...new Set(options.senders)]) : null,
  };
  await db.insertInto('api_keys').values(row).execute();
  return { row, secret };
}

/**
 * A new key for the CLI and the dashboard, within the cap on active keys (core/plans.ts): throws
 * LimitReachedError when the account and environment already have as many as allowed.
 */
export async function createKey(db: Kysely<Database>, accountId: string, env: KeyEnv, now = Date.now(), grant: KeyGrant = {}): Promise<IssuedKey> {
  return withinLimit(
    db,
    accountId,
    (trx) => checkKeyRoom(trx, accountId, env, now),
    (trx) => issueKey(trx, accountId, env, { now, ...grant }),
  );
}

export async function findKey(db: Kysely<Database>, id: string): Promise<KeyRow | undefined> {
  return db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function listKeys(db: Kysely<Database>, accountId: string): Promise<KeyRow[]> {
  return db.selectFrom('api_keys').selectAll().where('account_id', '=', accountId).orderBy('created_at').orderBy('id').execute();
}

/**
 * Issues a successor and lets the old key live until `now + graceMs`, so callers switch without downtime.
 * The old key counts against the cap on active keys until it expires: at the cap, a roll throws
 * LimitReachedError (revoke a key first).
 */
export async function rollKey(db: Kysely<Database>, old: KeyRow, graceMs: number, now = Date.now()): Promise<IssuedKey & { oldExpiresAt: number }> {
  const rolled = await db.transaction().execute(async (trx) => {
    await checkKeyRoom(trx, old.account_id, old.env, now);
    // The successor may do what the old key did, no more and no less.
    const issued = await issueKey(trx, old.account_id, old.env as KeyEnv, { replaces: old.id, now, scope: scopeOf(old.scope), senders: sendersOf(old.senders) });
    const expiresAt = now + graceMs;
    // An old key that already expires sooner keeps its earlier expiry.
    const oldExpiresAt = old.expires_at !== null && old.expires_at < expiresAt ? old.expires_at : expiresAt;
    await trx.updateTable('api_keys').set({ expires_at: oldExpiresAt }).where('id', '=', old.id).execute();
    // In the same transaction: other processes learn of the new expiry with the roll itself.
    await markAuthChanged(trx);
    return { ...issued, oldExpiresAt };
  });
  announceAuthChange({ keyId: old.id });
  return rolled;
}

export async function revokeKey(db: Kysely<Database>, id: string, now = Date.now()): Promise<boolean> {
  const result = await db.transaction().execute(async (trx) => {
    const revoked = await trx.updateTable('api_keys').set({ revoked_at: now }).where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst();
    await markAuthChanged(trx);
    return revoked;
  });
  announceAuthChange({ keyId: id });
  return Number(result.numUpdatedRows) > 0;
}

export interface AuthenticatedKey {
  key: KeyRow;
  account: AccountsTable;
}

/** The key and its account when the secret is known, not revoked and not expired. */
export async function authenticateSecret(db: Kysely<Database>, secret: string, now = Date.now()): Promise<AuthenticatedKey | undefined> {
  return authenticateHash(db, hashKeySecret(secret), now);
}

/** As authenticateSecret, from the secret's hash (`hashKeySecret`). */
export async function authenticateHash(db: Kysely<Database>, secretHash: string, now = Date.now()): Promise<AuthenticatedKey | undefined> {
  const key = await db.selectFrom('api_keys').selectAll().where('secret_hash', '=', secretHash).executeTakeFirst();
  if (!key || key.revoked_at !== null || (key.expires_at !== null && key.expires_at <= now)) return undefined;
  const account = await db.selectFrom('accounts').selectAll().where('id', '=', key.account_id).executeTakeFirst();
  if (!account) return undefined;
  return { key, account };
}

export async function touchKey(db: Kysely<Database>, id: string, now = Date.now()): Promise<void> {
  await db.updateTable('api_keys').set({ last_used_at: now }).where('id', '=', id).execute();
}
