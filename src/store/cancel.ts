import type { Kysely } from 'kysely';
import { messageStatusView } from '../core/public-views.js';
import { dbNow } from './dialect.js';
import { enqueueEvent } from './webhook-outbox.js';
import type { MessageRow } from './messages.js';
import type { Database } from './schema.js';

/** Why a note was canceled, as voice_note.canceled tells it: by the API or the dashboard, by its recipient's reply (cancel_on_reply), or because its recipient is on the suppression list. */
export type CancelReason = 'requested' | 'replied' | 'suppressed';

export type CancelOutcome =
  /** `sent`: the usage row's count once this note was given back (undefined when it was not given back, or the row is gone). */
  | { kind: 'canceled'; message: MessageRow; sent: number | undefined }
  | { kind: 'not_found' }
  | { kind: 'not_cancelable'; status: string };

/**
 * Takes back a note no worker has taken yet: only a `queued` message (waiting for its first attempt,
 * for its send_at, or for a retry) becomes `canceled`. A worker's claim moves a message to
 * `processing` in one statement (on PostgreSQL under a row lock, skipping rows locked here), so the
 * claim and this update cannot both succeed: whichever writes first wins, the other finds the status
 * changed. In the same transaction its sealed credentials are erased and voice_note.canceled is put
 * in the webhook outbox, and, when no attempt of it ever reached the platform (`platform_reached` 0),
 * the note is given back to the monthly quota (usage `sent` and its platform's count go down by one).
 * A note waiting for a retry after a timeout at the platform may have been delivered all the same:
 * that one stays counted.
 */
export async function cancelMessage(db: Kysely<Database>, owner: { accountId: string; env: string }, id: string): Promise<CancelOutcome> {
  return db.transaction().execute(async (trx) => {
    const now = dbNow(trx);
    const canceled = await trx
      .updateTable('messages')
      .set({ status: 'canceled', canceled_at: now, cancel_reason: 'requested', updated_at: now, credentials: null, lease_owner: null, lease_expires_at: null })
      .where('id', '=', id)
      .where('account_id', '=', owner.accountId)
      .where('env', '=', owner.env)
      .where('status', '=', 'queued')
      .returningAll()
      .executeTakeFirst();
    if (!canceled) {
      const found = await trx
        .selectFrom('messages')
        .select('status')
        .where('id', '=', id)
        .where('account_id', '=', owner.accountId)
        .where('env', '=', owner.env)
        .executeTakeFirst();
      return found ? { kind: 'not_cancelable', status: found.status } : { kind: 'not_found' };
    }
    const sent = await giveBackCanceled(trx, canceled, 'requested');
    return { kind: 'canceled', message: canceled, sent };
  });
}

/**
 * What follows a cancel, in its transaction: voice_note.canceled, with its reason, goes in the outbox, and
 * the note is given back to the monthly quota (usage `sent` and its platform's count go down by one)
 * unless an attempt reached the platform. Returns the usage row's count after it (undefined when it was
 * not given back, or the row is gone).
 */
export async function giveBackCanceled(trx: Kysely<Database>, canceled: MessageRow, reason: CancelReason): Promise<number | undefined> {
  const at = Number(canceled.canceled_at ?? Date.now());
  const data = { ...messageStatusView(canceled), cancel_reason: reason };
  await enqueueEvent(trx, { accountId: canceled.account_id, env: canceled.env, type: 'voice_note.canceled', data, at });
  // A note an earlier attempt took to the platform may have gone out (a timeout says nothing): it stays counted.
  if (Number(canceled.platform_reached ?? 0) !== 0) return undefined;
  const usage = { account: canceled.account_id, env: canceled.env, period: canceled.period_start };
  const counted = await trx
    .updateTable('usage_periods')
    .set((eb) => ({ sent: eb('sent', '-', 1) }))
    .where('account_id', '=', usage.account)
    .where('env', '=', usage.env)
    .where('period_start', '=', usage.period)
    .where('sent', '>', 0)
    .returning('sent')
    .executeTakeFirst();
  await trx
    .updateTable('usage_by_platform')
    .set((eb) => ({ sent: eb('sent', '-', 1) }))
    .where('account_id', '=', usage.account)
    .where('env', '=', usage.env)
    .where('period_start', '=', usage.period)
    .where('platform', '=', canceled.platform)
    .where('sent', '>', 0)
    .execute();
  return counted ? Number(counted.sent) : undefined;
}
