import { Type, type Static } from '@sinclair/typebox';
import { PLATFORM_NAMES } from '../platforms/registry.js';
import { WAIT_REASONS } from '../message-log/views.js';

/** Response and request shapes: validation, serialisation (no extra fields leak) and OpenAPI from one place. */
const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC timestamp' });
const PlatformName = Type.String({ enum: [...PLATFORM_NAMES] });

export const ErrorEnvelope = Type.Object(
  {
    error: Type.Object({
      code: Type.String(),
      message: Type.String(),
      details: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
    }),
  },
  { $id: 'Error' },
);

export const SendBody = Type.Object({
  platform: Type.String({ description: PLATFORM_NAMES.join(', ') }),
  recipient: Type.String({ description: 'Platform-specific recipient identifier' }),
  audio_url: Type.String({ description: 'Public http(s) URL of the audio file' }),
  session: Type.Object(
    {
      proxy: Type.Optional(
        Type.Union([Type.String(), Type.Null()], {
          description:
            "Telegram bots and LinkedIn cookies: this sender's own proxy, http://, https:// (HTTP CONNECT), socks5:// or socks5h://, with optional user:password@. Checked (one connection to the platform's host through it) and kept for the sender's later sends; null or omitted keeps the one it has",
        }),
      ),
    },
    { additionalProperties: true, description: 'Platform credentials: li_at + csrf_token, bot_token, or session_id; and proxy (Telegram bots and LinkedIn cookies)' },
  ),
  // null means "not given": many clients serialise an unset optional field that way.
  duration: Type.Optional(Type.Union([Type.Number(), Type.Null()], { description: 'Seconds; detected when omitted or null' })),
  caption: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'Telegram only; null is the same as omitted' })),
  send_at: Type.Optional(
    Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'Schedule the send: ISO 8601 with Z or an offset, at most 5 minutes past and 30 days ahead; null is the same as omitted (at once)',
    }),
  ),
  recording_indicator: Type.Optional(
    Type.Union([Type.Boolean(), Type.Null()], {
      description: 'Show the platform\'s "recording…" indicator for about the note\'s length (at most 30 s) before it (Telegram, WhatsApp); default false',
    }),
  ),
  listen: Type.Optional(
    Type.Union([Type.Boolean(), Type.Null()], {
      description:
        "Telegram: hear this bot's replies (its updates are consumed by voicenote for 30 days after its last note: use a dedicated bot). LinkedIn: the session is kept sealed for 14 days after its last note; LinkedIn's realtime event stream is kept open with it (replies at once, the recipient's seen events as read receipts) and the conversations its notes went into are also read at growing intervals. Default false",
    }),
  ),
  cancel_on_reply: Type.Optional(
    Type.Union([Type.Boolean(), Type.Null()], {
      description: 'With send_at only: a reply from the recipient to this sender before the note is sent cancels it (status canceled); default false',
    }),
  ),
  recipient_time_zone: Type.Optional(
    Type.Union([Type.String(), Type.Null()], {
      description:
        "The recipient's IANA time zone (e.g. America/New_York): the account's send window on this platform then applies in this zone as well as its own, and the note goes only while both are open. A window never open in both at once: 422. Without a send window it changes nothing; null is the same as omitted",
    }),
  ),
  dry_run: Type.Optional(
    Type.Union([Type.Boolean(), Type.Null()], {
      description:
        'true: check everything (body, sender and its health, quota, daily rhythm, recipient where cheap, the audio fetched and probed) and answer 200 with each check, storing, sending and counting nothing; default false',
    }),
  ),
});
export type SendBody = Static<typeof SendBody>;

export const SentMessage = Type.Object({
  id: Type.String(),
  status: Type.String(),
  platform: PlatformName,
  recipient: Type.String(),
  created_at: Timestamp,
});

const DryRunCheckResult = Type.Object({
  id: Type.String({ description: 'validation, sender, quota, daily_rhythm, recipient, audio (docs/sending.md, "Dry runs")' }),
  result: Type.String({ enum: ['pass', 'wait', 'fail', 'skip'], description: 'wait: the note would be accepted but wait (a daily cap, a resting sender)' }),
  detail: Type.Optional(Type.String()),
  error: Type.Optional(Type.Object({ code: Type.String(), message: Type.String() }, { description: 'On fail: the error the real send would meet' })),
  facts: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'What the check measured' })),
});

/** POST /send with dry_run: true (200). */
export const DryRunResult = Type.Object(
  {
    dry_run: Type.Boolean(),
    would_send: Type.Boolean({ description: 'No check failed' }),
    message: Type.Object(
      {
        platform: PlatformName,
        recipient: Type.String(),
        audio_url: Type.String(),
        sender_id: Type.Union([Type.String(), Type.Null()], { description: 'snd_… when the account has sent from this sender before' }),
        env: Type.String({ enum: ['test', 'live'] }),
        duration: Type.Union([Type.Number(), Type.Null()]),
        caption: Type.Union([Type.String(), Type.Null()]),
        send_at: Type.Union([Timestamp, Type.Null()]),
        cancel_on_reply: Type.Boolean(),
        recording_indicator: Type.Boolean(),
        recipient_time_zone: Type.Union([Type.String(), Type.Null()], { description: "The recipient's IANA zone the send window is read in; null when not given" }),
      },
      { description: 'What would be sent' },
    ),
    checks: Type.Array(DryRunCheckResult),
  },
  { description: 'A dry run: nothing stored, sent or counted against the quota' },
);

