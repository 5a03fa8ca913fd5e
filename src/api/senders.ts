import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Services } from '../services.js';
import { NEW_CHAT_CAP_STATUSES } from '../store/new-chat-cap.js';
import { findSender, listSenders, SENDER_STATUSES, type SenderPage } from '../store/senders.js';
import { findSenderRecord } from '../store/sender-proxy.js';
import { invalidParameter, notFound } from './errors.js';
import { applySenderProxy, proxyToKeep } from './proxy-setting.js';
import { rejectUnknownFields } from './unknown-fields.js';
import { withErrors } from './schemas.js';

const DEFAULT_PAGE_SIZE = 20;
const MAX_PAGE_SIZE = 100;
const SENDER_ID = /^snd_[0-9A-Za-z]{24}$/;

const NullableTimestamp = Type.Union([Type.String({ format: 'date-time' }), Type.Null()]);
export const Sender = Type.Object({
  id: Type.String({ description: 'snd_…' }),
  platform: Type.String({ enum: ['linkedin', 'telegram', 'whatsapp'] }),
  kind: Type.String({ description: 'whatsapp_session, telegram_bot, telegram_account or linkedin_cookie' }),
  label: Type.Union([Type.String(), Type.Null()], {
    description: "What a person recognises, never a credential: the WhatsApp session id and phone number, the bot's @username once known, the LinkedIn member's public id once known",
  }),
  status: Type.String({ enum: [...SENDER_STATUSES] }),
  reason: Type.Union([Type.String(), Type.Null()], { description: 'Why the sender is not ok, in words' }),
  until: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When a rest or a restriction ends, if known' }),
  last_sent_at: NullableTimestamp,
  sent_today: Type.Integer({ description: 'Notes delivered today (UTC)' }),
  daily_cap: Type.Union([Type.Integer(), Type.Null()], { description: "Today's allowance under the account's daily rhythm (live senders); null: no cap" }),
  new_chat_cap: Type.Union(
    [
      Type.Object({
        status: Type.String({ enum: [...NEW_CHAT_CAP_STATUSES], description: 'NONE, FIRST_WARNING and SECOND_WARNING (sends spaced further apart), CAPPED (notes to new chats wait)' }),
        used: Type.Union([Type.Integer(), Type.Null()], { description: 'New chats started in this cycle, as WhatsApp counts them' }),
        total: Type.Union([Type.Integer(), Type.Null()], { description: 'New chats allowed in this cycle' }),
        cycle_ends_at: NullableTimestamp,
      }),
      Type.Null(),
    ],
    { description: "WhatsApp's new-chat message cap as last read; null for other platforms and before it is read" },
  ),
  recipient_checks: Type.Object(
    {
      today: Type.Integer({ description: 'Live checks that asked the platform today (UTC); answers from a kept check do not count' }),
      daily_budget: Type.Integer({ description: 'Live checks allowed per UTC day; past it POST /recipients/check answers 429' }),
    },
    { description: 'POST /recipients/check as this sender' },
  ),
  proxy: Type.Union([Type.String(), Type.Null()], {
    description: "The sender's own proxy as scheme://host:port, never its user name or password (e.g. socks5://proxy.example:1080); null: none (the operator's OUTBOUND_PROXY, if set, or a direct connection)",
  }),
});
const SenderChangeBody = Type.Object(
  {
    proxy: Type.Union([Type.String(), Type.Null()], {
      description:
        "The sender's own proxy: http://, https:// (HTTP CONNECT), socks5:// or socks5h://, with optional user:password@ (a Telegram account takes socks5 only), e.g. socks5://user:secret@proxy.example:1080; null clears it. Checked first (one connection through it to the platform's host); applies from the sender's next connection",
    }),
  },
  { additionalProperties: false },
);
const SenderList = Type.Object({ data: Type.Array(Sender), has_more: Type.Boolean({ description: 'More senders past this page, in the direction paged' }) });
const str = (description: string) => Type.Optional(Type.String({ description }));
export const SenderListQuery = Type.Object({
  limit: str(`1–${MAX_PAGE_SIZE}, default ${DEFAULT_PAGE_SIZE}`),
  starting_after: str('A sender id: the page of older senders after it'),
  ending_before: str('A sender id: the page of newer senders before it'),
});
const SenderIdParams = Type.Object({ sender_id: Type.String() });

