import type { MessageStatusRow } from '../store/hot-path.js';
import type { WhatsappSessionRow } from '../store/whatsapp-sessions.js';

/** Rows as the API shows them: exactly the reference's fields. */
export const iso = (ms: number): string => new Date(Number(ms)).toISOString();
const isoOrNull = (ms: number | null): string | null => (ms === null ? null : iso(ms));

export const sentMessageView = (row: Pick<MessageStatusRow, 'id' | 'status' | 'platform' | 'recipient' | 'created_at'>) => ({
  id: row.id,
  status: row.status,
  platform: row.platform,
  recipient: row.recipient,
  created_at: iso(row.created_at),
});

export const messageStatusView = (row: MessageStatusRow) => ({
  ...sentMessageView(row),
  delivered_at: row.status === 'delivered' ? isoOrNull(row.delivered_at) : null,
  // An error kept from a retried attempt stays internal until the message has failed for good.
  error: row.status === 'failed' ? { code: row.error_code ?? 'platform_error', message: row.error_message ?? 'delivery failed' } : null,
});

export const whatsappSessionView = (row: WhatsappSessionRow) => ({
  session_id: row.id,
  status: row.status,
  phone_number: row.phone_number,
  created_at: iso(row.created_at),
  last_connected_at: isoOrNull(row.last_connected_at),
});

export const whatsappSessionListItemView = (row: WhatsappSessionRow) => ({
  id: row.id,
  phone_number: row.phone_number,
  status: row.status,
  created_at: iso(row.created_at),
  last_connected_at: isoOrNull(row.last_connected_at),
});
