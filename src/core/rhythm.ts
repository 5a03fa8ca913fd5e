/**
 * Sending like a person, the rules without I/O (docs/sending.md, "Sending like a person"; sources in
 * docs/platforms.md): each sender's daily cap and warm-up, the UTC day they count in, and how long the
 * "recording…" indicator shows before a note.
 */

export const DAY_MS = 24 * 60 * 60_000;

/** An account's rhythm on one platform. `dailyCap` null: no cap (and no warm-up). */
export interface Rhythm {
  dailyCap: number | null;
  /** The first days of a new sender allow `start` notes a day, rising evenly to the cap over `days` days. */
  warmup: { start: number; days: number } | null;
}

/**
 * The platforms' defaults, for live sends. WhatsApp: numbers were restricted after 15–20 templated notes a
 * day to people who never wrote to them (Baileys #1983), and new numbers need a warm-up (Baileys #2131,
 * #2075): 15 a day, from 5 on the first day. LinkedIn publishes no limit: a conservative 100 a day, from
 * 20 for a cookie never used before. Telegram bots: no cap; the Bot API's flood limits pace them (as before).
 */
export const DEFAULT_RHYTHMS: Readonly<Record<string, Rhythm>> = {
  whatsapp: { dailyCap: 15, warmup: { start: 5, days: 7 } },
  linkedin: { dailyCap: 100, warmup: { start: 20, days: 7 } },
  telegram: { dailyCap: null, warmup: null },
};

/**
 * A Telegram account (a person's own, linked by QR code): Telegram answers PEER_FLOOD when an account writes
 * to too many people who are not mutual contacts (tdlib/td #797); users report it after 5 strangers at 30 s
 * apart (LonamiWebs/Telethon #4009), after about 50 DMs (Telethon #397), after 15–20 (Telethon #398), and
 * that proxies change nothing (gram-js/gramjs #309). 20 a day, from 5 on the account's first day here.
 */
export const TELEGRAM_ACCOUNT_RHYTHM: Rhythm = { dailyCap: 20, warmup: { start: 5, days: 7 } };

export const NO_RHYTHM: Rhythm = { dailyCap: null, warmup: null };

export const defaultRhythm = (platform: string): Rhythm => DEFAULT_RHYTHMS[platform] ?? NO_RHYTHM;

/** Largest daily cap and warm-up length a user may set (a cap above this is as good as none: turn it off). */
export const MAX_DAILY_CAP = 100_000;
export const MAX_WARMUP_DAYS = 365;

/**
 * How long a sender's daily counts (`sender_days`) are kept. Only today's count is read (the cap), and a
 * message's own day when it gives its place back (within its retry window: hours); a warm-up reads the
 * sender's first day, which `senders` keeps for good. 40 days is a wide margin over all of that.
 */
export const SENDER_DAYS_KEEP_DAYS = 40;

/** The UTC day holding `ms`, as the epoch ms of its midnight: a sender's count starts again at 00:00 UTC. */
export const utcDay = (ms: number): number => Math.floor(ms / DAY_MS) * DAY_MS;

/**
 * Notes a sender may send on `day`, its warm-up taken into account; null: no cap. `firstDay`: the UTC day
 * it was first seen (day 0 of its warm-up allows `start`, day `days` and after the full cap).
 */
export function allowanceOn(rhythm: Rhythm, firstDay: number, day: number): number | null {
  const cap = rhythm.dailyCap;
  if (cap === null) return null;
  const warmup = rhythm.warmup;
  if (!warmup || warmup.days <= 0 || warmup.start >= cap) return cap;
  const age = Math.max(0, Math.round((day - firstDay) / DAY_MS));
  if (age >= warmup.days) return cap;
  return Math.min(cap, warmup.start + Math.floor(((cap - warmup.start) * age) / warmup.days));
}

/**
 * When a note over its sender's cap is tried again: the next UTC day, spread over its first 10 minutes
 * so a day's waiting notes do not all come due at the same instant.
 */
export const NEXT_DAY_SPREAD_MS = 10 * 60_000;
/** A sender's name under its daily cap: scoped by account and environment, so one account's notes never count against another's. */
export const capKey = (owner: { accountId: string; env: string }, platform: string, senderKey: string): string => `${owner.accountId}:${owner.env}:${platform}:${senderKey}`;

export function nextDayStart(now: number, random: () => number = Math.random): number {
  return utcDay(now) + DAY_MS + Math.floor(random() * NEXT_DAY_SPREAD_MS);
}

/** The indicator lasts about the note's length, ±20 %, never more than this. */
export const MAX_INDICATOR_MS = 30_000;
export function indicatorMs(durationSeconds: number, random: () => number = Math.random): number {
  const seconds = Number.isFinite(durationSeconds) && durationSeconds > 0 ? durationSeconds : 1;
  return Math.min(MAX_INDICATOR_MS, Math.round(seconds * 1000 * (0.8 + 0.4 * random())));
}

/** "5:7" → warm-up from 5 a day over 7 days; undefined when not of that shape. */
export function parseWarmup(text: string): { start: number; days: number } | undefined {
  const match = /^\s*(\d{1,6})\s*:\s*(\d{1,3})\s*$/.exec(text);
  if (!match) return undefined;
  const start = Number(match[1]);
  const days = Number(match[2]);
  if (start < 1 || days < 1 || days > MAX_WARMUP_DAYS) return undefined;
  return { start, days };
}