/** The list's query string as a page; a bad value is a 422 naming its field. */
function pageOf(query: { limit?: string; starting_after?: string; ending_before?: string }): SenderPage {
  const page: SenderPage = { limit: DEFAULT_PAGE_SIZE };
  if (query.limit !== undefined && query.limit !== '') {
    if (!/^\d{1,3}$/.test(query.limit) || Number(query.limit) < 1 || Number(query.limit) > MAX_PAGE_SIZE) {
      throw invalidParameter('limit', `limit must be an integer from 1 to ${MAX_PAGE_SIZE}`);
    }
    page.limit = Number(query.limit);
  }
  if (query.starting_after && query.ending_before) throw invalidParameter('ending_before', 'give starting_after or ending_before, not both');
  for (const field of ['starting_after', 'ending_before'] as const) {
    const cursor = query[field];
    if (cursor === undefined || cursor === '') continue;
    if (!SENDER_ID.test(cursor)) throw invalidParameter(field, `${field} must be a sender id (snd_…)`);
    if (field === 'starting_after') page.startingAfter = cursor;
    else page.endingBefore = cursor;
  }
  return page;
}

/** GET /senders, GET /senders/{id} (docs/senders.md, "Senders"): read bucket; PATCH /senders/{id} (docs/proxies.md): send bucket; all scoped to the key's account and environment. */
export function registerSenderRoutes(app: FastifyInstance, services: Services): void {
  const routes = app.withTypeProvider<TypeBoxTypeProvider>();

  routes.get(
    '/senders',
    {
      schema: {
        summary: "The account's senders and their health, newest first",
        description: 'Every WhatsApp session, Telegram bot and LinkedIn cookie the account has sent with in this environment. Cursor paging with starting_after / ending_before.',
        tags: ['senders'],
        querystring: SenderListQuery,
        response: { 200: SenderList, ...withErrors(422) },
      },
    },
    async (request) => {
      const caller = request.caller!;
      const page = pageOf(request.query);
      const { data, hasMore } = await listSenders(services.db.kysely, { accountId: caller.accountId, env: caller.env }, page, services.rhythmDefaults);
      return { data, has_more: hasMore };
    },
  );

  routes.get(
    '/senders/:sender_id',
    { schema: { summary: 'One sender and its health', tags: ['senders'], params: SenderIdParams, response: { 200: Sender, ...withErrors(404) } } },
    async (request) => {
      const caller = request.caller!;
      const sender = await findSender(services.db.kysely, { accountId: caller.accountId, env: caller.env }, request.params.sender_id, services.rhythmDefaults);
      if (!sender) throw notFound(`sender ${request.params.sender_id}`);
      return sender;
    },
  );

  routes.patch(
    '/senders/:sender_id',
    {
      config: { bucket: 'send' },
      schema: {
        summary: "Set or clear a sender's proxy",
        description:
          'Sets (or with null clears) the proxy every connection of this sender goes through, from its next connection (docs/proxies.md). A live sender\'s proxy is checked first: one connection through it to the platform\'s host. A sandbox sender\'s is only checked for its syntax.',
        tags: ['senders'],
        params: SenderIdParams,
        body: SenderChangeBody,
        response: { 200: Sender, ...withErrors(400, 404, 422) },
      },
      preValidation: async (request) => rejectUnknownFields(request.body, ['proxy']),
    },
    async (request) => {
      const caller = request.caller!;
      const owner = { accountId: caller.accountId, env: caller.env };
      const record = await findSenderRecord(services.db.kysely, owner, request.params.sender_id);
      if (!record) throw notFound(`sender ${request.params.sender_id}`);
      const kept = request.body.proxy === null ? null : await proxyToKeep(services, request.body.proxy, { platform: record.platform, kind: record.kind, env: record.env, field: 'proxy' });
      await applySenderProxy(services, record, kept);
      return (await findSender(services.db.kysely, owner, record.id, services.rhythmDefaults))!;
    },
  );
}
