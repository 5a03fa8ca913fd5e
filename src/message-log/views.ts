import { findLinkedinListener } from '../store/linkedin-listeners.js';
import { stat } from 'node:fs/promises';
import type { Kysely } from 'kysely';
import { cachedAudioFile } from '../audio/cache.js';
import { profileOfSent, type AudioFormat } from '../audio/targets.js';
import { messageStatusView, replyView } from '../core/public-views.js';
import { findAttempts, findAudio, findReceipts, listMessages, type MessageAudioRow, type Owner } from '../store/message-log.js';
import { parseLogQuery, type LogQueryInput } from './query.js';
import { findMessage, type MessageRow } from '../store/messages.js';
import { findReplies } from '../store/replies.js';
import { findListener } from '../store/listeners.js';
import { isListeningAccount } from '../store/listening-accounts.js';
import type { Database } from '../store/schema.js';

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(Number(ms)).toISOString());

/**
 * A message in the log: the status lookup's fields, plus how many attempts it took, when it last
 * changed, and the send_at it was scheduled for (null: sent at once).
 */
export function messageListItemView(row: MessageRow) {
  return { ...messageStatusView(row), attempt_count: Number(row.attempts), updated_at: iso(row.updated_at)!, send_at: iso(row.send_at ?? null) };
}
export type MessageListItem = ReturnType<typeof messageListItemView>;

const NO_RECEIPTS: Record<string, string> = {
  telegram: 'Telegram gives bots no delivery or read receipts',
  linkedin: 'LinkedIn tells when a note was seen only to a session listened to (listen: true)',
};

export interface ReceiptsView {
  supported: boolean;
  /** Why there are none, where the platform has none. */
  reason: string | null;
  delivered_to_device_at: string | null;
  read_at: string | null;
  played_at: string | null;
}

export interface AudioView {
  /** As fetched: container, codec, duration and size; null when it was never fetched or not recorded. */
  source: { format: string | null; codec: string | null; duration_seconds: number | null; size_bytes: number | null } | null;
  /** As sent to the platform. `cached`: the file is still in the audio cache (the dashboard can play it). */
  converted: { format: string; mime_type: string; duration_seconds: number; size_bytes: number; waveform: number[]; cached: boolean } | null;
}

function waveformOf(text: string | null): number[] {
  try {
    const parsed: unknown = JSON.parse(text ?? '[]');
    return Array.isArray(parsed) ? parsed.filter((v): v is number => typeof v === 'number') : [];
  } catch {
    return [];
  }
}

const isAudioFormat = (value: string): value is AudioFormat => value === 'ogg_opus' || value === 'm4a_aac';

/** The converted audio of a message while the cache still holds it (path and type), else undefined. */
export async function convertedAudioFile(dataDir: string, platform: string, audio: MessageAudioRow | undefined): Promise<{ path: string; mimeType: string; sizeBytes: number } | undefined> {
  if (!audio || audio.source_sha256 === null || !isAudioFormat(audio.converted_format)) return undefined;
  const path = cachedAudioFile(dataDir, audio.source_sha256, profileOfSent(platform, audio.converted_format));
  const st = await stat(path).catch(() => null);
  return st && st.isFile() ? { path, mimeType: audio.converted_mime, sizeBytes: st.size } : undefined;
}

async function audioView(dataDir: string, platform: string, audio: MessageAudioRow | undefined): Promise<AudioView> {
  if (!audio) return { source: null, converted: null };
  const cached = (await convertedAudioFile(dataDir, platform, audio)) !== undefined;
  return {
    source:
      audio.source_format === null && audio.source_size === null
        ? null
        : {
            format: audio.source_format,
            codec: audio.source_codec,
            duration_seconds: audio.source_duration === null ? null : Number(audio.source_duration),
            size_bytes: audio.source_size === null ? null : Number(audio.source_size),
          },
    converted: {
      format: audio.converted_format,
      mime_type: audio.converted_mime,
      duration_seconds: Number(audio.converted_duration),
      size_bytes: Number(audio.converted_size),
      waveform: waveformOf(audio.waveform),
      cached,
    },
  };
}

/**
 * Sending like a person, as the log shows it: the "recording…" indicator (null when not asked for; when
 * it was shown and for how long), and what a queued message waits for besides a retry (`daily_cap`: its
 * sender's cap for the day is reached; `recording_indicator`: the indicator shows until next_attempt_at).
 */
/**
 * What a queued message may wait for (`sender_rest`, `sender_restricted`: its sender's rest or
 * restriction, docs/senders.md, "Senders"; `send_window`: its account's send window to open, docs/sending.md, "Send windows").
 */
export const WAIT_REASONS = ['daily_cap', 'recording_indicator', 'sender_rest', 'sender_restricted', 'send_window'] as const;

export function rhythmView(row: MessageRow) {
  const asked = Number(row.recording_indicator ?? 0) === 1;
  const waiting = row.status === 'queued' && row.wait_reason != null && (WAIT_REASONS as readonly string[]).includes(row.wait_reason) ? row.wait_reason : null;
  return {
    recording_indicator: asked
      ? { shown_at: iso(row.indicator_started_at ?? null), seconds: row.indicator_ms == null ? null : Math.round(Number(row.indicator_ms) / 100) / 10 }
      : null,
    waiting_for: waiting as (typeof WAIT_REASONS)[number] | null,
  };
}

/**
 * GET /status's fields while a queued note waits for something other than a retry (its send window, its
 * sender's daily cap, …): `waiting_for`, and `next_attempt_at` when it goes. Absent otherwise, so the
 * lookup of every other note keeps its exact fields.
 */
