/**
 * In-process notices that what a key authenticates as has changed: a key revoked or rolled, an
 * account's plan or limits set. Caches of callers (src/api/caller.ts) drop the affected entries at
 * once in the process that made the change; other processes see it when their entries expire.
 * Announced after the change is committed.
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
