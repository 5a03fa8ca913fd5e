/**
 * Every request shape of the LinkedIn Voyager flow, and how each answer is read, in one place.
 *
 * None of it is documented by LinkedIn; it is what public clients of linkedin.com's own web app
 * observed. The voice note request (`createMessageRequest`) is the one a working open-source Voyager
 * client sends: an audio entry `{assetUrn, byteSize, duration}` (bytes uploaded, milliseconds), the
 * JSON body sent as `text/plain;charset=UTF-8` as the web client does. When a capture from a real
 * session shows a different shape, this file is the one edit (and test/fakes/linkedin-voyager.ts,
 * which checks the same shape, the other).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { BrowserIdentity } from './browser.js';

/** The `accept` of the web app's REST calls (normalized JSON), and of its messenger calls (plain JSON). */
export const ACCEPT_NORMALIZED = 'application/vnd.linkedin.normalized+json+2.1';
export const ACCEPT_JSON = 'application/json';
/** The `accept` of the messenger GraphQL reads (a conversation's messages). */
export const ACCEPT_GRAPHQL_MESSAGES = 'application/graphql';

/** A request relative to the API root (`LINKEDIN_API_ROOT`). */
export interface VoyagerRequest {
  method: 'GET' | 'POST';
  /** Path and query string. */
  path: string;
  /** The `accept` the web app sends to this endpoint. */
  accept: string;
  /** Sent as JSON when present. */
  body?: unknown;
  /** The body's content type when it is not `application/json` (the web client's own choice). */
  contentType?: string;
}

/**
 * The headers of every Voyager call, as the web app sends them (docs/platforms.md, "LinkedIn"):
 * `csrf-token` is the current JSESSIONID, the cookies are the delivery's jar for this URL.
 */
export function voyagerHeaders(input: { browser: BrowserIdentity; cookie: string; csrfToken: string; accept: string }): Record<string, string> {
  const { browser } = input;
  return {
    accept: input.accept,
    'accept-language': browser.acceptLanguage,
    cookie: input.cookie,
    'csrf-token': input.csrfToken,
    referer: browser.referer,
    'user-agent': browser.userAgent,
    'x-li-lang': browser.lang,
    'x-li-page-instance': browser.pageInstance,
    'x-li-track': browser.track,
    'x-restli-protocol-version': '2.0.0',
    ...browser.clientHints,
  };
}

/** Own profile: the mailbox voice notes are sent from. */
export const meRequest = (): VoyagerRequest => ({ method: 'GET', path: '/voyager/api/me', accept: ACCEPT_NORMALIZED });

/** Recipient lookup by public profile id ("vanity name"), given decoded. */
export const profileByPublicIdRequest = (publicId: string): VoyagerRequest => ({
  method: 'GET',
  path: `/voyager/api/identity/dash/profiles?q=memberIdentity&memberIdentity=${encodeURIComponent(publicId)}`,
  accept: ACCEPT_NORMALIZED,
});

/** Asks for an upload slot for one voice message file. */
export const uploadMetadataRequest = (fileSize: number): VoyagerRequest => ({
  method: 'POST',
  path: '/voyager/api/voyagerVideoDashMediaUploadMetadata?action=upload',
  accept: ACCEPT_NORMALIZED,
  body: { mediaUploadType: 'VOICE_MESSAGE', fileSize, filename: 'voice.m4a' },
});

/** Headers of the raw upload, before any `singleUploadHeaders` the slot asked for (those win). */
export const UPLOAD_CONTENT_TYPE = 'audio/mp4';

/** Who the voice note goes to: a profile (a new conversation, or the existing 1:1 one), or an existing conversation. */
export type MessageTarget = { recipientUrn: string } | { conversationUrn: string };

export interface CreateMessageInput {
  mailboxUrn: string;
  target: MessageTarget;
  assetUrn: string;
  /** Bytes actually uploaded. */
  byteSize: number;
  durationMs: number;
  /** The client's own id of the message (`originTokenFor`). */
  originToken: string;
}

/** A 16-byte tracking id written as a string of 16 code points 0–255, as the web client does. */
export function newTrackingId(): string {
  return String.fromCharCode(...randomBytes(16));
}

// A fixed namespace for name-based UUIDs (RFC 4122 version 5) of our message ids.
const ORIGIN_TOKEN_NAMESPACE = Buffer.from('6f1c2a4e9b3d4c5e8a7f0b1c2d3e4f50', 'hex');

/**
 * The message's `originToken`: a UUID derived from our message id, so every attempt of one message, in
 * any process, carries the same token (the web app makes one per message it sends, and sends it again
 * when it retries that message).
 */
