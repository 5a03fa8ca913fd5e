/**
 * LinkedIn's realtime event stream, as linkedin.com's web app opens it and mautrix-linkedin speaks it
 * (pkg/linkedingo/realtime.go, commit 525a6e3): the request that opens the stream, the heartbeat the
 * client posts while it is open, and how each line of the stream is read. Pure: the calls are made by
 * realtime-stream.ts. None of it is documented by LinkedIn; docs/platforms.md says what is confirmed.
 */
import { WEB_CLIENT_VERSION } from './browser.js';
import { profileOfParticipant, readMessage, type ConversationMessage } from './listening.js';
import { REALTIME_QUERY_MAP, REALTIME_RECIPE_MAP } from './realtime-maps.js';
import { ACCEPT_NORMALIZED } from './voyager-requests.js';

/** GET, `rc=1` (realtime.go:168-172, linkedInRealtimeConnectURL in constants.go:25). */
export const REALTIME_CONNECT_PATH = '/realtime/connect?rc=1';
/** POST, `action=sendHeartbeat` (realtime.go:122-123, linkedInRealtimeHeartbeatURL in constants.go:26). */
export const REALTIME_HEARTBEAT_PATH = '/realtime/realtimeFrontendClientConnectivityTracking?action=sendHeartbeat';
/** The stream's `accept` (constants.go:40). */
export const ACCEPT_EVENT_STREAM = 'text/event-stream';
/** A heartbeat a minute while the stream is open (realtime.go:154). */
export const HEARTBEAT_EVERY_MS = 60_000;

/** The topics read here (constants.go:45-60); every event's topic is `urn:li-realtime:<topic>:<…>` (handlelinkedin.go:66-67). */
export const MESSAGES_TOPIC = 'messagesTopic';
export const SEEN_RECEIPTS_TOPIC = 'messageSeenReceiptsTopic';

/**
 * What the stream's request carries beside the web app's usual headers (request.go:149-162,
 * WithRealtimeConnectHeaders): the topic maps and the client's realtime session id, which the
 * heartbeats name too. `csrf-token` and the cookies are those of every call.
 */
export function realtimeConnectHeaders(sessionId: string): Record<string, string> {
  return {
    priority: 'u=1, i',
    'sec-fetch-dest': 'empty',
    'sec-fetch-mode': 'cors',
    'sec-fetch-site': 'same-origin',
    'x-li-accept': ACCEPT_NORMALIZED,
    'x-li-query-accept': 'application/graphql',
    'x-li-query-map': JSON.stringify(REALTIME_QUERY_MAP),
    'x-li-recipe-accept': ACCEPT_NORMALIZED,
    'x-li-recipe-map': JSON.stringify(REALTIME_RECIPE_MAP),
    'x-li-realtime-session': sessionId,
  };
}

/** The heartbeat's extra headers (realtime.go:122-129): the body is JSON sent as text, as the web app's posts. */
export const HEARTBEAT_HEADERS: Record<string, string> = { 'content-type': 'text/plain;charset=UTF-8', priority: 'u=1, i' };

/**
 * The heartbeat's body (realtime.go:130-139). mautrix-linkedin sends `isFirstHeartbeat: !isFirst`
 * (false on the first); the field says what it means, so the first one here says true.
 */
export function heartbeatBody(input: { first: boolean; sessionId: string; actorUrn: string }): Record<string, unknown> {
  return {
    isFirstHeartbeat: input.first,
    isLastHeartbeat: false,
    realtimeSessionId: input.sessionId,
    mpName: 'voyager-web',
    mpVersion: WEB_CLIENT_VERSION,
    clientId: 'voyager-web',
    actorUrn: input.actorUrn,
    contextUrns: [input.actorUrn],
  };
}

/** One event of the stream, as far as listening needs it. */
export type RealtimeEvent =
  /** `com.linkedin.realtimefrontend.Heartbeat`: the stream is alive. */
  | { kind: 'heartbeat' }
  /** `com.linkedin.realtimefrontend.ClientConnection`: LinkedIn took the stream; events flow from now on. */
  | { kind: 'connected' }
  /** A message in one of the mailbox's conversations (messagesTopic), ours included. */
  | { kind: 'message'; conversationUrn: string; message: ConversationMessage }
  /** Someone saw a message (messageSeenReceiptsTopic): `seenAt`, the message seen, who saw it. */
  | { kind: 'seen'; messageUrn: string; seenAt: number; seenBy: string | undefined }
  /** Another topic, or a message that answers nothing (SYSTEM, RECALLED). */
  | { kind: 'other' }
  /** A data line that is not JSON: the stream is read no further (realtime.go:254-258 reconnects). */
  | { kind: 'unreadable' };

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/**
 * One line of the stream. Only `data:` lines carry events (realtime.go:250-252); others (blank lines
 * between events, comments) give undefined. The event is one of the three keys of RealtimeEvent in
 * realtime.go:55-59; a DecoratedEvent's payload is read by its topic, as handlelinkedin.go:64-86 does.
 */
export function readRealtimeLine(line: string): RealtimeEvent | undefined {
  if (!line.startsWith('data:')) return undefined;
  let event: Record<string, unknown> | undefined;
  try {
    event = record(JSON.parse(line.slice(5)));
  } catch {
    return { kind: 'unreadable' };
  }
  if (!event) return { kind: 'unreadable' };
  if (event['com.linkedin.realtimefrontend.Heartbeat'] !== undefined) return { kind: 'heartbeat' };
  if (event['com.linkedin.realtimefrontend.ClientConnection'] !== undefined) return { kind: 'connected' };
  const decorated = record(event['com.linkedin.realtimefrontend.DecoratedEvent']);
  if (!decorated) return { kind: 'other' };
  const topic = typeof decorated.topic === 'string' ? decorated.topic.split(':')[2] : undefined;
  const data = record(record(decorated.payload)?.data);
  if (topic === MESSAGES_TOPIC) {
    // messages.go:112-141 (DecoratedMessage, Message); the conversation as handlelinkedin.go:119,127 reads it.
    const result = record(record(data?.doDecorateMessageMessengerRealtimeDecoration)?.result);
    const conversationUrn = record(result?.conversation)?.entityUrn ?? result?.conversationUrn;
    const message = readMessage(result);
    if (typeof conversationUrn !== 'string' || !message) return { kind: 'other' };
    return { kind: 'message', conversationUrn, message };
  }
  if (topic === SEEN_RECEIPTS_TOPIC) {
    // receipts.go:32-41 (DecoratedSeenReceipt, SeenReceipt: seenAt, message, seenByParticipant).
    const result = record(record(data?.doDecorateSeenReceiptMessengerRealtimeDecoration)?.result);
    const messageUrn = record(result?.message)?.entityUrn;
    if (typeof messageUrn !== 'string' || typeof result?.seenAt !== 'number') return { kind: 'other' };
    return { kind: 'seen', messageUrn, seenAt: result.seenAt, seenBy: profileOfParticipant(record(result.seenByParticipant)?.entityUrn) };
  }
  return { kind: 'other' };
}
