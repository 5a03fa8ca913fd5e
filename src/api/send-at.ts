import { invalidParameter, type ApiError } from './errors.js';

/** How far back a `send_at` may lie (a clock a little behind, a request that queued): sent at once. */
export const SEND_AT_MAX_PAST_MS = 5 * 60_000;
/** How far ahead a send may be scheduled. */
export const SEND_AT_MAX_FUTURE_MS = 30 * 86_400_000;

// RFC 3339 (ISO 8601 with the time zone written out): date, T, time to the second (fraction optional),
// then Z or ±hh:mm. A time without an offset would mean "some local clock" and is refused.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-](\d{2}):(\d{2}))$/;

const notATime = (): ApiError =>
  invalidParameter('send_at', 'send_at must be an ISO 8601 timestamp with a time zone, e.g. 2026-11-25T14:30:00Z or 2026-11-25T15:30:00+01:00');

/** The moment `send_at` names, in epoch ms; throws 422 invalid_parameter (field send_at) when it is not a timestamp. */
export function parseSendAtValue(value: unknown): number {
  if (typeof value !== 'string') throw notATime();
  const match = RFC3339.exec(value);
  if (!match) throw notATime();
  const [, y, mo, d, h, mi, s, , , oh, om] = match;
  const ms = Date.parse(value.toUpperCase());
  // Date.parse rolls impossible dates over (Feb 30 → Mar 2) on some engines: the fields must survive the round trip.
  const day = new Date(Date.UTC(Number(y), Number(mo) - 1, Number(d)));
  const fieldsValid =
    day.getUTCFullYear() === Number(y) &&
    day.getUTCMonth() === Number(mo) - 1 &&
    day.getUTCDate() === Number(d) &&
    Number(h) < 24 &&
    Number(mi) < 60 &&
    Number(s) < 60 &&
    (oh === undefined || (Number(oh) < 24 && Number(om) < 60));
  if (!fieldsValid || !Number.isFinite(ms)) throw notATime();
  return ms;
}

/**
 * `send_at` of POST /send, checked against the window a send may be scheduled in: null when not given
 * (or null), else the moment in epoch ms. More than 5 minutes past or more than 30 days ahead: 422.
 */
export function checkSendAt(value: unknown, now: number): number | null {
  if (value === undefined || value === null) return null;
  const at = parseSendAtValue(value);
  if (at < now - SEND_AT_MAX_PAST_MS) {
    throw invalidParameter('send_at', 'send_at is more than 5 minutes in the past; leave it out to send at once');
  }
  if (at > now + SEND_AT_MAX_FUTURE_MS) throw invalidParameter('send_at', 'send_at is more than 30 days ahead');
  return at;
}
