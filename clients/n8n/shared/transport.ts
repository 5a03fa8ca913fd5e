import type {
  IDataObject,
  IExecuteFunctions,
  IHookFunctions,
  IHttpRequestMethods,
  IHttpRequestOptions,
  ILoadOptionsFunctions,
  IN8nHttpFullResponse,
  INode,
  JsonObject,
} from 'n8n-workflow';
import { NodeApiError, NodeOperationError } from 'n8n-workflow';

/** The n8n contexts that call the API: a node's run, its option lists, a trigger's webhook set-up. */
export type VoicenoteCaller = IExecuteFunctions | ILoadOptionsFunctions | IHookFunctions;

export const CREDENTIALS_NAME = 'voicenoteApi';

export interface VoicenoteRequest {
  method: IHttpRequestMethods;
  /** Under /api/v1, e.g. `/send`. */
  path: string;
  body?: IDataObject;
  qs?: IDataObject;
  headers?: Record<string, string>;
  /** The item the request is for, so n8n points its error at that item. */
  itemIndex?: number;
}

/** The service's base URL as the credential holds it, without a trailing slash. */
export const baseUrl = (url: unknown): string => String(url ?? '').trim().replace(/\/+$/, '');

/**
 * The service's error envelope (`{"error": {"code", "message", "details"}}`) as an n8n node error whose
 * message carries the API's code and message, so "Continue on fail" items and the editor show the cause.
 */
export function voicenoteError(node: INode, statusCode: number, body: unknown, itemIndex?: number): NodeApiError {
  const envelope = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)?.error;
  const code = typeof envelope?.code === 'string' ? envelope.code : `http_${statusCode}`;
  const message = typeof envelope?.message === 'string' ? envelope.message : `the service answered ${statusCode}`;
  const details = envelope?.details === undefined ? undefined : JSON.stringify(envelope.details);
  return new NodeApiError(node, (body ?? {}) as JsonObject, {
    message: `${code}: ${message}`,
    ...(details ? { description: `details: ${details}` } : {}),
    httpCode: String(statusCode),
    ...(itemIndex !== undefined ? { itemIndex } : {}),
  });
}

/** An error caught around an API call, as an n8n node error (those from {@link voicenoteRequest} already are). */
export function asNodeError(node: INode, error: unknown, itemIndex?: number): NodeApiError | NodeOperationError {
  if (error instanceof NodeApiError || error instanceof NodeOperationError) return error;
  return new NodeOperationError(node, error as Error, itemIndex !== undefined ? { itemIndex } : {});
}

/** One call to the voicenote API with the credential's key; any non-2xx answer throws {@link voicenoteError}. */
export async function voicenoteRequest(this: VoicenoteCaller, request: VoicenoteRequest): Promise<IDataObject> {
  const credentials = await this.getCredentials(CREDENTIALS_NAME);
  const options: IHttpRequestOptions = {
    method: request.method,
    url: `${baseUrl(credentials.url)}/api/v1${request.path}`,
    json: true,
    // The answer is judged here, so that the API's own code and message reach the user.
    ignoreHttpStatusErrors: true,
    returnFullResponse: true,
    ...(request.body !== undefined ? { body: request.body } : {}),
    ...(request.qs !== undefined ? { qs: request.qs } : {}),
    ...(request.headers !== undefined ? { headers: request.headers } : {}),
  };
  let response: IN8nHttpFullResponse;
  try {
    response = (await this.helpers.httpRequestWithAuthentication.call(this, CREDENTIALS_NAME, options)) as IN8nHttpFullResponse;
  } catch (error) {
    // No answer at all (refused connection, bad URL, timeout).
    throw new NodeApiError(this.getNode(), error as JsonObject, request.itemIndex !== undefined ? { itemIndex: request.itemIndex } : {});
  }
  if (response.statusCode >= 200 && response.statusCode < 300) return (response.body ?? {}) as IDataObject;
  throw voicenoteError(this.getNode(), response.statusCode, response.body, request.itemIndex);
}

/** Every item of a cursor-paged list (`data`, `has_more`, `starting_after`), or the first `limit` of them. */
export async function voicenoteList(
  this: VoicenoteCaller,
  path: string,
  qs: IDataObject,
  options: { returnAll: boolean; limit: number; itemIndex?: number },
): Promise<IDataObject[]> {
  const items: IDataObject[] = [];
  const pageSize = options.returnAll ? 100 : Math.min(Math.max(options.limit, 1), 100);
  let startingAfter: string | undefined;
  for (;;) {
    const page = await voicenoteRequest.call(this, {
      method: 'GET',
      path,
      qs: { ...qs, limit: pageSize, ...(startingAfter ? { starting_after: startingAfter } : {}) },
      ...(options.itemIndex !== undefined ? { itemIndex: options.itemIndex } : {}),
    });
    const data = (page.data ?? []) as IDataObject[];
    items.push(...data);
    if (!options.returnAll && items.length >= options.limit) return items.slice(0, options.limit);
    if (page.has_more !== true || data.length === 0) return items;
    startingAfter = String(data[data.length - 1].id);
  }
}
