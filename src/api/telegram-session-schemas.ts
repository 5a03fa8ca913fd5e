import { Type } from '@sinclair/typebox';

/** The shapes of /telegram/sessions (Telegram accounts linked by QR code). */

const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC timestamp' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);
const NullableString = Type.Union([Type.String(), Type.Null()]);
const TelegramSessionStatus = Type.String({ enum: ['qr_pending', 'password_needed', 'connected', 'disconnected', 'qr_expired'] });

export const CreatedTelegramSession = Type.Object({
  session_id: Type.String({ description: 'ts_ followed by 24 characters' }),
  status: TelegramSessionStatus,
  qr_code: Type.String({ description: 'PNG image as a data URI of tg://login?token=…; scan it in Telegram under Settings → Devices → Link Desktop Device' }),
  created_at: Timestamp,
});

/** Linking takes no fields: no body, `{}`, or null. Anything else that is not an object is refused as for WhatsApp sessions. */
export const CreateTelegramSessionBody = Type.Object(
  {
    proxy: Type.Optional(
      Type.String({
        description:
          "The account's own proxy (docs/proxies.md): socks5:// or socks5h:// only, with optional user:password@ (MTProto goes over TCP, which HTTP CONNECT proxies do not carry for it: http:// and https:// are 422 invalid_parameter). Its MTProto connection (the linking too) goes through it. Checked first (one connection through it to TELEGRAM_DC_ADDRESS: 422 proxy_unreachable or proxy_auth_failed); sealed at rest; GET /senders shows it as scheme://host:port",
      }),
    ),
  },
  { description: 'Optional: linking by QR code takes no other field (send no body, or {})' },
);

const fields = {
  status: TelegramSessionStatus,
  user_id: Type.Union([Type.String(), Type.Null()], { description: "The linked account's Telegram user id, once connected" }),
  username: Type.Union([Type.String(), Type.Null()], { description: 'Its @username without the @, when it has one' }),
  phone_number: NullableString,
  created_at: Timestamp,
  last_connected_at: NullableTimestamp,
};

export const TelegramSession = Type.Object({
  session_id: Type.String(),
  ...fields,
  qr_code: Type.Optional(Type.String({ description: 'While qr_pending: the QR code to show now (its token is renewed as it expires)' })),
});

export const TelegramSessionList = Type.Object({ sessions: Type.Array(Type.Object({ id: Type.String(), ...fields })) });

export const TelegramPasswordBody = Type.Object({
  password: Type.String({ minLength: 1, maxLength: 256, description: 'The cloud password (two-step verification); used once for the SRP check, never stored' }),
});

export const TelegramSimulateBody = Type.Object({ event: Type.String({ description: 'scan, scan_with_password, expire or disconnect' }) });
