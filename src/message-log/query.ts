import { PLATFORM_NAMES as PLATFORMS } from '../platforms/registry.js';
import type { MessageFilters, Page } from '../store/message-log.js';

export const MESSAGE_STATUSES = ['queued', 'processing', 'delivered', 'failed', 'canceled'] as const;
export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

/** A bad query parameter: the API answers it as 422 invalid_parameter naming `field`. */
export class LogQueryError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'LogQueryError';
  }
}

export interface LogQueryInput {
  limit?: string;
  starting_after?: string;
  ending_before?: string;
  status?: string;
  platform?: string;
  recipient?: string;
  created_gte?: string;
  created_lte?: string;
  replied?: string;
}

const MESSAGE_ID = /^msg_[0-9A-Za-z]{24}$/;

/** An ISO 8601 time or Unix seconds, as epoch ms. */
function parseTime(field: string, raw: string): number {
  const ms = /^\d{1,12}$/.test(raw) ? Number(raw) * 1000 : /^\d{4}-\d{2}-\d{2}/.test(raw) ? Date.parse(raw) : NaN;
  if (!Number.isFinite(ms)) throw new LogQueryError(field, `${field} must be an ISO 8601 time (2026-11-22T13:00:00Z) or Unix seconds`);
  return ms;
}

/** The message log's query string (the API's and the dashboard's) as store filters and a page. */
export function parseLogQuery(query: LogQueryInput): { filters: MessageFilters; page: Page } {
  const filters: MessageFilters = {};
  const page: Page = { limit: DEFAULT_PAGE_SIZE };
  if (query.limit !== undefined && query.limit !== '') {
    if (!/^\d{1,3}$/.test(query.limit) || Number(query.limit) < 1 || Number(query.limit) > MAX_PAGE_SIZE) {
      throw new LogQueryError('limit', `limit must be an integer from 1 to ${MAX_PAGE_SIZE}`);
    }
    page.limit = Number(query.limit);
  }
  if (query.starting_after && query.ending_before) throw new LogQueryError('ending_before', 'give starting_after or ending_before, not both');
  for (const field of ['starting_after', 'ending_before'] as const) {
    const cursor = query[field];
    if (cursor === undefined || cursor === '') continue;
    if (!MESSAGE_ID.test(cursor)) throw new LogQueryError(field, `${field} must be a message id (msg_…)`);
    if (field === 'starting_after') page.startingAfter = cursor;
    else page.endingBefore = cursor;
  }
  if (query.status) {
    if (!(MESSAGE_STATUSES as readonly string[]).includes(query.status)) throw new LogQueryError('status', `status must be one of ${MESSAGE_STATUSES.join(', ')}`);
    filters.status = query.status;
  }
  if (query.platform) {
    if (!(PLATFORMS as readonly string[]).includes(query.platform)) throw new LogQueryError('platform', `platform must be one of ${PLATFORMS.join(', ')}`);
    filters.platform = query.platform;
  }
  if (query.recipient) filters.recipient = query.recipient;
  if (query.created_gte) filters.createdGte = parseTime('created_gte', query.created_gte);
  if (query.created_lte) filters.createdLte = parseTime('created_lte', query.created_lte);
  if (query.replied !== undefined && query.replied !== '') {
    if (query.replied !== 'true' && query.replied !== 'false') throw new LogQueryError('replied', 'replied must be true or false');
    filters.replied = query.replied === 'true';
  }
  return { filters, page };
}
