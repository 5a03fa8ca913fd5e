import type { Generated } from 'kysely';
import type { OptOutSettingsTable, SuppressionsTable } from './schema-suppressions.js';
import type { MessageRepliesTable, LinkedinListenersTable, LinkedinListenedConversationsTable, TelegramListenersTable, BlockedChatsTable, ListeningAccountsTable } from './schema-inbound.js';

export type { MessageRepliesTable, LinkedinListenersTable, LinkedinListenedConversationsTable, TelegramListenersTable, BlockedChatsTable, ListeningAccountsTable } from './schema-inbound.js';

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
  /** full, send or read (store/key-scopes.ts). */
  scope: string;
  /** JSON array of the senders the key may send from; null: any. */
  senders: string | null;
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
  /**
   * Process affinity key (see affinity_leases): only the process holding it may take the message while
   * its lease lasts (a platform session whose connection lives in one process); null for any process.
   */
  affinity: string | null;
  /** The X-Request-Id of the POST /send that created it, so its delivery log lines can be matched to the request. */
  request_id?: string | null;
  status: string;
  error_code: string | null;
  error_message: string | null;
  attempts: number;
  next_attempt_at: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  /**
   * Claims in a row that ended with no outcome written (the worker died or lost its lease); optional
   * because inserts leave it to its default, 0.
   */
  orphaned_claims?: number;
  /**
   * 1 once an attempt may have reached the platform (it called it, or its claim ended without an
   * outcome); 0 while none did. Optional because inserts leave it to its default, 0.
   */
  platform_reached?: number;
  period_start: number;
  created_at: number;
  updated_at: number;
  delivered_at: number | null;
  /** The id the platform gave the sent voice note (WhatsApp: the message key id its receipts name); null elsewhere. */
  platform_message_id?: string | null;
  /** The send's `send_at` (a scheduled send), as asked; null when sent at once. */
  send_at?: number | null;
  /** When the message was canceled (status `canceled`); null otherwise. */
  canceled_at?: number | null;
  /** Why: `requested` or `replied` (store/cancel.ts CancelReason); null otherwise and on notes canceled on reply before it was kept. */
  cancel_reason?: string | null;
  /** 1: show the platform's "recording…" indicator before the note; 0 or null: not (rows from before it, inserts that leave it out). */
  recording_indicator?: number | null;
  /** When the indicator was shown (database clock) and for how long: set once, so it is never shown twice. */
  indicator_started_at?: number | null;
  indicator_ms?: number | null;
  /** What a queued message waits for, when not a retry: `daily_cap` or `recording_indicator`; and until when. */
  wait_reason?: string | null;
  waited_until?: number | null;
  /** The UTC day (epoch ms of its midnight) whose count under the sender's cap holds this message's place. */
  cap_day?: number | null;
  /**
   * The platform's own name for the note's sender (platform.senderKey: a WhatsApp session id, a hash of
   * a bot token or an li_at; never the credential), set at acceptance; null on platforms that name none
   * and on rows from before it.
   */
  sender_key?: string | null;
  /** When its recipient first answered it (message_replies); null until then and on rows from before it. */
  first_replied_at?: number | null;
  /** 1: a reply from its recipient to its sender, before a worker takes it, cancels it (`cancel_on_reply`); 0 or null: not. */
  cancel_on_reply?: number | null;
  /** The note's `recipient_time_zone` (an IANA zone): its send window applies in this zone too; null when not given. */
  recipient_time_zone?: string | null;
}

/** An account's sending rhythm on one platform (no row: the platform's defaults; daily_cap null: no cap). */
export interface RhythmSettingsTable {
  account_id: string;
  platform: string;
  daily_cap: number | null;
  warmup_start: number | null;
  warmup_days: number | null;
  updated_at: number;
}

/** An account's send window on one platform (migration 030; no row: no window). */
export interface SendWindowsTable {
  account_id: string;
  platform: string;
  /** Weekdays as "mon,tue,…". */
  days: string;
  start_time: string;
  end_time: string;
  time_zone: string;
  updated_at: number;
}

/** Notes counted under one sender's cap on one UTC day. */
export interface SenderDaysTable {
  sender_key: string;
  day: number;
  sent: number;
}

