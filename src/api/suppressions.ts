import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { suppressionView } from '../core/public-views.js';
import { recipientKey } from '../core/recipient-key.js';
import type { PlatformRegistry } from '../platforms/registry.js';
import type { Services } from '../services.js';
import {
  deleteSuppression,
  EVERY_PLATFORM,
  listSuppressions,
  suppress,
  SUPPRESSION_SOURCES,
  type NewSuppression,
  type Owner,
  type Suppressed,
  type SuppressionFilter,
  type SuppressionPage,
  type SuppressionSource,
} from '../store/suppressions.js';
import { invalidParameter, notFound } from './errors.js';
import { withErrors } from './schemas.js';
import { rejectUnknownFields } from './unknown-fields.js';

/** Recipients one POST /suppressions lists at most (an import sends its file in calls of this many). */
export const MAX_SUPPRESSIONS_PER_CALL = 1_000;
export const MAX_SUPPRESSION_NOTE = 500;
const MAX_RECIPIENT_LENGTH = 300;
const DEFAULT_PAGE_SIZE = 20;
const MAX_PAGE_SIZE = 100;
const SUPPRESSION_ID = /^sup_[0-9A-Za-z]{24}$/;
const ENTRY_FIELDS = ['platform', 'recipient', 'note'];

export const Suppression = Type.Object({
  id: Type.String({ description: 'sup_…' }),
  platform: Type.String({ description: 'A platform, or "*" for every platform' }),
  recipient: Type.String({ description: 'As compared: a WhatsApp number without "+", a LinkedIn profile id (lower case) or urn, a Telegram chat id or @username (lower case)' }),
  source: Type.String({ enum: [...SUPPRESSION_SOURCES], description: 'How it was listed: api, reply (an opt-out by reply), import (a CSV file) or dashboard' }),
  reply_id: Type.Union([Type.String(), Type.Null()], { description: 'The reply that opted the recipient out (source reply); null otherwise' }),
  note: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
});
const SuppressionList = Type.Object({ data: Type.Array(Suppression), has_more: Type.Boolean({ description: 'More entries past this page, in the direction paged' }) });
const AddBody = Type.Object({
  recipients: Type.Array(
    Type.Object({
      platform: Type.String({ description: 'linkedin, telegram, whatsapp, or "*" for every platform' }),
      recipient: Type.String({ description: 'As POST /send takes it, or as people write it (a WhatsApp number with "+", a LinkedIn profile URL, a Telegram @username in any case)' }),
      note: Type.Optional(Type.Union([Type.String({ maxLength: MAX_SUPPRESSION_NOTE }), Type.Null()])),
    }),
    { description: `1 to ${MAX_SUPPRESSIONS_PER_CALL} recipients` },
  ),
  source: Type.Optional(Type.String({ enum: ['api', 'import'], description: 'import: the entries come from a file (the CLI\'s `suppressions import`); default api' })),
});
const str = (description: string) => Type.Optional(Type.String({ description }));
const ListQuery = Type.Object({
  platform: str('Only entries of this platform ("*": those for every platform)'),
  source: str('Only entries listed this way: api, reply, import or dashboard'),
  recipient: str('Only this recipient, compared as entries are (any form of it)'),
  limit: str(`1–${MAX_PAGE_SIZE}, default ${DEFAULT_PAGE_SIZE}`),
  starting_after: str('An entry id: the page of older entries after it'),
  ending_before: str('An entry id: the page of newer entries before it'),
});
const IdParams = Type.Object({ suppression_id: Type.String() });

/** What a caller gives for one recipient (the API, a CSV row, the dashboard's form). */
export interface SuppressionInput {
  platform: unknown;
  recipient: unknown;
  note?: unknown;
}

/**
 * One entry checked and compared form worked out; a problem names its field (`${field}.platform`). A
 * recipient is taken as its platform takes it in a send, or as people write it (a WhatsApp number with
 * "+" and spaces): what a send would refuse is refused here too.
 */
