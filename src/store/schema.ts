import type { Generated } from 'kysely';

/** Table shapes as stored. Every time is epoch milliseconds, so both dialects compare them alike. */
export interface AccountsTable {
  id: string;
  name: string;
  email: string | null;
  plan: string;
  rate_limit: number | null;
  quota: number | null;
  password_hash: string | null;
  is_owner: number;
  created_at: number;
}

export interface ApiKeysTable {
  id: string;
  account_id: string;
  env: string;
  prefix: string;
  secret_hash: string;
  replaces: string | null;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  last_used_at: number | null;
}

export interface MessagesTable {
  id: string;
  account_id: string;
  env: string;
  platform: string;
  recipient: string;
  audio_url: string;
  duration: number | null;
  caption: string | null;
  /** The send's `session` object, sealed; null once the message is settled. */
  credentials: string | null;
  /** The WhatsApp session (`ws_…`) of a whatsapp message, so a claim can route it to the session's holder; null otherwise. */
  whatsapp_session_id: string | null;
  status: string;
  error_code: string | null;
  error_message: string | null;
  attempts: number;
  next_attempt_at: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  period_start: number;
  created_at: number;
  updated_at: number;
  delivered_at: number | null;
}

export interface UsagePeriodsTable {
  account_id: string;
  env: string;
  period_start: number;
  sent: number;
  delivered: number;
  failed: number;
  linkedin: number;
  telegram: number;
  whatsapp: number;
}

export interface WhatsappSessionsTable {
  id: string;
  account_id: string;
  env: string;
  status: string;
  phone_number: string | null;
  qr_expires_at: number | null;
  auto_connect_at: number | null;
  /** Sealed creds of a live session (its signal keys are rows of whatsapp_keys). */
  auth_state: string | null;
  holder: string | null;
  holder_expires_at: number | null;
  created_at: number;
  updated_at: number;
  last_connected_at: number | null;
}

/** One signal key of a live WhatsApp session; `value` is sealed (BufferJSON inside). */
export interface WhatsappKeysTable {
  session_id: string;
  type: string;
  key_id: string;
  value: string;
}

export interface IdempotencyKeysTable {
  account_id: string;
  env: string;
  key: string;
  endpoint: string;
  request_hash: string;
  status_code: number;
  response_body: string;
  created_at: number;
}

export interface SchemaMigrationsTable {
  id: Generated<number>;
}

export interface Database {
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  messages: MessagesTable;
  usage_periods: UsagePeriodsTable;
  whatsapp_sessions: WhatsappSessionsTable;
  whatsapp_keys: WhatsappKeysTable;
  idempotency_keys: IdempotencyKeysTable;
}
