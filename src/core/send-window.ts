/**
 * Send windows, the rules without I/O (docs/sending.md, "Send windows"): the days and hours an account's
 * notes may go on a platform, in an IANA time zone, and — per note — the same hours in the recipient's
 * zone. Local hours stay local across daylight-saving changes: every opening and closing is computed from
 * the zone's wall clock with Intl, never from a fixed offset.
 */

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

/**
 * Days, then hours from `start` to `end` ("HH:MM", `end` may be "24:00") in `time_zone`. An `end` earlier
 * than `start` runs past midnight ("22:00-06:00"): the window opens on each listed day and closes on the
 * next day's wall clock, so "fri 22:00-06:00" is Friday night until Saturday 06:00.
 */
export interface SendWindow {
  days: Weekday[];
  start: string;
  end: string;
  time_zone: string;
}

const HOUR_MS = 60 * 60_000;
const DAY_MS = 24 * HOUR_MS;
/**
 * How far ahead an opening is looked for: a window opens at least once a week, and two zones' copies of
 * it overlap within a week if they ever do. Two weeks covers a daylight-saving change in between.
 */
const LOOK_AHEAD_DAYS = 15;

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

/** True when `zone` is an IANA time zone this runtime knows ("Europe/Berlin", "UTC"); not an offset like "+02:00". */
export function isTimeZone(zone: unknown): zone is string {
  if (typeof zone !== 'string' || zone.length === 0 || zone.length > 64 || !/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(zone)) return false;
  try {
    formatterFor(zone);
    return true;
  } catch {
    return false;
  }
}

/** The wall clock of `zone` at `ms`, as if it were UTC (its offset is the difference). */
function wallClock(ms: number, zone: string): number {
  const parts: Record<string, number> = {};
  for (const part of formatterFor(zone).formatToParts(new Date(ms))) if (part.type !== 'literal') parts[part.type] = Number(part.value);
  return Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!);
}

/** The zone's offset from UTC at `ms`, in ms (Berlin in summer: +2 h). */
const offsetAt = (ms: number, zone: string): number => wallClock(Math.floor(ms / 1000) * 1000, zone) - Math.floor(ms / 1000) * 1000;

/**
 * The instant the zone's wall clock shows `local` (a wall-clock time written as UTC ms). A time skipped
 * by a change to summer time is read with the offset before the change (02:30 on the spring-forward day
 * is 03:30); a time shown twice when clocks go back is its first showing.
 */
export function instantOf(local: number, zone: string): number {
  const before = offsetAt(local - DAY_MS, zone);
  const after = offsetAt(local + DAY_MS, zone);
  // The earlier showing first: the offset before any change that day, then the one after it.
  for (const offset of [before, after]) {
    const candidate = local - offset;
    if (wallClock(candidate, zone) === local) return candidate;
  }
  return local - before;
}

const minutesOf = (hhmm: string): number => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));

/**
 * The window's open spans as instants, on local days from the day before `from` (in its zone: a span
 * past midnight that opened yesterday may still be open) for `days` days.
 */
function openSpans(window: SendWindow, zone: string, from: number, days: number): Array<[number, number]> {
  const firstDay = Math.floor(wallClock(from, zone) / DAY_MS) * DAY_MS - DAY_MS;
  const start = minutesOf(window.start) * 60_000;
  const end = minutesOf(window.end) * 60_000;
  const spans: Array<[number, number]> = [];
  for (let d = 0; d <= days + 1; d++) {
    const day = firstDay + d * DAY_MS;
    // 1970-01-01 was a Thursday: weekday index from Monday = 0.
    const weekday = WEEKDAYS[(Math.floor(day / DAY_MS) + 3) % 7]!;
    if (!window.days.includes(weekday)) continue;
    const opens = instantOf(day + start, zone);
    // Past midnight: the closing is read on the next day's wall clock, so a daylight-saving change that
    // night shortens or lengthens the span by an hour and both ends stay in local hours.
    const closes = instantOf(day + (end > start ? end : DAY_MS + end), zone);
    if (closes > opens) spans.push([opens, closes]);
  }
  return spans;
}

/** Where two sorted lists of spans overlap. */
function overlap(a: Array<[number, number]>, b: Array<[number, number]>): Array<[number, number]> {
  const both: Array<[number, number]> = [];
  for (const [aStart, aEnd] of a) {
    for (const [bStart, bEnd] of b) {
      const start = Math.max(aStart, bStart);
      const end = Math.min(aEnd, bEnd);
      if (end > start) both.push([start, end]);
    }
  }
  return both.sort((x, y) => x[0] - y[0]);
}

/**
 * The first instant at or after `from` when a note may go: `from` itself when the window is open then
 * (in the window's zone, and in the recipient's zone when given); null when the two never overlap.
 */
