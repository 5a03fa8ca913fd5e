import type { RecipientCheck } from '../platforms/platform.js';
import type { RecipientCheckRow } from '../store/recipient-checks.js';

/** How long a kept answer is given again: a recipient found, 30 days (as kept); one not found may join or start the bot, so a day. */
const NOT_FOUND_FRESH_MS = 24 * 60 * 60_000;
export const isFresh = (kept: RecipientCheckRow, now = Date.now()): boolean => kept.exists || now - kept.checkedAt < NOT_FOUND_FRESH_MS;

export const keptAnswer = (recipient: string, kept: RecipientCheckRow): RecipientCheck =>
  kept.exists ? { exists: true, reason: null } : { exists: false, reason: `${recipient} was not found when the platform was asked at ${new Date(kept.checkedAt).toISOString()}` };