export function originTokenFor(messageId: string): string {
  const hash = createHash('sha1').update(ORIGIN_TOKEN_NAMESPACE).update(messageId, 'utf8').digest().subarray(0, 16);
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** How the web client sends the createMessage body. */
export const CREATE_MESSAGE_CONTENT_TYPE = 'text/plain;charset=UTF-8';

/**
 * Sends the uploaded audio as a voice note: into an existing conversation with `conversationUrn` (as
 * mautrix-linkedin sends into a thread; no `hostRecipientUrns`), or to a profile with
 * `hostRecipientUrns`. `dedupeByClientGeneratedToken` is false, as every public client and capture of
 * the web app sends it (docs/platforms.md says why).
 */
export const createMessageRequest = (input: CreateMessageInput): VoyagerRequest => ({
  method: 'POST',
  path: '/voyager/api/voyagerMessagingDashMessengerMessages?action=createMessage',
  accept: ACCEPT_JSON,
  contentType: CREATE_MESSAGE_CONTENT_TYPE,
  body: {
    message: {
      body: { attributes: [], text: '' },
      renderContentUnions: [{ audio: { assetUrn: input.assetUrn, byteSize: input.byteSize, duration: input.durationMs } }],
      ...('conversationUrn' in input.target ? { conversationUrn: input.target.conversationUrn } : {}),
      originToken: input.originToken,
    },
    mailboxUrn: input.mailboxUrn,
    ...('recipientUrn' in input.target ? { hostRecipientUrns: [input.target.recipientUrn] } : {}),
    trackingId: newTrackingId(),
    dedupeByClientGeneratedToken: false,
  },
});

// ---- reading the answers ------------------------------------------------------------------------

const PROFILE_URN = /^urn:li:fsd_profile:[A-Za-z0-9_-]+$/;
const MINI_PROFILE_URN = /^urn:li:fs_miniProfile:([A-Za-z0-9_-]+)$/;

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** Every string value in a JSON document, depth first, in document order. */
function* strings(value: unknown, depth = 0): Generator<string> {
  if (depth > 12) return;
  if (typeof value === 'string') yield value;
  else if (Array.isArray(value)) for (const item of value) yield* strings(item, depth + 1);
  else if (typeof value === 'object' && value !== null) for (const item of Object.values(value)) yield* strings(item, depth + 1);
}

/**
 * The own `urn:li:fsd_profile:…` from `/me`. The normalized answer carries it as the mini profile's
 * `dashEntityUrn`; older answers only have `urn:li:fs_miniProfile:<id>`, whose id is the same.
 */
export function readOwnProfileUrn(answer: unknown): string | undefined {
  let mini: string | undefined;
  for (const s of strings(answer)) {
    if (PROFILE_URN.test(s)) return s;
    mini ??= MINI_PROFILE_URN.exec(s)?.[1];
  }
  return mini === undefined ? undefined : `urn:li:fsd_profile:${mini}`;
}

/** `elements[0].entityUrn` of a profile lookup (plain or normalized answer); undefined for an empty list. */
export function readProfileUrn(answer: unknown): string | undefined {
  const root = record(answer);
  const data = record(root?.data);
  const candidates: unknown[] = [
    record((root?.elements as unknown[] | undefined)?.[0])?.entityUrn,
    record((data?.elements as unknown[] | undefined)?.[0])?.entityUrn,
    (data?.['*elements'] as unknown[] | undefined)?.[0],
  ];
  return candidates.find((c): c is string => typeof c === 'string' && PROFILE_URN.test(c));
}

export interface UploadSlot {
  uploadUrl: string;
  assetUrn: string;
  headers: Record<string, string>;
}

/** `data.value` (normalized) or `value` (plain) of the upload-slot answer. */
export function readUploadSlot(answer: unknown): UploadSlot | undefined {
  const root = record(answer);
  const value = record(record(root?.data)?.value) ?? record(root?.value);
  if (!value) return undefined;
  const { singleUploadUrl, urn, singleUploadHeaders } = value;
  if (typeof singleUploadUrl !== 'string' || typeof urn !== 'string') return undefined;
  const headers: Record<string, string> = {};
  for (const [name, v] of Object.entries(record(singleUploadHeaders) ?? {})) {
    if (typeof v === 'string' || typeof v === 'number') headers[name.toLowerCase()] = String(v);
  }
  return { uploadUrl: singleUploadUrl, assetUrn: urn, headers };
}

/** Where a redirect goes when the session is no longer signed in. */
export const LOGIN_LOCATION = /\/(?:login|uas\/login|authwall|checkpoint)(?:[/?#]|$)/i;
