import { errorCodeOf } from '../../../core/error-code.js';
import { DeliveryError } from '../../platform.js';
import { rpcErrorName } from './client.js';
import { REVOKED } from './revoked.js';

/** How long Telegram's first PEER_FLOOD rests an account here (it says no more; users report hours to a day). */
export const PEER_FLOOD_REST_MS = 6 * 60 * 60_000;
/** The longest rest: 6 hours doubled five times (tdlib/td #797: a spam-limited account can stay limited for days). */
export const PEER_FLOOD_MAX_REST_MS = 8 * 24 * 60 * 60_000;

/** The rest of a PEER_FLOOD: the first one `firstMs`, each repeat (no note went out since the last) twice the last. */
export const peerFloodRest = (previousMs: number | undefined, firstMs = PEER_FLOOD_REST_MS): number =>
  previousMs === undefined ? firstMs : Math.min(previousMs * 2, Math.max(PEER_FLOOD_MAX_REST_MS, firstMs));

/** The recipient takes voice notes only from contacts or from Premium users. */
const BLOCKED = new Set(['USER_PRIVACY_RESTRICTED', 'PRIVACY_PREMIUM_REQUIRED', 'VOICE_MESSAGES_FORBIDDEN', 'USER_IS_BLOCKED', 'YOU_BLOCKED_USER']);
const NOT_FOUND = new Set(['USERNAME_NOT_OCCUPIED', 'USERNAME_INVALID', 'PEER_ID_INVALID', 'USER_ID_INVALID', 'INPUT_USER_DEACTIVATED']);

/** The account is frozen by Telegram (core.telegram.org/api/auth, "Frozen accounts"): it may send nothing until it appeals. */
const FROZEN = new Set(['FROZEN_METHOD_INVALID', 'FROZEN_PARTICIPANT_MISSING']);

/** What the sending code does with a Telegram error, by the name Telegram gives it. */
export type TelegramRefusal =
  | { kind: 'flood_wait'; seconds: number }
  | { kind: 'peer_flood' }
  | { kind: 'frozen'; name: string }
  | { kind: 'revoked'; name: string }
  | { kind: 'fail'; error: DeliveryError };

export function classifyTelegramError(error: unknown, doing: string): TelegramRefusal {
  const name = rpcErrorName(error);
  if (name === undefined) {
    // A socket's error says its code, never its text (which names the address it tried: error-code.ts).
    const what = errorCodeOf(error) ?? (error instanceof Error ? error.message : String(error));
    return { kind: 'fail', error: new DeliveryError('platform_error', `Telegram did not answer ${doing}: ${what}`, true) };
  }
  const flood = /^(?:FLOOD_WAIT|SLOWMODE_WAIT|FLOOD_PREMIUM_WAIT)_(\d+)$/.exec(name);
  if (flood) return { kind: 'flood_wait', seconds: Number(flood[1]) };
  if (name === 'PEER_FLOOD') return { kind: 'peer_flood' };
  if (FROZEN.has(name)) return { kind: 'frozen', name };
  if (REVOKED.has(name)) return { kind: 'revoked', name };
  // Each of these would be the same answer on every retry of the hour, after a new upload each time.
  const stars = /^ALLOW_PAYMENT_REQUIRED(?:_(\d+))?$/.exec(name);
  if (stars) {
    const price = stars[1] !== undefined ? ` ${stars[1]} Stars` : ' Stars';
    return { kind: 'fail', error: new DeliveryError('recipient_blocked', `Telegram refused ${doing}: ${name} (the recipient charges${price} for each message from people who are not their contacts)`, false) };
  }
  if (name === 'PREMIUM_ACCOUNT_REQUIRED') {
    return { kind: 'fail', error: new DeliveryError('platform_error', `Telegram refused ${doing}: ${name} (only a Telegram Premium account may do this; it is not tried again)`, false) };
  }
  if (BLOCKED.has(name)) return { kind: 'fail', error: new DeliveryError('recipient_blocked', `Telegram refused ${doing}: ${name} (the recipient takes voice notes only from contacts or Premium users, or blocked this account)`, false) };
  if (NOT_FOUND.has(name)) return { kind: 'fail', error: new DeliveryError('recipient_not_found', `Telegram refused ${doing}: ${name}`, false) };
  return { kind: 'fail', error: new DeliveryError('platform_error', `Telegram refused ${doing}: ${name}`, true) };
}
