import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { newReplyId } from '../core/ids.js';
import { messageStatusView, replyView } from '../core/public-views.js';
import { giveBackCanceled } from '../store/cancel.js';
import type { MessageRow } from '../store/messages.js';
import { cancelAnsweredNotes, findQuotedNote, findRepliedNote, insertReply, markReplied, MAX_REPLIED_EVENTS, repliesInEventWindow, type Conversation, type ReplyRow } from '../store/replies.js';
import type { Database } from '../store/schema.js';
import { enqueueEvent } from '../store/webhook-outbox.js';
import type { Heard, HeardReply } from './heard.js';
import { isOptOut } from '../core/opt-out-keywords.js';
import { suppressionView } from '../core/public-views.js';
import { recipientKey } from '../core/recipient-key.js';
import { readOptOutSettings } from '../store/opt-out-settings.js';
import { addSuppressions, cancelSuppressedNotes, findSuppression, type SuppressionRow } from '../store/suppressions.js';

/** The longest text or caption kept of a reply, in characters. */
export const MAX_REPLY_TEXT = 4_096;

/** What recording a heard message did. */
export interface Recorded {
  /** The reply as written, with the note it answers; undefined when nobody we wrote to sent it, or it was recorded before. */
  reply?: { row: ReplyRow; note: MessageRow };
  /** Notes canceled by it (cancel_on_reply, or an opt-out), each with its usage row's count after it was given back. */
  canceled: Array<{ message: MessageRow; sent: number | undefined }>;
  /** The reply was an opt-out that listed its sender (recipient.opted_out). */
  optedOut?: { suppression: SuppressionRow };
}

/**
 * Records what a listener heard, in one transaction with its effects:
 *  - the reply, on the note it quotes when the platform says so, else on the latest voice note
 *    delivered to that recipient from that sender in the last 30 days, once (a message heard again is recognized by its platform id), with voice_note.replied (at
 *    most MAX_REPLIED_EVENTS of a note's replies an hour are announced; all are kept);
 *  - notes of that note's account and environment to that recipient from that sender that asked for
 *    `cancel_on_reply`, accepted before the reply (give or take the clock slack) and not yet taken by a
 *    worker: canceled (voice_note.canceled, cancel_reason "replied");
 *  - a reply that is an opt-out keyword: its sender listed on the suppression list and every note
 *    waiting for them canceled (cancel_reason "suppressed"), with recipient.opted_out.
 * A message from anyone never written to answers no note: nothing is recorded and nothing canceled.
 * A listener names the environment it hears (live listeners: 'live'), so a reply never lands on a note
 * of another environment; one whose sender belongs to one account (a WhatsApp session) names it too.
 */
export async function recordHeard(db: Kysely<Database>, heard: Heard): Promise<Recorded> {
  return recordReply(db, heard);
}

async function recordReply(db: Kysely<Database>, heard: HeardReply): Promise<Recorded> {
  // PostgreSQL refuses U+0000 in text ("invalid byte sequence"): dropped, as a request's are refused, so
  // a reply carrying one is recorded rather than failing again each time it is heard.
  const from = withoutNul(heard.from);
  const chat: Conversation = { platform: heard.platform, senderKey: heard.senderKey, recipient: from, accountId: heard.accountId, env: heard.env };
  const at = Math.floor(heard.reply.at);
  return db.transaction().execute(async (trx) => {
    const recorded: Recorded = { canceled: [] };
    // The note it quotes when the platform says so (two notes to one person: the one answered), else the latest.
    const quotes = heard.reply.quotes === undefined ? undefined : withoutNul(heard.reply.quotes);
    const note = (quotes !== undefined ? await findQuotedNote(trx, chat, quotes, at) : undefined) ?? (await findRepliedNote(trx, chat, at));
    // Nobody we wrote to (a stranger's /start): nothing is written, announced or canceled.
    if (!note) return recorded;
    const row: ReplyRow = {
      id: newReplyId(at),
      message_id: note.id,
      account_id: note.account_id,
      env: note.env,
      platform: note.platform,
      sender_key: heard.senderKey,
      recipient: from,
      platform_reply_id: withoutNul(heard.reply.platformId),
      type: heard.reply.type,
      text: cut(heard.reply.text === null ? null : withoutNul(heard.reply.text)),
      received_at: at,
      created_at: Date.now(),
    };
    // Heard before (re-delivered at reconnect, or by two processes at once): nothing more to do.
    if (!(await insertReply(trx, row))) return recorded;
    await markReplied(trx, note.id, at);
    // Announced within a bound per note and hour (a burst of messages is kept, not sent as a burst of webhooks).
    if ((await repliesInEventWindow(trx, note.id, at)) <= MAX_REPLIED_EVENTS) {
      const data = { ...messageStatusView(note), reply: replyView(row) };
      await enqueueEvent(trx, { accountId: note.account_id, env: note.env, type: 'voice_note.replied', data, at });
    }
    recorded.reply = { row, note };
    // "STOP" (or another opt-out keyword) as the whole message: the recipient is listed and what waits for
    // them canceled (suppressed) before cancel_on_reply would cancel it as merely "replied".
    const optedOut = await recordOptOut(trx, row, note);
    if (optedOut) recorded.optedOut = optedOut;
    recorded.canceled.push(...(optedOut?.canceled ?? []));
    // Only the follow-ups of the account and environment whose note it answers (two accounts may share a bot).
    for (const message of await cancelAnsweredNotes(trx, { ...chat, accountId: note.account_id, env: note.env }, at)) {
      recorded.canceled.push({ message, sent: await giveBackCanceled(trx, message, 'replied') });
    }
    return recorded;
  });
}

