import type { Kysely } from 'kysely';
import { messageStatusView } from '../core/public-views.js';
import { insertReceipt } from './message-log.js';
import type { Database } from './schema.js';
import { enqueueEvent } from './webhook-outbox.js';

/** What a recipient's device reports about a sent voice note, in the order it happens. */
export const RECEIPT_KINDS = ['delivered_to_device', 'read', 'played'] as const;
export type ReceiptKind = (typeof RECEIPT_KINDS)[number];

const EVENT_OF: Partial<Record<ReceiptKind, 'voice_note.read' | 'voice_note.played'>> = { read: 'voice_note.read', played: 'voice_note.played' };

/**
 * Records what a device reported for the message the platform knows as `platformMessageId`, once per
 * kind (the first report wins; a repeated or late one changes nothing). A later stage implies the
 * earlier ones (a played note was read and reached the device), so a skipped report is filled in
 * at the same time. New read and played receipts go out as webhooks, committed with the receipt.
 * Returns the kinds that were new; none when no message of ours has that id.
 */
export async function recordReceipt(
  db: Kysely<Database>,
  report: { platformMessageId: string; kind: ReceiptKind; at: number; source: string },
): Promise<ReceiptKind[]> {
  return db.transaction().execute(async (trx) => {
    const message = await trx.selectFrom('messages').selectAll().where('platform_message_id', '=', report.platformMessageId).executeTakeFirst();
    if (!message) return [];
    const added: ReceiptKind[] = [];
    for (const kind of RECEIPT_KINDS.slice(0, RECEIPT_KINDS.indexOf(report.kind) + 1)) {
      if (!(await insertReceipt(trx, { message_id: message.id, kind, at: report.at, source: report.source }))) continue;
      added.push(kind);
      const type = EVENT_OF[kind];
      if (type) await enqueueEvent(trx, { accountId: message.account_id, env: message.env, type, data: messageStatusView(message), at: report.at });
    }
    return added;
  });
}

/** Remembers the id the platform gave a delivered message, so its receipts can find it. */
export async function savePlatformMessageId(db: Kysely<Database>, messageId: string, platformMessageId: string): Promise<void> {
  await db.updateTable('messages').set({ platform_message_id: platformMessageId }).where('id', '=', messageId).execute();
}
