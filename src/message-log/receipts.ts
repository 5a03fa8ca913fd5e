import type { Kysely } from 'kysely';
import { messageStatusView } from '../api/views.js';
import { insertReceipt } from '../store/message-log.js';
import type { Database } from '../store/schema.js';
import { enqueueEvent } from '../webhooks/events.js';
import type { MessageStatusUpdate } from '../platforms/whatsapp/socket.js';

/** What a recipient's device reports about a sent voice note, in the order it happens. */
export const RECEIPT_KINDS = ['delivered_to_device', 'read', 'played'] as const;
export type ReceiptKind = (typeof RECEIPT_KINDS)[number];

/**
 * WhatsApp's message status numbers (`messages.update` → `update.status`): DELIVERY_ACK 3, READ 4,
 * PLAYED 5. SERVER_ACK (2) only says WhatsApp's server has it, which `delivered` already means.
 */
export function receiptKindOfWhatsappStatus(status: unknown): ReceiptKind | undefined {
  switch (status) {
    case 3:
      return 'delivered_to_device';
    case 4:
      return 'read';
    case 5:
      return 'played';
    default:
      return undefined;
  }
}

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

/**
 * A live socket's `messages.update`: the status moves of messages this device sent, recorded as
 * receipts of ours at the time they arrive. Updates of other messages (received ones, or sent from
 * the phone itself) match none of ours and change nothing.
 */
export async function recordWhatsappStatusUpdates(db: Kysely<Database>, updates: readonly MessageStatusUpdate[], at: number): Promise<void> {
  for (const { key, update } of updates) {
    const kind = receiptKindOfWhatsappStatus(update.status);
    if (!kind || key.fromMe === false || !key.id) continue;
    await recordReceipt(db, { platformMessageId: key.id, kind, at, source: 'whatsapp' });
  }
}