export function checkSuppressionEntry(platforms: PlatformRegistry, input: SuppressionInput, field: string): NewSuppression | { field: string; message: string } {
  const { platform, recipient, note } = input;
  if (typeof platform !== 'string' || (platform !== EVERY_PLATFORM && !platforms.get(platform))) {
    return { field: `${field}.platform`, message: `${field}.platform must be one of ${platforms.names.join(', ')} or "*" (every platform)` };
  }
  if (typeof recipient !== 'string' || recipient.trim() === '' || recipient.length > MAX_RECIPIENT_LENGTH) {
    return { field: `${field}.recipient`, message: `${field}.recipient must be a non-empty string of at most ${MAX_RECIPIENT_LENGTH} characters` };
  }
  const key = recipientKey(recipient);
  if (platform !== EVERY_PLATFORM) {
    const rules = platforms.get(platform)!;
    const problem = rules.checkRecipient(recipient.trim()) && rules.checkRecipient(key);
    if (problem) return { field: `${field}.recipient`, message: problem.message.replace(/^[a-z]+ recipient/, `${field}.recipient`) };
  }
  if (note !== undefined && note !== null && (typeof note !== 'string' || note.length > MAX_SUPPRESSION_NOTE)) {
    return { field: `${field}.note`, message: `${field}.note must be a string of at most ${MAX_SUPPRESSION_NOTE} characters, or null` };
  }
  return { platform, key, note: typeof note === 'string' && note !== '' ? note : null };
}

export const isEntryProblem = (value: NewSuppression | { message: string }): value is { field: string; message: string } => 'message' in value;

/** Lists recipients and tells this process's usage count of the notes given back (the API, the dashboard). */
export async function suppressRecipients(services: Services, owner: { accountId: string; env: 'test' | 'live' }, entries: NewSuppression[], source: SuppressionSource): Promise<Suppressed> {
  const done = await suppress(services.db.kysely, owner, entries, { source, now: Date.now() });
  for (const { message, sent } of done.canceled) {
    if (sent !== undefined) services.callers.noteReturned({ accountId: owner.accountId, env: owner.env, periodStart: Number(message.period_start) }, sent);
  }
  return done;
}

function filterOf(services: Services, query: { platform?: string; source?: string; recipient?: string }): SuppressionFilter {
  const filter: SuppressionFilter = {};
  if (query.platform !== undefined && query.platform !== '') {
    if (query.platform !== EVERY_PLATFORM && !services.platforms.get(query.platform)) throw invalidParameter('platform', `platform must be one of ${services.platforms.names.join(', ')} or "*"`);
    filter.platform = query.platform;
  }
  if (query.source !== undefined && query.source !== '') {
    if (!(SUPPRESSION_SOURCES as readonly string[]).includes(query.source)) throw invalidParameter('source', `source must be one of ${SUPPRESSION_SOURCES.join(', ')}`);
    filter.source = query.source;
  }
  if (query.recipient !== undefined && query.recipient.trim() !== '') filter.recipient = query.recipient;
  return filter;
}

function pageOf(query: { limit?: string; starting_after?: string; ending_before?: string }): SuppressionPage {
  const page: SuppressionPage = { limit: DEFAULT_PAGE_SIZE };
  if (query.limit !== undefined && query.limit !== '') {
    if (!/^\d{1,3}$/.test(query.limit) || Number(query.limit) < 1 || Number(query.limit) > MAX_PAGE_SIZE) throw invalidParameter('limit', `limit must be an integer from 1 to ${MAX_PAGE_SIZE}`);
    page.limit = Number(query.limit);
  }
  if (query.starting_after && query.ending_before) throw invalidParameter('ending_before', 'give starting_after or ending_before, not both');
  for (const field of ['starting_after', 'ending_before'] as const) {
    const cursor = query[field];
    if (cursor === undefined || cursor === '') continue;
    if (!SUPPRESSION_ID.test(cursor)) throw invalidParameter(field, `${field} must be a suppression id (sup_…)`);
    if (field === 'starting_after') page.startingAfter = cursor;
    else page.endingBefore = cursor;
  }
  return page;
}

