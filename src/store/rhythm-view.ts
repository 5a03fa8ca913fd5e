import type { Kysely } from 'kysely';
import { allowanceOn, KIND_DEFAULT_RHYTHMS, MAX_DAILY_CAP, SENDER_KINDS, utcDay, type Rhythm } from '../core/rhythm.js';
import type { SendWindow } from '../core/send-window.js';
import { findRhythm, senderCountsToday } from './rhythm.js';
import { findSendWindow } from './send-windows.js';
import type { Database } from './schema.js';

/** One account's rhythm on one platform as the CLI (`--json`) and the dashboard show it. */
export interface RhythmView {
  platform: string;
  /** `account`: set for this account; `default`: the platform's default. */
  source: 'account' | 'default';
  daily_cap: number | null;
  warmup: { start: number; days: number } | null;
  /** The days and hours notes on this platform may go (live and sandbox); null: any time. */
  send_window: SendWindow | null;
  /**
   * The rhythm in force for each kind of sender on the platform: the account's setting applies to every
   * kind; the defaults differ by kind (a Telegram bot has no cap, a linked Telegram account 20 a day).
   */
  applies_to: Array<{ kind: string; daily_cap: number | null; warmup: { start: number; days: number } | null }>;
  /** Live senders of the account on this platform and what they sent today (UTC). */
  senders: Array<{ sender: string; kind: string | null; sent_today: number; allowed_today: number | null; first_day: string }>;
}

export async function rhythmView(
  db: Kysely<Database>,
  accountId: string,
  platform: string,
  options: { now?: number; defaults?: Readonly<Record<string, Rhythm>>; /** The platform's senderKind: a sender's kind from its key. */ kindOf?: (senderKey: string) => string } = {},
): Promise<RhythmView> {
  const now = options.now ?? Date.now();
  const [rhythm, sendWindow, counts] = await Promise.all([
    findRhythm(db, accountId, platform, options.defaults),
    findSendWindow(db, accountId, platform),
    senderCountsToday(db, `${accountId}:live:${platform}:`),
  ]);
  // As the delivery's rhythm gate decides: a kind's own default only while the account sets none (and the defaults are the built-in ones).
  const rhythmOf = (kind: string | null): Rhythm => (rhythm.custom || options.defaults !== undefined || kind === null ? rhythm : (KIND_DEFAULT_RHYTHMS[kind] ?? rhythm));
  return {
    platform,
    source: rhythm.custom ? 'account' : 'default',
    daily_cap: rhythm.dailyCap,
    warmup: rhythm.warmup,
    send_window: sendWindow,
    applies_to: (SENDER_KINDS[platform] ?? []).map((kind) => ({ kind, daily_cap: rhythmOf(kind).dailyCap, warmup: rhythmOf(kind).warmup })),
    senders: counts.map((c) => {
      // Past the account, environment and platform: a session id, or a hash of the credential (never the credential).
      const sender = c.sender_key.split(':').slice(3).join(':');
      const kind = options.kindOf?.(sender) ?? null;
      return { sender, kind, sent_today: c.sent, allowed_today: allowanceOn(rhythmOf(kind), c.first_day, utcDay(now)), first_day: new Date(c.first_day).toISOString().slice(0, 10) };
    }),
  };
}

/** A change asked for (CLI flags, a dashboard form); undefined fields stay as they are. */
export interface RhythmChange {
  /** A number: that cap; null: no cap. */
  dailyCap?: number | null;
  /** null: no warm-up. */
  warmup?: { start: number; days: number } | null;
  /** Back to the platform's defaults (nothing else may be given). */
  defaults?: boolean;
}

/** The rhythm after `change`, null for "the defaults", or why the change cannot be made. */
export function applyRhythmChange(current: Rhythm, change: RhythmChange): { rhythm: Rhythm | null } | { problem: string } {
  if (change.defaults) {
    if (change.dailyCap !== undefined || change.warmup !== undefined) return { problem: 'back to the defaults takes no other setting' };
    return { rhythm: null };
  }
  const dailyCap = change.dailyCap !== undefined ? change.dailyCap : current.dailyCap;
  if (dailyCap !== null && (!Number.isInteger(dailyCap) || dailyCap < 1 || dailyCap > MAX_DAILY_CAP)) return { problem: `the daily cap must be a whole number from 1 to ${MAX_DAILY_CAP}` };
  // No cap: no warm-up either (a warm-up rises to the cap).
  let warmup = dailyCap === null ? null : change.warmup !== undefined ? change.warmup : current.warmup;
  if (dailyCap === null && change.warmup) return { problem: 'a warm-up rises to the daily cap: set a cap with it' };
  if (warmup && warmup.start >= (dailyCap ?? 0)) warmup = null;
  return { rhythm: { dailyCap, warmup } };
}