export function nextOpening(window: SendWindow, recipientTimeZone: string | null, from: number): number | null {
  let spans = openSpans(window, window.time_zone, from, LOOK_AHEAD_DAYS);
  if (recipientTimeZone !== null && recipientTimeZone !== window.time_zone) spans = overlap(spans, openSpans(window, recipientTimeZone, from, LOOK_AHEAD_DAYS));
  for (const [start, end] of spans) {
    if (end <= from) continue;
    return Math.max(start, from);
  }
  return null;
}

const HHMM = /^([01]\d|2[0-3]):[0-5]\d$|^24:00$/;

/** Why a send window (as sent to PATCH /rhythm/{platform}) is not valid, with the field to name; undefined when it is. */
export function windowProblem(value: unknown, prefix = 'send_window'): { field: string; message: string } | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { field: prefix, message: `${prefix} must be an object with days, start, end and time_zone, or null for no window` };
  const w = value as Record<string, unknown>;
  const unknown = Object.keys(w).filter((k) => !['days', 'start', 'end', 'time_zone'].includes(k));
  if (unknown.length > 0) return { field: `${prefix}.${unknown[0]}`, message: `${prefix} takes days, start, end and time_zone; ${unknown[0]} is not one of them` };
  if (!Array.isArray(w.days) || w.days.length === 0 || w.days.some((d) => !(WEEKDAYS as readonly unknown[]).includes(d)) || new Set(w.days).size !== w.days.length) {
    return { field: `${prefix}.days`, message: `${prefix}.days must list one or more of ${WEEKDAYS.join(', ')}, each once` };
  }
  for (const name of ['start', 'end'] as const) {
    if (typeof w[name] !== 'string' || !HHMM.test(w[name])) return { field: `${prefix}.${name}`, message: `${prefix}.${name} must be a time of day as HH:MM (00:00 to 24:00)` };
  }
  if (w.start === '24:00') return { field: `${prefix}.start`, message: `${prefix}.start must be a time of day as HH:MM (00:00 to 23:59)` };
  // An earlier end runs past midnight; an equal one says neither "never" nor "all day" plainly.
  if (minutesOf(w.end as string) === minutesOf(w.start as string)) {
    return { field: `${prefix}.end`, message: `${prefix}.end must differ from start (an end earlier than start runs past midnight; 00:00-24:00 is the whole day)` };
  }
  if (!isTimeZone(w.time_zone)) return { field: `${prefix}.time_zone`, message: `${prefix}.time_zone must be an IANA time zone such as Europe/Berlin or America/New_York` };
  return undefined;
}

/** The window in the order of the week (days listed once, Monday first). */
export function normalWindow(window: SendWindow): SendWindow {
  return { days: WEEKDAYS.filter((d) => window.days.includes(d)), start: window.start, end: window.end, time_zone: window.time_zone };
}

/**
 * "mon-fri 09:00-18:00 Europe/Berlin" (days as a range or a list: "mon,wed,fri", "sat-sun", "daily")
 * → the window; a string saying what is wrong otherwise.
 */
export function parseWindowText(text: string): SendWindow | string {
  const match = /^\s*(\S+)\s+(\d{2}:\d{2})\s*-\s*(\d{2}:\d{2})\s+(\S+)\s*$/.exec(text);
  if (!match) return 'must read DAYS HH:MM-HH:MM TIME_ZONE, e.g. "mon-fri 09:00-18:00 Europe/Berlin"';
  const [, daysText, start, end, timeZone] = match;
  const days = parseDays(daysText!.toLowerCase());
  if (typeof days === 'string') return days;
  const window = { days, start: start!, end: end!, time_zone: timeZone! };
  const problem = windowProblem(window, 'window');
  return problem ? problem.message : normalWindow(window);
}

function parseDays(text: string): Weekday[] | string {
  if (text === 'daily') return [...WEEKDAYS];
  const days: Weekday[] = [];
  for (const part of text.split(',')) {
    const [from, to] = part.split('-');
    const a = WEEKDAYS.indexOf(from as Weekday);
    const b = to === undefined ? a : WEEKDAYS.indexOf(to as Weekday);
    if (a < 0 || b < 0 || b < a) return `days must be mon…sun as a range or list (mon-fri, sat,sun) or daily; "${part}" is not`;
    for (let i = a; i <= b; i++) if (!days.includes(WEEKDAYS[i]!)) days.push(WEEKDAYS[i]!);
  }
  return days;
}

/** "mon-fri 09:00-18:00 Europe/Berlin": a window as the CLI and the dashboard write it. */
export function windowText(window: SendWindow): string {
  const idx = window.days.map((d) => WEEKDAYS.indexOf(d)).sort((a, b) => a - b);
  const contiguous = idx.every((v, i) => i === 0 || v === idx[i - 1]! + 1);
  const days = idx.length === 7 ? 'daily' : contiguous && idx.length > 2 ? `${WEEKDAYS[idx[0]!]}-${WEEKDAYS[idx[idx.length - 1]!]}` : idx.map((i) => WEEKDAYS[i]).join(',');
  return `${days} ${window.start}-${window.end} ${window.time_zone}`;
}
