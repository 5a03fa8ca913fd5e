import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** How long a platform's answer about a recipient is kept before it is asked again. */
export const RECIPIENT_CHECK_TTL_MS = 30 * 24 * 60 * 60_000;

export interface RecipientCheckRow {
  exists: boolean;
  /** The platform's own address for the recipient (a WhatsApp JID), when it gave one. */
  address: string | null;
  checkedAt: number;
}

/** What the platform said of `recipient` to this sender within the last 30 days, if it was asked. */
export async function findRecipientCheck(db: Kysely<Database>, senderKey: string, recipient: string, now = Date.now()): Promise<RecipientCheckRow | undefined> {
  const row = await db
    .selectFrom('recipient_checks')
    .selectAll()
    .where('sender_key', '=', senderKey)
    .where('recipient', '=', recipient)
    .where('checked_at', '>', now - RECIPIENT_CHECK_TTL_MS)
    .executeTakeFirst();
  return row ? { exists: Number(row.exists) === 1, address: row.address, checkedAt: Number(row.checked_at) } : undefined;
}

export async function saveRecipientCheck(db: Kysely<Database>, senderKey: string, recipient: string, answer: { exists: boolean; address: string | null }, now = Date.now()): Promise<void> {
  const values = { exists: answer.exists ? 1 : 0, address: answer.address, checked_at: now };
  await db
    .insertInto('recipient_checks')
    .values({ sender_key: senderKey, recipient, ...values })
    .onConflict((oc) => oc.columns(['sender_key', 'recipient']).doUpdateSet(values))
    .execute();
}
