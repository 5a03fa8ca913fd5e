import { Type, type TSchema } from '@sinclair/typebox';
import { MessageListQuery } from '../messages.js';
import { CheckBody } from '../recipients.js';
import { MessageIdParams, SendBody } from '../schemas.js';
import { SenderListQuery } from '../senders.js';

/**
 * The tools of voicenote's MCP server (docs/mcp.md), the same for both transports. Each input schema is
 * the API's own (TypeBox is JSON Schema: the route's body, query or path schema, not a copy), and each
 * tool is one API request whose answer, or error envelope, is the tool's result.
 */

/** One request of the HTTP API, relative to /api/v1. */
export interface ApiCall {
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** What a transport gives the tools: the API, called with the client's own key. */
export interface ApiCaller {
  (call: ApiCall): Promise<{ status: number; body: unknown }>;
}

export interface Tool {
  name: string;
  description: string;
  inputSchema: { type: 'object'; properties?: Record<string, unknown>; required?: string[] };
  /** The API request the arguments make (the API validates them: a bad one gets its 400 or 422). */
  call(args: Record<string, unknown>): ApiCall;
}

/** A TypeBox schema as plain JSON Schema (TypeBox's own symbol keys dropped). */
const jsonSchema = (schema: TSchema): Tool['inputSchema'] => JSON.parse(JSON.stringify(schema)) as Tool['inputSchema'];

const withProperties = (schema: TSchema, extra: Record<string, TSchema>): Tool['inputSchema'] => {
  const base = jsonSchema(schema);
  return { ...base, properties: { ...base.properties, ...(jsonSchema(Type.Object(extra)).properties ?? {}) } };
};

/** The query string of a GET from the arguments given (strings, as the API's query schemas take them). */
function query(args: Record<string, unknown>, names: readonly string[]): string {
  const params = new URLSearchParams();
  for (const name of names) {
    const value = args[name];
    if (value !== undefined && value !== null) params.set(name, String(value));
  }
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

const messagePath = (args: Record<string, unknown>): string => `/messages/${encodeURIComponent(String(args.message_id ?? ''))}`;

/** send_voice_note: the POST /send body, plus dry_run (true unless false is given) and an idempotency key. */
const sendVoiceNote: Tool = {
  name: 'send_voice_note',
  description:
    'Send a pre-recorded audio file as a native voice note on LinkedIn, Telegram or WhatsApp (POST /send). ' +
    'A DRY RUN unless dry_run is false: it then checks everything (the body, the sender and its health, the monthly quota, the daily rhythm, ' +
    'the recipient where that is cheap, the audio fetched and probed) and sends and counts nothing. Call it first as a dry run, show the ' +
    'person the checks, and only then call it again with dry_run: false. A real send costs one note of the monthly quota and cannot be ' +
    'taken back once delivered (a queued or scheduled one can be canceled with cancel_voice_note). session is the sender: a WhatsApp ' +
    'session ({"session_id": "ws_…"}), a Telegram bot ({"bot_token": …}) or account ({"session_id": "ts_…"}), or LinkedIn cookies ' +
    '(li_at, csrf_token); list_senders shows the senders used before. Pass the same idempotency_key when retrying a real send.',
  inputSchema: withProperties(SendBody, {
    dry_run: Type.Boolean({ description: 'Default true: only check. false: really send (costs one note of the quota).', default: true }),
    idempotency_key: Type.String({ description: 'Idempotency-Key of the real send: a retry with the same key answers as the first one and sends nothing twice' }),
  }),
  call: (args) => {
    const { idempotency_key: idempotencyKey, dry_run: dryRun, ...body } = args;
    return {
      method: 'POST',
      path: '/send',
      body: { ...body, dry_run: dryRun !== false },
      ...(typeof idempotencyKey === 'string' && dryRun === false ? { headers: { 'idempotency-key': idempotencyKey } } : {}),
    };
  },
};

const getVoiceNote: Tool = {
  name: 'get_voice_note',
  description:
    'One voice note by id (msg_…, from send_voice_note or list_voice_notes): its status (queued, processing, delivered, failed, canceled), ' +
    'error, delivery attempts, audio, receipts (delivered, read, played where the platform says) and the recipient\'s replies. Read-only and free.',
  inputSchema: jsonSchema(MessageIdParams),
  call: (args) => ({ method: 'GET', path: messagePath(args) }),
};

const MESSAGE_FILTERS = Object.keys(MessageListQuery.properties);
const listVoiceNotes: Tool = {
  name: 'list_voice_notes',
  description:
    'The account\'s voice notes, newest first, filtered by status, platform, recipient, creation time or whether they were replied to ' +
    '(GET /messages). Page with starting_after (the last id of a page) while has_more is true. Read-only and free.',
  inputSchema: jsonSchema(MessageListQuery),
  call: (args) => ({ method: 'GET', path: `/messages${query(args, MESSAGE_FILTERS)}` }),
};

const cancelVoiceNote: Tool = {
  name: 'cancel_voice_note',
  description:
    'Cancel a voice note that no worker has taken yet (queued, scheduled with send_at, or waiting for a retry): it is never sent and is ' +
    'given back to the monthly quota. A note already sent or being sent cannot be canceled (error not_cancelable).',
  inputSchema: jsonSchema(MessageIdParams),
  call: (args) => ({ method: 'POST', path: `${messagePath(args)}/cancel` }),
};

const SENDER_FILTERS = Object.keys(SenderListQuery.properties);
const listSenders: Tool = {
  name: 'list_senders',
  description:
    'The account\'s senders (WhatsApp sessions, Telegram bots and accounts, LinkedIn cookies it has sent with) and their health: ok, resting, ' +
    'restricted, expired or disconnected, notes sent today and the daily cap (GET /senders). Use it to pick a healthy sender before sending. Read-only and free.',
  inputSchema: jsonSchema(SenderListQuery),
  call: (args) => ({ method: 'GET', path: `/senders${query(args, SENDER_FILTERS)}` }),
};

const checkRecipient: Tool = {
  name: 'check_recipient',
  description:
    'Ask the platform, as the sender, whether a recipient exists before sending (POST /recipients/check): exists true, false, or null when ' +
    'the platform did not say. Live checks count against the sender\'s small daily budget of checks (a kept answer is free): check the ' +
    'recipients you are about to send to, never a list.',
  inputSchema: jsonSchema(CheckBody),
  call: (args) => ({ method: 'POST', path: '/recipients/check', body: args }),
};

const getUsage: Tool = {
  name: 'get_usage',
  description: 'The plan, the current billing period, the notes sent, delivered and failed in it, and the monthly quota left (GET /usage). Read-only and free.',
  inputSchema: { type: 'object', properties: {} },
  call: () => ({ method: 'GET', path: '/usage' }),
};

export const TOOLS: readonly Tool[] = [sendVoiceNote, getVoiceNote, listVoiceNotes, cancelVoiceNote, listSenders, checkRecipient, getUsage];
