import { iso } from './public-views.js';

/**
 * The public shapes of a Telegram account session (`ts_…`), shown by the API and in the body of
 * `telegram_session.updated`. The inputs are the columns the shapes read.
 */
export interface TelegramSessionFields {
  id: string;
  status: string;
  user_id: string | null;
  username: string | null;
  phone_number: string | null;
  created_at: number;
  last_connected_at: number | null;
}

/** A linked account as people know it: its @username, else its +phone number; null before it is linked. */
export const telegramAccountLabel = (row: Pick<TelegramSessionFields, 'username' | 'phone_number'>): string | null =>
  row.username ? `@${row.username}` : row.phone_number ? `+${row.phone_number}` : null;

const isoOrNull = (ms: number | null): string | null => (ms === null ? null : iso(ms));

export const telegramSessionView = (row: TelegramSessionFields) => ({
  session_id: row.id,
  status: row.status,
  user_id: row.user_id,
  username: row.username,
  phone_number: row.phone_number,
  created_at: iso(row.created_at),
  last_connected_at: isoOrNull(row.last_connected_at),
});

export const telegramSessionListItemView = (row: TelegramSessionFields) => ({
  id: row.id,
  status: row.status,
  user_id: row.user_id,
  username: row.username,
  phone_number: row.phone_number,
  created_at: iso(row.created_at),
  last_connected_at: isoOrNull(row.last_connected_at),
});
