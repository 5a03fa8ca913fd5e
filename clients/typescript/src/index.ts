import createFetchClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './schema.js';

export type { components, paths };

/** A client whose every path, parameter, body and answer is typed from the API's OpenAPI document. */
export type VoicenoteClient = Client<paths>;

export interface VoicenoteClientOptions {
  /** The service's root address, e.g. `http://localhost:3000` (paths start with `/api/v1/`). */
  baseUrl: string;
  /** `sk_test_…` (sandbox) or `sk_live_…`. */
  apiKey: string;
  /** Another fetch (tests, proxies, retries). */
  fetch?: ClientOptions['fetch'];
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

export function createVoicenoteClient(options: VoicenoteClientOptions): VoicenoteClient {
  return createFetchClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    headers: { ...options.headers, Authorization: `Bearer ${options.apiKey}` },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}

/** Bodies and answers by name, taken from the generated paths (nothing here is written by hand). */
type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never;
export type SendRequest = Json<paths['/api/v1/send']['post']['requestBody']>;
export type SentMessage = Json<paths['/api/v1/send']['post']['responses'][202]>;
export type MessageStatus = Json<paths['/api/v1/status/{message_id}']['get']['responses'][200]>;
export type Usage = Json<paths['/api/v1/usage']['get']['responses'][200]>;
export type ApiError = components['schemas']['Error'];
export type Sender = Json<paths['/api/v1/senders/{sender_id}']['get']['responses'][200]>;
export type SenderList = Json<paths['/api/v1/senders']['get']['responses'][200]>;
export type RecipientCheckRequest = Json<paths['/api/v1/recipients/check']['post']['requestBody']>;
export type RecipientCheck = Json<paths['/api/v1/recipients/check']['post']['responses'][200]>;