/** POST, GET and DELETE /suppressions (docs/sending.md, "Opt-outs and suppressions"), scoped to the key's account and environment. */
export function registerSuppressionRoutes(app: FastifyInstance, services: Services): void {
  const routes = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['suppressions'];
  const ownerOf = (caller: { accountId: string; env: 'test' | 'live' }): Owner & { env: 'test' | 'live' } => ({ accountId: caller.accountId, env: caller.env });

  routes.post(
    '/suppressions',
    {
      config: { bucket: 'send' },
      schema: {
        summary: 'Add recipients to the suppression list',
        description:
          'Nothing is ever sent to a listed recipient again: sends to them are refused (422 recipient_suppressed) and their notes waiting (queued, scheduled) are canceled with cancel_reason "suppressed", their quota given back. A recipient already listed is returned as it is.',
        tags,
        body: AddBody,
        response: { 201: Type.Object({ data: Type.Array(Suppression) }), ...withErrors(400, 413, 415, 422) },
      },
      preValidation: async (request) => {
        rejectUnknownFields(request.body, ['recipients', 'source']);
        const recipients = (request.body as { recipients?: unknown } | null)?.recipients;
        if (Array.isArray(recipients)) recipients.forEach((entry, i) => rejectUnknownFields(entry, ENTRY_FIELDS, `recipients[${i}].`));
      },
    },
    async (request, reply) => {
      const { recipients, source } = request.body;
      if (recipients.length === 0 || recipients.length > MAX_SUPPRESSIONS_PER_CALL) {
        throw invalidParameter('recipients', `recipients must hold 1 to ${MAX_SUPPRESSIONS_PER_CALL} entries (got ${recipients.length})`);
      }
      const entries: NewSuppression[] = [];
      for (const [i, input] of recipients.entries()) {
        const entry = checkSuppressionEntry(services.platforms, input, `recipients[${i}]`);
        if (isEntryProblem(entry)) throw invalidParameter(entry.field, entry.message);
        entries.push(entry);
      }
      const done = await suppressRecipients(services, ownerOf(request.caller!), entries, source === 'import' ? 'import' : 'api');
      // One answer per entry given, in order, but a recipient given twice in the call is returned once.
      const seen = new Set<string>();
      const data = done.rows.filter((row) => (seen.has(row.id) ? false : (seen.add(row.id), true))).map(suppressionView);
      return reply.code(201).send({ data });
    },
  );

  routes.get(
    '/suppressions',
    {
      schema: {
        summary: 'The suppression list, newest first',
        description: 'Filters platform, source and recipient combine; cursor paging with starting_after / ending_before.',
        tags,
        querystring: ListQuery,
        response: { 200: SuppressionList, ...withErrors(422) },
      },
    },
    async (request) => {
      const { data, hasMore } = await listSuppressions(services.db.kysely, ownerOf(request.caller!), filterOf(services, request.query), pageOf(request.query));
      return { data: data.map(suppressionView), has_more: hasMore };
    },
  );

  routes.delete(
    '/suppressions/:suppression_id',
    {
      config: { bucket: 'send' },
      schema: { summary: 'Take a recipient off the suppression list', description: 'Sends to them are accepted again; notes canceled meanwhile stay canceled.', tags, params: IdParams, response: { 204: Type.Null(), ...withErrors(404) } },
    },
    async (request, reply) => {
      if (!(await deleteSuppression(services.db.kysely, ownerOf(request.caller!), request.params.suppression_id))) throw notFound(`suppression ${request.params.suppression_id}`);
      return reply.code(204).send(null);
    },
  );
}
