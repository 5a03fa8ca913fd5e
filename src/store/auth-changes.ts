import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * Notices that what a key authenticates as has changed: a key revoked or rolled, an account's plan or
 * limits set. Caches of callers (src/api/caller.ts) drop the affected entries at once in the process
 * that made the change (announceAuthChange, after the change is committed). Every other process (the
 * CLI changes keys from a process of its own; API processes run side by side) learns of it through
 * storage: the change also writes a new random token under AUTH_CHANGE_SETTING (markAuthChanged), and
 * each process reads that one row every AUTH_WATCH_MS (readAuthChangeToken): a token it has not seen
 * drops its whole cache.
 */
export type AuthChange = { keyId: string } | { accountId: string };

type Listener = (change: AuthChange) => void;

const listeners = new Set<Listener>();

/** Returns the function that stops listening. */
export function onAuthChange(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function announceAuthChange(change: AuthChange): void {
  for (const listener of listeners) listener(change);
}

/** The instance_settings row whose value changes with every change of a key or a plan. */
export const AUTH_CHANGE_SETTING = 'auth_changed';

/** Tells every process that some key or plan changed (they drop their cached callers). */
export async function markAuthChanged(db: Kysely<Database>): Promise<void> {
  await db
    .insertInto('instance_settings')
    .values({ name: AUTH_CHANGE_SETTING, value: randomUUID() })
    .onConflict((oc) => oc.column('name').doUpdateSet((eb) => ({ value: eb.ref('excluded.value') })))
    .execute();
}

/** The current token ('' before any change): one primary-key read. */
export async function readAuthChangeToken(db: Kysely<Database>): Promise<string> {
  const row = await db.selectFrom('instance_settings').select('value').where('name', '=', AUTH_CHANGE_SETTING).executeTakeFirst();
  return row?.value ?? '';
}