/**
 * A reply whose whole text is an opt-out keyword (core/opt-out-keywords.ts, the account's own too, unless
 * the account turned opt-outs off) lists its sender on the note's platform (source `reply`), cancels the
 * notes waiting for them in the note's account and environment, and sends recipient.opted_out. A
 * recipient already listed is not announced again.
 */
async function recordOptOut(trx: Kysely<Database>, reply: ReplyRow, note: MessageRow): Promise<{ suppression: SuppressionRow; canceled: Recorded['canceled'] } | undefined> {
  const owner = { accountId: note.account_id, env: note.env };
  if (reply.text === null) return undefined;
  const settings = await readOptOutSettings(trx, owner);
  if (!settings.enabled || !isOptOut(reply.text, settings.keywords)) return undefined;
  if (await findSuppression(trx, owner, note.platform, note.recipient)) return undefined;
  const entry = { platform: note.platform, key: recipientKey(note.recipient), note: null };
  const [suppression] = await addSuppressions(trx, owner, [entry], { source: 'reply', replyId: reply.id, now: reply.received_at });
  const canceled = await cancelSuppressedNotes(trx, owner, [entry]);
  const data = {
    platform: note.platform,
    recipient: note.recipient,
    suppression: suppressionView(suppression!),
    reply: { ...replyView(reply), message_id: note.id },
    canceled: canceled.map(({ message }) => message.id),
  };
  await enqueueEvent(trx, { accountId: owner.accountId, env: owner.env, type: 'recipient.opted_out', data, at: reply.received_at });
  return { suppression: suppression!, canceled };
}

/** The text kept: at most MAX_REPLY_TEXT characters (whole code points), null when there is none. */
function cut(text: string | null): string | null {
  if (text === null || text === '') return null;
  const chars = Array.from(text);
  return chars.length <= MAX_REPLY_TEXT ? text : chars.slice(0, MAX_REPLY_TEXT).join('');
}

const withoutNul = (text: string): string => (text.includes('\u0000') ? text.replaceAll('\u0000', '') : text);

/**
 * What listeners are given: hand it what was heard. It resolves once that is recorded (or known to answer
 * nothing) and rejects when it could not be (storage down): the listener then keeps the message to hear
 * it again (a Telegram bot's offset is not confirmed, a LinkedIn look is not counted), never drops it.
 * Listeners that cannot hear a message twice (pushed to them) go through `recordEventually`.
 */
export type OnHeard = (heard: Heard) => Promise<void>;

/**
 * The recorder listeners call. `onCanceled` tells this process's usage count that notes were given back
 * (as a cancel by the API does).
 */
export function createRecorder(deps: { db: Kysely<Database>; logger: Logger; onCanceled?: (canceled: Recorded['canceled']) => void }): OnHeard {
  return async (heard) => {
    try {
      const recorded = await recordHeard(deps.db, heard);
      if (recorded.reply) deps.logger.info({ message_id: recorded.reply.note.id, reply_id: recorded.reply.row.id, platform: heard.platform }, 'reply recorded');
      if (recorded.optedOut) deps.logger.info({ suppression_id: recorded.optedOut.suppression.id, platform: heard.platform }, 'recipient opted out by reply: suppressed');
      for (const { message } of recorded.canceled) deps.logger.info({ message_id: message.id, cancel_reason: message.cancel_reason }, 'canceled by a reply');
      if (recorded.canceled.length > 0) deps.onCanceled?.(recorded.canceled);
    } catch (err) {
      deps.logger.warn({ err, platform: heard.platform }, 'could not record what was heard: it is heard again later');
      throw err;
    }
  };
}
