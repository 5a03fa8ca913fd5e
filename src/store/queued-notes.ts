import type { Kysely } from 'kysely';
import { dbNow } from './dialect.js';
import type { Database } from './schema.js';

/**
 * A sender's queued notes waiting past now made due now: all of them, or only those waiting for
 * `waitReason`. Scheduled ones (`send_at` ahead) keep their time.
 */
export async function makeQueuedNotesDue(db: Kysely<Database>, ref: { accountId: string; env: string; platform: string; senderKey: string }, waitReason?: string): Promise<void> {
  const now = dbNow(db);
  await db
    .updateTable('messages')
    .set({ next_attempt_at: now })
    .where('sender_key', '=', ref.senderKey)
    .where('account_id', '=', ref.accountId)
    .where('env', '=', ref.env)
    .where('platform', '=', ref.platform)
    .where('status', '=', 'queued')
    .$if(waitReason !== undefined, (qb) => qb.where('wait_reason', '=', waitReason!))
    .where('next_attempt_at', '>', now)
    .where((eb) => eb.or([eb('send_at', 'is', null), eb('send_at', '<=', now)]))
    .execute();
}
