import type { Kysely } from 'kysely';
import { nextOpening, windowText } from '../core/send-window.js';
import type { SendWindow } from '../core/send-window.js';
import type { MessageRow } from '../store/messages.js';
import type { Database } from '../store/schema.js';
import { findSendWindows, sendWindowKey } from '../store/send-windows.js';
import { Deferral } from './rhythm-gate.js';

/**
 * Send windows at delivery (docs/sending.md, "Send windows"): a note whose account's window on its
 * platform is closed now (in the window's zone, or in its recipient's) goes back to the queue, due at the
 * window's opening. The acceptance already made such a note due then; this weighs it again against the
 * window in force now (changed since, or a retry that fell outside it).
 */

/** The send windows of a claim's accounts, read in one statement right after the claim, by sendWindowKey (absent: no window). */
export type ClaimedWindows = ReadonlyMap<string, SendWindow>;

export function readSendWindows(db: Kysely<Database>, messages: readonly MessageRow[]): Promise<ClaimedWindows> {
  return findSendWindows(db, messages.map((m) => m.account_id));
}

/**
 * When a window that never overlaps the recipient's zone is found at delivery (the window was changed
 * after the note was accepted), the note waits this long before it is weighed again; a change of the
 * window wakes it sooner.
 */
export const NO_OVERLAP_RECHECK_MS = 24 * 60 * 60_000;

/** Throws a Deferral until the window opens when it is closed at `now` for this note; returns when the note may go. */
export function checkSendWindow(message: MessageRow, windows: ClaimedWindows, now: number): void {
  const window = windows.get(sendWindowKey(message.account_id, message.platform));
  if (!window) return;
  const recipientZone = message.recipient_time_zone ?? null;
  const opening = nextOpening(window, recipientZone, now);
  if (opening === now) return;
  const where = recipientZone ? ` (in ${window.time_zone} and in the recipient's ${recipientZone})` : '';
  if (opening === null) {
    throw new Deferral('send_window', `the send window ${windowText(window)} is never open in the recipient's time zone ${recipientZone}; the note waits for the window to change`, NO_OVERLAP_RECHECK_MS);
  }
  throw new Deferral('send_window', `outside the send window ${windowText(window)}${where}; the note waits for it to open at ${new Date(opening).toISOString()}`, opening - now);
}
