/**
 * How POST /send's body is described in the OpenAPI document: one shape per platform, told apart by
 * `platform` (a discriminated union), each with its own `session` and the fields that platform
 * takes, and nothing else. Generated clients then refuse a wrong pairing at compile time
 * (`platform: 'signal'`, a Telegram body with a LinkedIn session, a caption on WhatsApp).
 *
 * Only the document says this. The route's runtime schema stays permissive on purpose, so that what
 * the API answers to a wrong body does not change: an unknown platform is 400 invalid_request
 * ("platform must be one of …"), a session problem 422 invalid_parameter naming details.field, and
 * a field it does not know is 400 invalid_request naming it.
 */

type Schema = Record<string, unknown>;

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const nullable = (schema: Schema, description: string): Schema => ({ anyOf: [schema, { type: 'null' }], description });

const audioUrl: Schema = { type: 'string', format: 'uri', maxLength: 2048, description: 'http(s) URL of the audio file, on a public address' };
const duration = nullable({ type: 'number', exclusiveMinimum: 0 }, 'Seconds; detected from the file when omitted or null');
const sendAt: Schema = {
  type: 'string',
  format: 'date-time',
  description: 'When to send it (ISO 8601 with Z or an offset); omitted: at once',
};
const recordingIndicator: Schema = {
  type: 'boolean',
  description: 'Show "recording a voice message…" to the recipient for a moment before the note arrives',
};

const cancelOnReply: Schema = {
  type: 'boolean',
  description: 'With send_at only: a reply from the recipient to this sender before the note is sent cancels it (status canceled, cancel_reason "replied")',
};

const dryRunField: Schema = {
  type: 'boolean',
  description: 'Check everything and answer 200 with each check (docs/sending.md, "Dry runs"): nothing is stored, sent or counted against the quota',
};

const recipientTimeZone: Schema = {
  type: 'string',
  description: "The recipient's IANA time zone (e.g. America/New_York): the account's send window on this platform then applies in this zone too (docs/sending.md, \"Send windows\")",
};

const proxyField: Schema = {
  type: 'string',
  description: "This sender's own proxy (docs/proxies.md): http://, https:// (HTTP CONNECT), socks5:// or socks5h://, with optional user:password@; checked, then kept for its later sends",
};

function sendShape(platform: string, fields: { recipient: Schema; session: string; extra?: Record<string, Schema> }): Schema {
  return {
    type: 'object',
    additionalProperties: false,
    required: ['platform', 'recipient', 'audio_url', 'session'],
    properties: {
      platform: { type: 'string', const: platform },
      recipient: fields.recipient,
      audio_url: audioUrl,
      session: ref(fields.session),
      duration,
      send_at: sendAt,
      cancel_on_reply: cancelOnReply,
      recipient_time_zone: recipientTimeZone,
      dry_run: dryRunField,
      ...fields.extra,
    },
  };
}

/** The named schemas the union is made of (components.schemas of the document). */
export const SEND_SCHEMAS: Record<string, Schema> = {
  LinkedinSession: {
    type: 'object',
    additionalProperties: false,
    required: ['li_at', 'csrf_token'],
    description: "The browser session the note is sent from: its li_at cookie and JSESSIONID (as csrf_token), and that browser's User-Agent and cookies",
    properties: {
      li_at: { type: 'string', description: 'The li_at cookie' },
      csrf_token: { type: 'string', description: 'The JSESSIONID cookie, "ajax:…"' },
      user_agent: { type: 'string', description: 'The User-Agent of the browser the cookies come from' },
      cookies: { type: 'string', description: "That browser's whole Cookie header for linkedin.com (name=value; …)" },
      proxy: proxyField,
    },
  },
  TelegramSession: {
    oneOf: [ref('TelegramBotSession'), ref('TelegramAccountSession')],
    description: 'A bot (bot_token) or a Telegram account linked with POST /telegram/sessions (session_id); never both',
  },
  TelegramBotSession: {
    type: 'object',
    additionalProperties: false,
    required: ['bot_token'],
    properties: { bot_token: { type: 'string', description: 'The bot token from @BotFather, "<digits>:<35+ of A-Za-z0-9_->"' }, proxy: proxyField },
  },
  TelegramAccountSession: {
    type: 'object',
    additionalProperties: false,
    required: ['session_id'],
    properties: { session_id: { type: 'string', description: 'A connected Telegram account session of this account and environment, "ts_…"' } },
  },
  WhatsappSession: {
    type: 'object',
    additionalProperties: false,
    required: ['session_id'],
    properties: { session_id: { type: 'string', description: 'A connected WhatsApp session of this account and environment, "ws_…"' } },
  },
  SendLinkedin: sendShape('linkedin', {
    recipient: { type: 'string', description: 'Public profile id (jane-smith-a1b2c3), profile URL or urn:li:fsd_profile:…' },
    session: 'LinkedinSession',
    extra: {
      listen: {
        type: 'boolean',
        description:
          "Hear the recipient's replies: voicenote keeps this session (sealed) for 14 days after its last note and reads the conversations it wrote into at growing intervals",
      },
    },
  }),
  SendTelegram: sendShape('telegram', {
    recipient: {
      type: 'string',
      description: 'Bots: integer chat id (may be negative) or @channelusername. Accounts: @username, a user id the account has talked to, or a phone number with country code (digits, no +)',
    },
    session: 'TelegramSession',
    extra: {
      caption: nullable({ type: 'string', maxLength: 1024 }, 'Shown under the voice note; null is the same as omitted'),
      recording_indicator: recordingIndicator,
      listen: {
        type: 'boolean',
        description: "Hear this bot's replies: voicenote long-polls its updates for 30 days after its last note (use a bot dedicated to voicenote; a bot with a webhook cannot be listened to)",
      },
    },
  }),
  SendWhatsapp: sendShape('whatsapp', {
    recipient: { type: 'string', description: 'Phone number with country code, 7–15 digits, no +' },
    session: 'WhatsappSession',
    extra: { recording_indicator: recordingIndicator },
  }),
  SendRequest: {
    oneOf: [ref('SendLinkedin'), ref('SendTelegram'), ref('SendWhatsapp')],
    discriminator: {
      propertyName: 'platform',
      mapping: { linkedin: '#/components/schemas/SendLinkedin', telegram: '#/components/schemas/SendTelegram', whatsapp: '#/components/schemas/SendWhatsapp' },
    },
    description: 'One voice note; the fields depend on the platform',
  },
};

type Document = { paths?: Record<string, Record<string, Schema>>; components?: { schemas?: Record<string, Schema> } };

/** Puts the union in the document: the send operation's body refers to SendRequest. */
export function describeSendBody<T>(document: T, sendPath: string): T {
  const doc = document as Document;
  const operation = doc.paths?.[sendPath]?.post as { requestBody?: { content?: Record<string, { schema?: Schema }> } } | undefined;
  const json = operation?.requestBody?.content?.['application/json'];
  if (!json) return document;
  json.schema = ref('SendRequest');
  doc.components ??= {};
  doc.components.schemas = { ...doc.components.schemas, ...SEND_SCHEMAS };
  return document;
}
