import { SenderRestricted } from '../platform.js';
import { readReachoutLock, REACHOUT_LOCK_REASON, UNKNOWN_LOCK_END_MS } from './reachout-lock.js';
import type { WhatsappSocket } from './socket.js';

// A send answered with WhatsApp's 463 (reachout-lock.ts): kept apart from the lock's listener, which the
// live connection imports, so that the platform's definitions stay below the live sessions.

/** A send answered 463: the lock, read from WhatsApp, as the error the note's outcome carries. */
export async function reachoutRefusal(socket: WhatsappSocket, error: Error): Promise<SenderRestricted> {
  const lock = await readReachoutLock(socket);
  const until = lock?.isActive && lock.timeEnforcementEnds ? lock.timeEnforcementEnds.getTime() : null;
  const waitMs = until !== null ? Math.max(0, until - Date.now()) : UNKNOWN_LOCK_END_MS;
  return new SenderRestricted(`${REACHOUT_LOCK_REASON}: ${error.message}`, until, waitMs);
}

/** Baileys' errors carry the server's code as a Boom's `output.statusCode` (or `data`). */
export function isReachoutRefusal(error: unknown): boolean {
  const boom = error as { output?: { statusCode?: unknown }; data?: unknown } | undefined;
  return boom?.output?.statusCode === 463 || boom?.data === 463 || boom?.data === '463';
}
