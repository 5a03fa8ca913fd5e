/**
 * The public shapes of a message and of a WhatsApp session: exactly the fields the API shows. They live
 * at the bottom of the import order because every layer shows them: the API answers with them, the
 * store's webhook outbox puts them in event bodies, and the message log builds on them. The inputs are
 * the columns each shape reads, so any row that has them will do.
 */

/** Epoch milliseconds as the API writes times: ISO 8601 in UTC. */
export const iso = (ms: number): string => new Date(Number(ms)).toISOString();
const isoOrNull = (ms: number | null): string | null => (ms === null ? null : iso(ms));

/** The columns of a message that its status lookup shows. */
export interface MessageStatusFields {
  id: string;
  status: string;
  platform: string;
  recipient: string;
  created_at: number;
  delivered_at: number | null;
  error_code: string | null;
  error_message: string | null;
}

/** The columns of a WhatsApp session that its views show. */
export interface WhatsappSessionFields {
  id: string;
  status: string;
  phone_number: string | null;
  created_at: number;
  last_connected_at: number | null;
}

export const sentMessageView = (row: Pick<MessageStatusFields, 'id' | 'status' | 'platform' | 'recipient' | 'created_at'>) => ({
  id: row.id,
  status: row.status,
  platform: row.platform,
  recipient: row.recipient,
  created_at: iso(row.created_at),
});

export const messageStatusView = (row: MessageStatusFields) => ({
  ...sentMessageView(row),
  delivered_at: row.status === 'delivered' ? isoOrNull(row.delivered_at) : null,
  // An error kept from a retried attempt stays internal until the message has failed for good.
  error: row.status === 'failed' ? { code: row.error_code ?? 'platform_error', message: row.error_message ?? 'delivery failed' } : null,
});

export const whatsappSessionView = (row: WhatsappSessionFields) => ({
  session_id: row.id,
  status: row.status,
  phone_number: row.phone_number,
  created_at: iso(row.created_at),
  last_connected_at: isoOrNull(row.last_connected_at),
});

export const whatsappSessionListItemView = (row: WhatsappSessionFields) => ({
  id: row.id,
  phone_number: row.phone_number,
  status: row.status,
  created_at: iso(row.created_at),
  last_connected_at: isoOrNull(row.last_connected_at),
});

/** What kind of message a reply was (media content is never downloaded or kept). */
export const REPLY_TYPES = ['text', 'voice', 'audio', 'image', 'video', 'document', 'sticker', 'other'] as const;
export type ReplyType = (typeof REPLY_TYPES)[number];

/** The columns of a reply that its view shows. */
export interface ReplyFields {
  id: string;
  type: string;
  text: string | null;
  received_at: number;
}

/** A reply as the API and voice_note.replied show it. */
export const replyView = (row: ReplyFields) => ({ id: row.id, type: row.type, text: row.text, received_at: iso(row.received_at) });

/** The columns of a suppression list entry that its views show. */
export interface SuppressionFields {
  id: string;
  platform: string;
  recipient_key: string;
  source: string;
  reply_id: string | null;
  note: string | null;
  created_at: number;
}

/** An entry of the suppression list as the API, the CLI's --json and recipient.opted_out show it. */
export const suppressionView = (row: SuppressionFields) => ({
  id: row.id,
  platform: row.platform,
  recipient: row.recipient_key,
  source: row.source,
  reply_id: row.reply_id,
  note: row.note,
  created_at: iso(row.created_at),
});
