import { isTimeZone, nextOpening, windowText } from '../core/send-window.js';
import type { Services } from '../services.js';
import { findSendWindowCached } from '../store/send-windows.js';
import { invalidParameter } from './errors.js';

/** A send's `recipient_time_zone`: null when not given (or null); 422 naming it when it is no IANA time zone. */
export function checkRecipientTimeZone(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (!isTimeZone(value)) throw invalidParameter('recipient_time_zone', 'recipient_time_zone must be an IANA time zone such as America/New_York or Europe/Berlin');
  return value;
}

/**
 * When a note accepted now may first go under the account's send window on its platform (docs/sending.md,
 * "Send windows"), as an instant on this process's clock: undefined when it may go at `notBefore` (no
 * window, or the window is open then). A window never open in the recipient's zone at the same time: 422
 * naming recipient_time_zone.
 */
export async function sendWindowWait(
  services: Services,
  send: { accountId: string; platform: string; recipientTimeZone: string | null; notBefore: number; now: number },
): Promise<number | undefined> {
  const window = await findSendWindowCached(services.db.kysely, send.accountId, send.platform, send.now);
  if (!window) return undefined;
  // Weighed on the windows' clock (tests set it), then told as a wait from now on this process's clock.
  const windowNow = services.now?.() ?? send.now;
  const from = windowNow + (send.notBefore - send.now);
  const opening = nextOpening(window, send.recipientTimeZone, from);
  if (opening === null) {
    throw invalidParameter(
      'recipient_time_zone',
      `the ${send.platform} send window (${windowText(window)}) is never open at the same time in ${send.recipientTimeZone}: the note could never go; send without recipient_time_zone or change the window`,
    );
  }
  return opening > from ? send.notBefore + (opening - from) : undefined;
}
