import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { REPLY_TYPES } from '../core/public-views.js';
import { LogQueryError, MAX_PAGE_SIZE, MESSAGE_STATUSES } from '../message-log/query.js';
import { messageDetail, messageLogPage, WAIT_REASONS, CANCEL_REASONS } from '../message-log/views.js';
import type { Services } from '../services.js';
import { invalidParameter, notFound } from './errors.js';
import { MessageIdParams, withErrors } from './schemas.js';
import { ListeningView } from './listening.js';

const Timestamp = Type.String({ format: 'date-time' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);
const ErrorObject = Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]);

const ListItemFields = {
  id: Type.String(),
  status: Type.String({ enum: [...MESSAGE_STATUSES] }),
  platform: Type.String({ enum: ['linkedin', 'telegram', 'whatsapp'] }),
  recipient: Type.String(),
  created_at: Timestamp,
  delivered_at: NullableTimestamp,
  error: ErrorObject,
  attempt_count: Type.Integer({ description: 'Delivery attempts so far' }),
  updated_at: Timestamp,
  send_at: Type.Union([Timestamp, Type.Null()], { description: 'The time the send was scheduled for (send_at); null when sent at once' }),
};
const ListItem = Type.Object(ListItemFields);
const MessageList = Type.Object({ data: Type.Array(ListItem), has_more: Type.Boolean({ description: 'More messages past this page, in the direction paged' }) });

const Attempt = Type.Object({
  attempt: Type.Integer(),
  started_at: Timestamp,
  ended_at: Timestamp,
  outcome: Type.String({ enum: ['delivered', 'retry', 'failed', 'handed_back'] }),
  error: ErrorObject,
  next_attempt_at: NullableTimestamp,
});
const NullableNumber = Type.Union([Type.Number(), Type.Null()]);
const Audio = Type.Object({
  source: Type.Union([
    Type.Object({ format: Type.Union([Type.String(), Type.Null()]), codec: Type.Union([Type.String(), Type.Null()]), duration_seconds: NullableNumber, size_bytes: NullableNumber }),
    Type.Null(),
  ]),
  converted: Type.Union([
    Type.Object({
      format: Type.String(),
      mime_type: Type.String(),
      duration_seconds: Type.Number(),
      size_bytes: Type.Number(),
      waveform: Type.Array(Type.Number(), { description: '64 bars, 0–100' }),
      cached: Type.Boolean({ description: 'The converted file is still in the audio cache' }),
    }),
    Type.Null(),
  ]),
});
const Receipts = Type.Object({
  supported: Type.Boolean({ description: 'WhatsApp and linked Telegram accounts: always; LinkedIn: when the sender is listened to (listen: true), read only; Telegram bots: never' }),
  reason: Type.Union([Type.String(), Type.Null()], { description: 'Why the platform gives none' }),
  delivered_to_device_at: NullableTimestamp,
  read_at: NullableTimestamp,
  played_at: NullableTimestamp,
});
const Reply = Type.Object({
  id: Type.String({ description: 'rpl_…' }),
  type: Type.String({ enum: [...REPLY_TYPES] }),
  text: Type.Union([Type.String(), Type.Null()], { description: 'The text or the caption, at most 4,096 characters; media content is never downloaded or kept' }),
  received_at: Timestamp,
});
const Detail = Type.Object({
  ...ListItemFields,
  audio_url: Type.String(),
  duration: NullableNumber,
  caption: Type.Union([Type.String(), Type.Null()]),
  next_attempt_at: NullableTimestamp,
  canceled_at: Type.Union([Timestamp, Type.Null()], { description: 'When the note was canceled (status canceled)' }),
  cancel_on_reply: Type.Boolean({ description: 'Asked at send time: a reply from the recipient before send_at cancels the note' }),
  cancel_reason: Type.Union([Type.String({ enum: [...CANCEL_REASONS] }), Type.Null()], {
    description: 'Why a canceled note was canceled: requested (DELETE, the dashboard), replied (its recipient answered first) or suppressed (its recipient is on the suppression list); null otherwise, and on notes canceled by a reply before this was recorded',
  }),
  recording_indicator: Type.Union(
    [
      Type.Object({
        shown_at: NullableTimestamp,
        seconds: Type.Union([Type.Number(), Type.Null()], { description: 'How long it shows before the note' }),
      }),
      Type.Null(),
    ],
    { description: 'The "recording…" indicator asked for at send time; null when not asked for' },
  ),
  waiting_for: Type.Union([Type.String({ enum: [...WAIT_REASONS] }), Type.Null()], {
    description: "What a queued message waits for until next_attempt_at, besides a retry: its sender's daily cap, the indicator, its sender's rest or restriction",
  }),
  attempts: Type.Array(Attempt),
  audio: Audio,
  receipts: Receipts,
  replies: Type.Array(Reply, { description: "The recipient's replies to this note, oldest first, at most 20" }),
  first_replied_at: Type.Union([Timestamp, Type.Null()], { description: 'When the recipient first replied; null until then' }),
  listening: ListeningView,
});

const str = (description: string) => Type.Optional(Type.String({ description }));
export const MessageListQuery = Type.Object({
  limit: str(`1–${MAX_PAGE_SIZE}, default 20`),
  starting_after: str('A message id: the page of older messages after it'),
  ending_before: str('A message id: the page of newer messages before it'),
  status: str(MESSAGE_STATUSES.join(', ')),
  platform: str('linkedin, telegram or whatsapp'),
  recipient: str('Exact recipient'),
  created_gte: str('Created at or after: ISO 8601 or Unix seconds'),
  created_lte: str('Created at or before: ISO 8601 or Unix seconds'),
  replied: str('true: only notes their recipient replied to; false: only notes without a reply'),
});

export function registerMessageLogRoutes(app: FastifyInstance, services: Services): void {
  const routes = app.withTypeProvider<TypeBoxTypeProvider>();

  routes.get(
    '/messages',
    {
      schema: {
        summary: 'The message log, newest first',
        description: 'Cursor paging with starting_after / ending_before (message ids); filters combine.',
        tags: ['messages'],
        querystring: MessageListQuery,
        response: { 200: MessageList, ...withErrors(400, 422) },
      },
    },
    async (request) => {
      const caller = request.caller!;
      try {
        return await messageLogPage(services.db.kysely, { accountId: caller.accountId, env: caller.env }, request.query);
      } catch (error) {
        if (error instanceof LogQueryError) throw invalidParameter(error.field, error.message);
        throw error;
      }
    },
  );

  routes.get(
    '/messages/:message_id',
    {
      schema: {
        summary: 'One message with its attempts, audio, receipts and replies',
        tags: ['messages'],
        params: MessageIdParams,
        response: { 200: Detail, ...withErrors(404) },
      },
    },
    async (request) => {
      const caller = request.caller!;
      const detail = await messageDetail(services.db.kysely, services.config.dataDir, { accountId: caller.accountId, env: caller.env }, request.params.message_id);
      if (!detail) throw notFound(`message ${request.params.message_id}`);
      return detail;
    },
  );
}
