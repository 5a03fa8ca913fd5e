/** The few calls the CLI makes to a running service's HTTP API, with its error envelope decoded. */
import type { Static } from '@sinclair/typebox';
import type { DryRunResult } from '../api/schemas.js';

export interface ApiErrorBody {
  code: string;
  message: string;
  details?: Record<string, unknown> | null;
}

export type ApiAnswer<T> =
  | { ok: true; status: number; body: T; headers: Headers }
  | { ok: false; status: number; error: ApiErrorBody; headers: Headers };

/** The service could not be reached at all (refused, reset, DNS): no answer to judge. */
export class Unreachable extends Error {}

export interface SentMessage {
  id: string;
  status: string;
  platform: string;
  recipient: string;
  created_at: string;
}

export interface MessageStatus extends SentMessage {
  delivered_at: string | null;
  error: { code: string; message: string } | null;
}

export interface SendBody {
  platform: string;
  recipient: string;
  audio_url: string;
  session: Record<string, string>;
  caption?: string;
  duration?: number | string;
  send_at?: string;
  cancel_on_reply?: boolean | string;
  recording_indicator?: boolean | string;
  listen?: boolean | string;
  recipient_time_zone?: string;
  /** true: POST /send only checks (200 with a DryRunAnswer): nothing stored, sent or counted. */
  dry_run?: boolean | string;
}

/** POST /send's 200 body when the send was a dry run (docs/sending.md, "Dry runs"): the API's own schema. */
export type DryRunAnswer = Static<typeof DryRunResult>;

/**
 * The API's base address from what the user gave: the service's bare origin (`http://host:3000`, as
 * most CLIs take a base URL) means its API under /api/v1; any other path is taken as written.
 */
export function apiBaseUrl(given: string): string {
  const trimmed = given.trim().replace(/\/+$/, '');
  try {
    const url = new URL(trimmed);
    if (url.pathname === '/' && url.search === '' && url.hash === '') return `${trimmed}/api/v1`;
  } catch {
    // Not a URL: the call says it cannot reach it, naming what was given.
  }
  return trimmed;
}

export class ApiClient {
  readonly baseUrl: string;
  constructor(
    baseUrl: string,
    private readonly key: string,
  ) {
    this.baseUrl = apiBaseUrl(baseUrl);
  }

  private async call<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiAnswer<T>> {
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(60_000),
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new Unreachable(
        `cannot reach ${this.baseUrl}: ${cause?.code ?? cause?.message ?? (error as Error).message}` +
          ' (is the service running there? For another port export PORT=<its port>, or' +
          ' VOICENOTE_URL=http://HOST:PORT/api/v1, in this terminal, or pass --url)',
      );
    }
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (response.ok) return { ok: true, status: response.status, body: parsed as T, headers: response.headers };
    const envelope = (parsed as { error?: ApiErrorBody } | undefined)?.error;
    const error: ApiErrorBody =
      envelope && typeof envelope.code === 'string'
        ? envelope
        : { code: response.status >= 500 ? 'internal_error' : 'invalid_request', message: `HTTP ${response.status} from ${this.baseUrl}${path}`, details: null };
    return { ok: false, status: response.status, error, headers: response.headers };
  }

  /** Any other call of the API (path under the base address). */
  request<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiAnswer<T>> {
    return this.call<T>(method, path, body, headers);
  }

  send(body: SendBody, idempotencyKey?: string): Promise<ApiAnswer<SentMessage | DryRunAnswer>> {
    return this.call<SentMessage | DryRunAnswer>('POST', '/send', body, idempotencyKey ? { 'idempotency-key': idempotencyKey } : {});
  }

  status(id: string): Promise<ApiAnswer<MessageStatus>> {
    return this.call<MessageStatus>('GET', `/status/${encodeURIComponent(id)}`);
  }

  /** One page of GET /senders, after the sender `startingAfter` when given. */
  senders(startingAfter?: string): Promise<ApiAnswer<{ data: SenderListItem[]; has_more: boolean }>> {
    const query = `?limit=100${startingAfter ? `&starting_after=${encodeURIComponent(startingAfter)}` : ''}`;
    return this.call('GET', `/senders${query}`);
  }

  /** PATCH /senders/{id}: sets the sender's proxy, or clears it with null (docs/proxies.md). */
  setSenderProxy(id: string, proxy: string | null): Promise<ApiAnswer<SenderListItem>> {
    return this.call('PATCH', `/senders/${encodeURIComponent(id)}`, { proxy });
  }
}

/** A sender as GET /senders shows it (docs/senders.md, "Senders"). */
export interface SenderListItem {
  id: string;
  platform: string;
  kind: string;
  label: string | null;
  status: string;
  reason: string | null;
  until: string | null;
  last_sent_at: string | null;
  sent_today: number;
  daily_cap: number | null;
  /** The sender's own proxy as scheme://host:port; null: none. */
  proxy?: string | null;
}

/** Seconds to wait before retrying a 429 or 503: Retry-After when given, else the fallback. */
export function retryAfterSeconds(headers: Headers, fallback: number): number {
  const raw = headers.get('retry-after');
  if (raw !== null && /^\d+$/.test(raw.trim())) return Math.min(Number(raw.trim()), 3_600);
  return fallback;
}

/** "422 invalid_parameter: … (session.bot_token)" */
export function describeApiError(status: number, error: ApiErrorBody): string {
  const field = typeof error.details?.field === 'string' ? ` (${error.details.field})` : '';
  return `${status} ${error.code}: ${error.message}${field}`;
}
