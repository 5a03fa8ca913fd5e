import type { Kysely } from 'kysely';
import { utcDay } from '../core/rhythm.js';
import type { MessageRow } from './messages.js';
import { releaseSenderPlace } from './rhythm.js';
import type { Database } from './schema.js';
import { recordSettlementEvents } from './webhook-outbox.js';

/**
 * A note the platform took and then refused (WhatsApp's error acknowledgement, which comes after the
 * send call has resolved): `delivered` becomes `failed`, with the same effects a failed outcome has —
 * `voice_note.failed`, the usage counts (one fewer delivered, one more failed), the place under the
 * sender's daily cap given back and the sender's `sent_today` taken back.
 */

export interface Refusal {
  errorCode: string;
  errorMessage: string;
  at: number;
}

/**
 * `failed`: the note was delivered and is failed now (returned); `unsettled`: its outcome is not written
 * yet (the refusal came before it: look again soon); `none`: no note of ours has that id, or it was
 * already failed or canceled.
 */
export type RefusalResult = { kind: 'failed'; message: MessageRow } | { kind: 'unsettled' } | { kind: 'none' };

export async function failRefusedNote(db: Kysely<Database>, platformMessageId: string, refusal: Refusal): Promise<RefusalResult> {
  const result = await db.transaction().execute(async (trx): Promise<RefusalResult & { deliveredAt?: number }> => {
    const found = await trx.selectFrom('messages').select(['id', 'status', 'delivered_at']).where('platform_message_id', '=', platformMessageId).executeTakeFirst();
    if (!found) return { kind: 'none' };
    if (found.status === 'queued' || found.status === 'processing') return { kind: 'unsettled' };
    const failed = await trx
      .updateTable('messages')
      .set({ status: 'failed', delivered_at: null, error_code: refusal.errorCode, error_message: refusal.errorMessage, updated_at: refusal.at })
      .where('id', '=', found.id)
      .where('status', '=', 'delivered')
      .returningAll()
      .executeTakeFirst();
    if (!failed) return { kind: 'none' };
    await trx
      .updateTable('usage_periods')
      .set((eb) => ({ delivered: eb('delivered', '-', 1), failed: eb('failed', '+', 1) }))
      .where('account_id', '=', failed.account_id)
      .where('env', '=', failed.env)
      .where('period_start', '=', failed.period_start)
      .where('delivered', '>', 0)
      .execute();
    await recordSettlementEvents(trx, failed, { status: 'failed', ...refusal });
    return { kind: 'failed', message: failed, deliveredAt: Number(found.delivered_at) };
  });
  if (result.kind !== 'failed') return result;
  if (result.message.sender_key) await takeBackSent(db, result.message, result.message.sender_key, result.deliveredAt!);
  return { kind: 'failed', message: result.message };
}

/** What the delivery counted for its sender, taken back: its place under the daily cap and its `sent_today` (of the day it was delivered on). */
async function takeBackSent(db: Kysely<Database>, message: MessageRow, senderKey: string, deliveredAt: number): Promise<void> {
  await releaseSenderPlace(db, { senderKey, messageId: message.id });
  await db
    .updateTable('sender_records')
    .set((eb) => ({ sent_today: eb('sent_today', '-', 1) }))
    .where('sender_key', '=', senderKey)
    .where('platform', '=', message.platform)
    .where('account_id', '=', message.account_id)
    .where('env', '=', message.env)
    .where('sent_day', '=', utcDay(deliveredAt))
    .where('sent_today', '>', 0)
    .execute();
}