export const MessageStatus = Type.Object({
  id: Type.String(),
  status: Type.String({ enum: ['queued', 'processing', 'delivered', 'failed', 'canceled'] }),
  platform: PlatformName,
  recipient: Type.String(),
  created_at: Timestamp,
  delivered_at: Type.Union([Timestamp, Type.Null()]),
  error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]),
  next_attempt_at: Type.Optional(
    Type.String({ format: 'date-time', description: "Only while a queued note waits (see waiting_for): when it is due, e.g. its send window's opening" }),
  ),
  waiting_for: Type.Optional(
    Type.String({
      enum: [...WAIT_REASONS],
      description:
        'Only while a queued note waits for something other than a retry: send_window (the account\'s send window on the platform is closed: docs/sending.md, "Send windows"), daily_cap, recording_indicator, sender_rest or sender_restricted',
    }),
  ),
});

export const Usage = Type.Object({
  plan: Type.String(),
  period_start: Timestamp,
  period_end: Timestamp,
  usage: Type.Object({
    total_sent: Type.Integer(),
    total_delivered: Type.Integer(),
    total_failed: Type.Integer(),
    by_platform: Type.Object(Object.fromEntries(PLATFORM_NAMES.map((name) => [name, Type.Integer()]))),
  }),
  limits: Type.Object({
    monthly_quota: Type.Integer(),
    remaining: Type.Integer(),
    rate_limit_per_minute: Type.Integer(),
  }),
});

const SessionStatus = Type.String({ enum: ['qr_pending', 'connected', 'disconnected', 'qr_expired'] });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

// One of the two codes: `qr_code` without a body (as always), `pairing_code` when a phone number was given.
export const CreatedWhatsappSession = Type.Object({
  session_id: Type.String(),
  qr_code: Type.Optional(Type.String({ description: 'PNG image as a data URI; present when no phone_number was given' })),
  pairing_code: Type.Optional(
    Type.String({ description: 'Present when phone_number was given: the 8 characters to type on the phone under Linked devices → Link with phone number instead' }),
  ),
  status: SessionStatus,
});

/** Marks a route whose body may be left out entirely (the OpenAPI plugin declares every body required). */
export const OPTIONAL_BODY = 'x-optional-body';

export const CreateWhatsappSessionBody = Type.Object(
  {
    phone_number: Type.Optional(
      Type.String({ description: 'Link by pairing code instead of a QR code: the phone number of the WhatsApp account, digits with country code, no "+"' }),
    ),
    proxy: Type.Optional(
      Type.String({
        description:
          "The session's own proxy (docs/proxies.md): http://, https:// (HTTP CONNECT), socks5:// or socks5h://, with optional user:password@, e.g. socks5h://user:secret@proxy.example:1080. Its socket (the linking too) and media uploads go through it. Checked first (one connection through it to WhatsApp Web's host: 422 proxy_unreachable or proxy_auth_failed); sealed at rest; GET /senders shows it as scheme://host:port",
      }),
    ),
  },
  { description: 'Optional: without a body (or without phone_number) the session is linked by QR code, directly (or through OUTBOUND_PROXY)' },
);

export const WhatsappSession = Type.Object({
  session_id: Type.String(),
  status: SessionStatus,
  phone_number: Type.Union([Type.String(), Type.Null()]),
  created_at: Timestamp,
  last_connected_at: NullableTimestamp,
});

export const WhatsappSessionListItem = Type.Object({
  id: Type.String(),
  phone_number: Type.Union([Type.String(), Type.Null()]),
  status: SessionStatus,
  created_at: Timestamp,
  last_connected_at: NullableTimestamp,
});

export const WhatsappSessionList = Type.Object({ sessions: Type.Array(WhatsappSessionListItem) });
export const Deleted = Type.Object({ deleted: Type.Boolean() });
export const SimulateBody = Type.Object({ event: Type.String({ description: 'scan, expire or disconnect' }) });

export const MessageIdParams = Type.Object({ message_id: Type.String() });
export const SessionIdParams = Type.Object({ session_id: Type.String() });

const errorResponses = (...statuses: number[]): Record<number, { $ref: string }> =>
  Object.fromEntries(statuses.map((status) => [status, { $ref: 'Error#' }]));

export const commonErrors = errorResponses(401, 429, 500, 503);
export const withErrors = (...statuses: number[]): Record<number, { $ref: string }> => ({ ...commonErrors, ...errorResponses(...statuses) });
