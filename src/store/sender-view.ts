import type { Kysely } from 'kysely';
import { allowanceOn, utcDay, type Rhythm } from '../core/rhythm.js';
import { parseNewChatCap } from './new-chat-cap.js';
import { checksToday, RECIPIENT_CHECK_DAILY_BUDGET } from './recipient-check-budget.js';
import { findRhythms, rhythmKey } from './rhythm.js';
import type { Database, SenderRecordsTable } from './schema.js';

/** A sender as GET /senders, the dashboard and `sender.updated` show it (docs/senders.md, "Senders"). */
export interface SenderView {
  id: string;
  platform: string;
  kind: string;
  label: string | null;
  status: string;
  reason: string | null;
  until: string | null;
  last_sent_at: string | null;
  sent_today: number;
  daily_cap: number | null;
  /** WhatsApp's new-chat message cap as last read; null for other platforms and before it is read. */
  new_chat_cap: { status: string; used: number | null; total: number | null; cycle_ends_at: string | null } | null;
  /** Live recipient checks asked today (UTC) against the sender's daily budget. */
  recipient_checks: { today: number; daily_budget: number };
  /** The sender's own proxy as scheme://host:port (never its credentials); null: none (OUTBOUND_PROXY or direct). */
  proxy: string | null;
}

const isoOrNull = (ms: number | null): string | null => (ms === null ? null : new Date(Number(ms)).toISOString());

function newChatCapView(kept: string | null | undefined): SenderView['new_chat_cap'] {
  const cap = parseNewChatCap(kept);
  return cap && { status: cap.status, used: cap.used, total: cap.total, cycle_ends_at: isoOrNull(cap.cycleEndsAt) };
}

/**
 * The views of some sender records, read with what they need in a few statements: the daily cap from
 * the account's rhythm (live senders only: sandbox sends count against no cap) and its warm-up, and a
 * WhatsApp session's phone number for the label. A rest or a lock whose `until` has passed shows as
 * `ok` (the worker writes its end, with its event, when it next looks).
 */
export async function senderViews(
  db: Kysely<Database>,
  rows: readonly SenderRecordsTable[],
  now = Date.now(),
  defaults?: Readonly<Record<string, Rhythm>>,
): Promise<SenderView[]> {
  if (rows.length === 0) return [];
  const live = rows.filter((r) => r.env === 'live');
  const rhythms = await findRhythms(
    db,
    live.map((r) => ({ accountId: r.account_id, platform: r.platform })),
    defaults,
  );
  // The rhythm's own record of a live sender (store/rhythm.ts): the first day its warm-up counts from.
  const scoped = (r: SenderRecordsTable) => `${r.account_id}:${r.env}:${r.platform}:${r.sender_key}`;
  const firstDays = new Map<string, number>();
  if (live.length > 0) {
    const found = await db.selectFrom('senders').selectAll().where('sender_key', 'in', live.map(scoped)).execute();
    for (const f of found) firstDays.set(f.sender_key, Number(f.first_day));
  }
  const sessionIds = rows.filter((r) => r.platform === 'whatsapp').map((r) => r.sender_key);
  const phones = new Map<string, string | null>();
  if (sessionIds.length > 0) {
    const found = await db.selectFrom('whatsapp_sessions').select(['id', 'phone_number']).where('id', 'in', sessionIds).execute();
    for (const f of found) phones.set(f.id, f.phone_number);
  }
  const today = utcDay(now);
  return rows.map((r) => {
    const until = r.until === null ? null : Number(r.until);
    const ended = (r.status === 'resting' || r.status === 'restricted') && until !== null && until <= now;
    const rhythm = r.env === 'live' ? rhythms.get(rhythmKey(r.account_id, r.platform)) : undefined;
    const phone = phones.get(r.sender_key);
    return {
      id: r.id,
      platform: r.platform,
      kind: r.kind,
      label: r.platform === 'whatsapp' ? (phone ? `${r.sender_key} +${phone}` : r.sender_key) : r.label,
      status: ended ? 'ok' : r.status,
      reason: ended ? null : r.reason,
      until: ended ? null : isoOrNull(until),
      last_sent_at: isoOrNull(r.last_sent_at),
      sent_today: r.sent_day !== null && Number(r.sent_day) === today ? Number(r.sent_today) : 0,
      daily_cap: rhythm ? allowanceOn(rhythm, firstDays.get(scoped(r)) ?? today, today) : null,
      new_chat_cap: newChatCapView(r.new_chat_cap),
      recipient_checks: { today: checksToday(r, now), daily_budget: RECIPIENT_CHECK_DAILY_BUDGET },
      proxy: r.proxy_shown ?? null,
    };
  });
}
