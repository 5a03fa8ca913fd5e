import type { Kysely } from 'kysely';
import type { Database } from '../../store/schema.js';
import { recordReceipt, type ReceiptKind } from '../../store/receipts.js';
import type { MessageStatusUpdate } from './socket.js';

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

/**
 * A live socket's `messages.update`: the status moves of messages this device sent, recorded as
 * receipts of ours. Updates of other messages (received ones, or sent from the phone itself) match none
 * of ours and change nothing.
 */
export async function recordWhatsappStatusUpdates(db: Kysely<Database>, updates: readonly MessageStatusUpdate[], at: number): Promise<void> {
  for (const { key, update } of updates) {
    const kind = receiptKindOfWhatsappStatus(update.status);
    if (!kind || key.fromMe === false || !key.id) continue;
    await recordReceipt(db, { platformMessageId: key.id, kind, at: receiptTime(update.messageTimestamp, at), source: 'whatsapp' });
  }
}

/**
 * When the recipient's device reported it: the receipt's own time, which matters for one WhatsApp held
 * while the session was offline and replays at the next connection (hours later, perhaps). Its whole
 * seconds are read as the end of that second, and never later than it arrived; without one, when it arrived.
 */
function receiptTime(seconds: number | null | undefined, arrivedAt: number): number {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds <= 0) return arrivedAt;
  return Math.min(seconds * 1000 + 999, arrivedAt);
}