/** The UTC day a sender was first seen: its warm-up counts from there. */
export interface SendersTable {
  sender_key: string;
  first_day: number;
}

/** A sender's health (migration 016, store/senders.ts). */
export interface SenderRecordsTable {
  id: string;
  account_id: string;
  env: string;
  platform: string;
  sender_key: string;
  kind: string;
  label: string | null;
  status: string;
  reason: string | null;
  until: number | null;
  failure_code: string | null;
  last_sent_at: number | null;
  sent_day: number | null;
  sent_today: number;
  /** WhatsApp's new-chat message cap as last read (JSON, store/new-chat-cap.ts); null elsewhere or before. */
  new_chat_cap?: string | null;
  /** Live recipient checks asked on the UTC day `checks_day` (store/recipient-check-budget.ts). */
  checks_day?: number | null;
  checks_today?: number;
  /** The sender's own proxy URL, credentials included, sealed (docs/proxies.md); null: none. */
  proxy_sealed?: string | null;
  /** What may be shown of that proxy: scheme://host:port, never its user name or password. */
  proxy_shown?: string | null;
  created_at: number;
  updated_at: number;
}

/** What a platform said of a recipient, per sender (store/recipient-checks.ts). */
export interface RecipientChecksTable {
  sender_key: string;
  recipient: string;
  exists: number;
  address: string | null;
  checked_at: number;
}

export interface UsagePeriodsTable {
  account_id: string;
  env: string;
  period_start: number;
  sent: number;
  delivered: number;
  failed: number;
}

/** Sends of one period per platform, one row per platform name that was used. */
export interface UsageByPlatformTable {
  account_id: string;
  env: string;
  period_start: number;
  platform: string;
  sent: number;
}

/** Which process holds an affinity key (an opaque resource name) and until when. */
export interface AffinityLeasesTable {
  key: string;
  holder: string;
  expires_at: number;
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
  created_at: number;
  updated_at: number;
  last_connected_at: number | null;
}

/** A Telegram account linked by QR code (`ts_…`); `auth_key` is the sealed MTProto authorization. */
export interface TelegramSessionsTable {
  id: string;
  account_id: string;
  env: string;
  status: string;
  user_id: string | null;
  username: string | null;
  phone_number: string | null;
  auth_key: string | null;
  /** Sealed: the tg://login URL the QR code shows now (renewed while it waits). */
  qr_payload: string | null;
  qr_expires_at: number | null;
  auto_connect_at: number | null;
  /** Telegram answered PEER_FLOOD: no sending before then. */
  resting_until: number | null;
  created_at: number;
  updated_at: number;
  last_connected_at: number | null;
}

/** A linked Telegram account's update state (core.telegram.org/api/updates) and the length of its last PEER_FLOOD rest. */
export interface TelegramUpdateStatesTable {
  session_id: string;
  pts: number | null;
  qts: number | null;
  date: number | null;
  seq: number | null;
  peer_flood_rest_ms: number | null;
  updated_at: number;
}

/** A recipient of a Telegram account's notes, resolved once: Telegram's user id and the account's access hash for them. */
export interface TelegramPeersTable {
  session_id: string;
  recipient: string;
  user_id: string;
  access_hash: string;
  resolved_at: number;
}

/** One signal key of a live WhatsApp session; `value` is sealed (BufferJSON inside). */
export interface WhatsappKeysTable {
  session_id: string;
  type: string;
  key_id: string;
  value: string;
}

/**
 * A voice note a live WhatsApp session sent, for answering resend requests: `content` is the sealed
 * message Baileys sent (protobuf bytes, base64, inside); `remote_jid` the chat (`<digits>@s.whatsapp.net`).
 */