export function waitView(row: Pick<MessageRow, 'status' | 'next_attempt_at' | 'wait_reason'>): { next_attempt_at: string; waiting_for: (typeof WAIT_REASONS)[number] } | Record<string, never> {
  const reason = row.wait_reason ?? null;
  if (row.status !== 'queued' || reason === null || !(WAIT_REASONS as readonly string[]).includes(reason)) return {};
  return { next_attempt_at: new Date(Number(row.next_attempt_at)).toISOString(), waiting_for: reason as (typeof WAIT_REASONS)[number] };
}

export const CANCEL_REASONS = ['requested', 'replied', 'suppressed'] as const;
const cancelReasonOf = (value: string | null | undefined) => ((CANCEL_REASONS as readonly string[]).includes(value ?? '') ? (value as (typeof CANCEL_REASONS)[number]) : null);

/**
 * Everything the log knows of one message: the status lookup's fields, the request, every attempt
 * with its outcome, the audio as detected and as converted, the receipts (or why a platform has
 * none), and what the recipient answered (oldest first, at most 20; first_replied_at: the first answer). Undefined when the message is not the owner's.
 */
export async function messageDetail(db: Kysely<Database>, dataDir: string, owner: Owner, id: string, now = Date.now()) {
  const row = await findMessage(db, owner, id);
  if (!row) return undefined;
  const [attempts, audio, receipts, replies] = await Promise.all([findAttempts(db, id), findAudio(db, id), findReceipts(db, id, now), findReplies(db, id)]);
  const receiptAt = (kind: string): string | null => iso(receipts.find((r) => r.kind === kind)?.at ?? null);
  // A Telegram account (a ts_ sender) hears read and played receipts, which bots never get.
  const fromTelegramAccount = row.platform === 'telegram' && String((row as { sender_key?: string | null }).sender_key ?? '').startsWith('ts_');
  const listening = await listeningView(db, row);
  // A listened LinkedIn session hears the recipient's seen events on its realtime stream: read receipts.
  const heardOnLinkedin = row.platform === 'linkedin' && (listening !== null || receipts.length > 0);
  const reason = fromTelegramAccount || heardOnLinkedin ? null : (NO_RECEIPTS[row.platform] ?? null);
  const receiptsView: ReceiptsView = {
    supported: reason === null,
    reason,
    delivered_to_device_at: receiptAt('delivered_to_device'),
    read_at: receiptAt('read'),
    played_at: receiptAt('played'),
  };
  return {
    ...messageListItemView(row),
    audio_url: row.audio_url,
    duration: row.duration === null ? null : Number(row.duration),
    caption: row.caption,
    next_attempt_at: row.status === 'queued' || row.status === 'processing' ? iso(row.next_attempt_at) : null,
    canceled_at: iso(row.canceled_at ?? null),
    cancel_on_reply: Number(row.cancel_on_reply ?? 0) === 1,
    cancel_reason: row.status === 'canceled' ? cancelReasonOf(row.cancel_reason) : null,
    ...rhythmView(row),
    attempts: attempts.map((a) => ({
      attempt: Number(a.attempt),
      started_at: iso(a.started_at)!,
      ended_at: iso(a.ended_at)!,
      outcome: a.outcome,
      error: a.error_code === null ? null : { code: a.error_code, message: a.error_message ?? '' },
      next_attempt_at: iso(a.next_attempt_at),
    })),
    audio: await audioView(dataDir, row.platform, audio),
    receipts: receiptsView,
    replies: replies.map(replyView),
    first_replied_at: iso(row.first_replied_at ?? null),
    listening,
  };
}
export type MessageDetail = NonNullable<Awaited<ReturnType<typeof messageDetail>>>;

/**
 * Whether the note's sender is listened to for replies (a Telegram bot or a LinkedIn li_at sent with `listen: true`):
 * `listening`, or `refused` with the platform's reason (a bot with a webhook); null when not.
 */
export async function listeningView(db: Kysely<Database>, row: Pick<MessageRow, 'platform' | 'sender_key' | 'account_id' | 'env'>) {
  // A listener is shown only to the accounts and environments that asked for it: a sandbox note sent
  // with a live bot's token says nothing of the live listener.
  if (!row.sender_key || !(await isListeningAccount(db, { platform: row.platform, senderKey: row.sender_key, accountId: row.account_id, env: row.env }))) return null;
  if (row.platform === 'linkedin') {
    const kept = await findLinkedinListener(db, row.sender_key);
    return kept ? { status: 'listening' as 'listening' | 'refused', reason: null, until: iso(kept.listen_until)! } : null;
  }
  if (row.platform !== 'telegram') return null;
  const bot = await findListener(db, row.sender_key);
  if (!bot) return null;
  return { status: (bot.status === 'listening' ? 'listening' : 'refused') as 'listening' | 'refused', reason: bot.reason, until: iso(bot.listen_until)! };
}

/** The converted audio of one of the owner's messages, while cached (for playing it back); undefined otherwise. */
export async function messageAudioFile(db: Kysely<Database>, dataDir: string, owner: Owner, id: string) {
  const row = await findMessage(db, owner, id);
  if (!row) return undefined;
  return convertedAudioFile(dataDir, row.platform, await findAudio(db, id));
}

/** One page of the log (`{data, has_more}`, newest first) from the query-string form; throws LogQueryError on bad input. */
export async function messageLogPage(db: Kysely<Database>, owner: Owner, query: LogQueryInput): Promise<{ data: MessageListItem[]; has_more: boolean }> {
  const { filters, page } = parseLogQuery(query);
  const { rows, hasMore } = await listMessages(db, owner, filters, page);
  return { data: rows.map(messageListItemView), has_more: hasMore };
}