export interface WhatsappSentMessagesTable {
  session_id: string;
  remote_jid: string;
  message_id: string;
  content: string;
  created_at: number;
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

export interface WebhookEndpointsTable {
  id: string;
  account_id: string;
  env: string;
  url: string;
  description: string | null;
  /** JSON array of event types. */
  events: string;
  /** `whsec_…`, sealed; the one before a roll stays valid (also sealed) until previous_secret_expires_at. */
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: number | null;
  created_at: number;
  updated_at: number;
}

/** The outbox: one row per event, written in the transaction of what it reports. */
export interface WebhookEventsTable {
  id: string;
  account_id: string;
  env: string;
  type: string;
  /** The exact JSON body every delivery of the event sends (and signs). */
  payload: string;
  /** A test event goes to this endpoint only; null: every subscribed endpoint. */
  endpoint_id: string | null;
  /** Not handed to endpoints before this time (receipts the sandbox plays later). */
  available_at: number;
  /** When deliveries were created for it; null while pending. */
  fanned_out_at: number | null;
  created_at: number;
}

export interface WebhookDeliveriesTable {
  id: string;
  event_id: string;
  endpoint_id: string;
  account_id: string;
  env: string;
  status: string;
  attempts: number;
  next_attempt_at: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  completed_at: number | null;
}

export interface WebhookAttemptsTable {
  id: string;
  delivery_id: string;
  attempt: number;
  started_at: number;
  duration_ms: number;
  status_code: number | null;
  response_excerpt: string | null;
  error: string | null;
}

export interface MessageAttemptsTable {
  id: string;
  message_id: string;
  attempt: number;
  started_at: number;
  ended_at: number;
  /** delivered | retry | failed | handed_back */
  outcome: string;
  error_code: string | null;
  error_message: string | null;
  next_attempt_at: number | null;
}

/** The audio of a message's last attempt: as detected at the source and as converted for the platform. */
export interface MessageAudioTable {
  message_id: string;
  source_format: string | null;
  source_codec: string | null;
  source_duration: number | null;
  source_size: number | null;
  /** With converted_format, names the converted file in the audio cache (while it is kept there). */
  source_sha256: string | null;
  converted_format: string;
  converted_mime: string;
  converted_duration: number;
  converted_size: number;
  /** JSON array of 64 bars, 0–100. */
  waveform: string | null;
  updated_at: number;
}

export interface MessageReceiptsTable {
  message_id: string;
  /** delivered_to_device | read | played */
  kind: string;
  at: number;
  /** whatsapp | sandbox */
  source: string;
}

/** A dashboard sign-in: the cookie's token is known only by its SHA-256. */
export interface DashboardSessionsTable {
  token_hash: string;
  account_id: string;
  /** The environment (test or live) the dashboard acts in for this sign-in. */
  env: string;
  created_at: number;
  expires_at: number;
}

/** Facts about this installation, by name (e.g. the check value of SECRET_KEY). */
export interface InstanceSettingsTable {
  name: string;
  value: string;
}

export interface SchemaMigrationsTable {
  id: Generated<number>;
}


export interface Database {
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  messages: MessagesTable;
  usage_periods: UsagePeriodsTable;
  usage_by_platform: UsageByPlatformTable;
  affinity_leases: AffinityLeasesTable;
  whatsapp_sessions: WhatsappSessionsTable;
  telegram_sessions: TelegramSessionsTable;
  telegram_update_states: TelegramUpdateStatesTable;
  telegram_peers: TelegramPeersTable;
  whatsapp_keys: WhatsappKeysTable;
  whatsapp_sent_messages: WhatsappSentMessagesTable;
  idempotency_keys: IdempotencyKeysTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  message_attempts: MessageAttemptsTable;
  message_audio: MessageAudioTable;
  message_receipts: MessageReceiptsTable;
  message_replies: MessageRepliesTable;
  telegram_listeners: TelegramListenersTable;
  linkedin_listeners: LinkedinListenersTable;
  linkedin_listened_conversations: LinkedinListenedConversationsTable;
  listening_accounts: ListeningAccountsTable;
  blocked_chats: BlockedChatsTable;
  dashboard_sessions: DashboardSessionsTable;
  instance_settings: InstanceSettingsTable;
  rhythm_settings: RhythmSettingsTable;
  send_windows: SendWindowsTable;
  sender_days: SenderDaysTable;
  senders: SendersTable;
  sender_records: SenderRecordsTable;
  recipient_checks: RecipientChecksTable;
  suppressions: SuppressionsTable;
  opt_out_settings: OptOutSettingsTable;
}
