/**
 * What listening to a LinkedIn conversation asks and when, in one place: the growing intervals after a
 * note, the request the web app makes for a conversation's messages, and how its answer is read.
 *
 * The request is the one mautrix-linkedin (pkg/linkedingo/messages.go, GetMessagesBefore) makes: the
 * messenger GraphQL endpoint with the `messengerMessages` query by anchor timestamp, `accept:
 * application/graphql`, variables in Rest.li form. The query id is LinkedIn's hash of the web app's
 * query and changes when LinkedIn ships a new one: when it does, this file is the one edit (and
 * test/fakes/linkedin-voyager.ts, which checks the same shape).
 */
import type { Heard, ReplyType } from '../../inbound/heard.js';
import { ACCEPT_GRAPHQL_MESSAGES } from './voyager-requests.js';
import type { VoyagerRequest } from './voyager-requests.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** When to look after a note: 2 min, 10 min, 1 h, 6 h after it, then once a day until the window ends. */
export const LISTEN_INTERVALS_MS: readonly number[] = [2 * MINUTE, 10 * MINUTE, HOUR, 6 * HOUR];
export const LISTEN_DAILY_MS = DAY;

/** The time of look number `checks` (0: the first) after a note delivered at `noteAt`. */
export function checkAt(noteAt: number, checks: number, intervals: readonly number[] = LISTEN_INTERVALS_MS, dailyMs = LISTEN_DAILY_MS): number {
  if (checks < intervals.length) return noteAt + intervals[checks]!;
  return noteAt + (intervals.at(-1) ?? 0) + (checks - intervals.length + 1) * dailyMs;
}

/** mautrix-linkedin's graphQLQueryIDMessengerMessagesByAnchorTimestamp. */
export const MESSAGES_QUERY_ID = 'messengerMessages.4088d03bc70c91c3fa68965cb42336de';
/** How many messages before now one look reads. */
export const MESSAGES_PER_LOOK = 20;

/** As Go's url.QueryEscape writes a value (parentheses too), so the urn cannot break the Rest.li tuple around it. */
const queryEscape = (value: string): string => encodeURIComponent(value).replace(/[()!'*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** The messages of one conversation delivered before `before` (the newest `MESSAGES_PER_LOOK`). */
export const conversationMessagesRequest = (conversationUrn: string, before: number): VoyagerRequest => ({
  method: 'GET',
  path:
    `/voyager/api/voyagerMessagingGraphQL/graphql?queryId=${MESSAGES_QUERY_ID}` +
    `&variables=(deliveredAt:${Math.floor(before)},conversationUrn:${queryEscape(conversationUrn)},countBefore:${MESSAGES_PER_LOOK},countAfter:0)`,
  accept: ACCEPT_GRAPHQL_MESSAGES,
});

/** One message of a conversation as a reply would be recorded. */
export interface ConversationMessage {
  entityUrn: string;
  deliveredAt: number;
  /** The sender's profile urn (`urn:li:fsd_profile:…`), from its messaging participant urn. */
  senderProfileUrn: string | undefined;
  type: ReplyType;
  text: string | null;
  /** The entityUrn of the message it quotes (a reply to it), when it quotes one. */
  quotes: string | undefined;
}

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/**
 * What a message carries: its first render content decides (audio is a voice note), none is text. The
 * quoted message of a reply is a render content of its own (repliedMessageContent) beside the reply's
 * text: it is not what the reply carries.
 */
function typeOf(renderContent: unknown): ReplyType {
  const own = Array.isArray(renderContent) ? renderContent.filter((c) => !record(c)?.repliedMessageContent) : [];
  const first = record(own[0]);
  if (!first) return 'text';
  if (first.audio) return 'voice';
  if (first.vectorImage) return 'image';
  if (first.file) return 'document';
  return 'other';
}

/** `data.messengerMessagesByAnchorTimestamp.elements` (also under a second `data`, as normalized answers nest it). */
export function readConversationMessages(answer: unknown): ConversationMessage[] | undefined {
  const data = record(record(answer)?.data);
  const collection = record(data?.messengerMessagesByAnchorTimestamp) ?? record(record(data?.data)?.messengerMessagesByAnchorTimestamp);
  const elements = collection?.elements;
  if (!Array.isArray(elements)) return undefined;
  return elements.flatMap((element) => readMessage(element) ?? []);
}

/**
 * One `com.linkedin.messenger.Message` (an element of the messages query, or what the realtime stream
 * pushes on messagesTopic: the same object), as a reply would be recorded; undefined when it answers
 * nothing or is not a message.
 */
export function readMessage(element: unknown): ConversationMessage | undefined {
  const m = record(element);
  if (!m || typeof m.entityUrn !== 'string' || typeof m.deliveredAt !== 'number') return undefined;
  // LinkedIn's own lines in the thread (SYSTEM) and messages taken back (RECALLED) answer nothing: as
  // mautrix-linkedin (pkg/connector/handlelinkedin.go) ignores the one and removes the other.
  if (m.messageBodyRenderFormat === 'SYSTEM' || m.messageBodyRenderFormat === 'RECALLED') return undefined;
  const text = record(m.body)?.text;
  return {
    entityUrn: m.entityUrn,
    deliveredAt: m.deliveredAt,
    senderProfileUrn: profileOfParticipant(record(m.sender)?.entityUrn),
    type: typeOf(m.renderContent),
    text: typeof text === 'string' && text !== '' ? text : null,
    quotes: quotedUrn(m.renderContent),
  };
}

/** The profile urn (`urn:li:fsd_profile:…`) a messaging participant urn ends with. */
export function profileOfParticipant(participant: unknown): string | undefined {
  return typeof participant === 'string' ? /urn:li:fsd_profile:[A-Za-z0-9_-]+$/.exec(participant)?.[0] : undefined;
}

/** `renderContent[].repliedMessageContent.originalMessage.entityUrn`: the message a reply quotes. */
function quotedUrn(renderContent: unknown): string | undefined {
  if (!Array.isArray(renderContent)) return undefined;
  for (const content of renderContent) {
    const urn = record(record(record(content)?.repliedMessageContent)?.originalMessage)?.entityUrn;
    if (typeof urn === 'string') return urn;
  }
  return undefined;
}

/** The mailbox (own profile urn) a conversation urn names: `urn:li:msg_conversation:(<mailbox>,<thread>)`. */
export function mailboxOf(conversationUrn: string): string | undefined {
  return /^urn:li:msg_conversation:\((urn:li:fsd_profile:[A-Za-z0-9_-]+),/.exec(conversationUrn)?.[1];
}

/** The message a createMessage answer names (`value.entityUrn`): a reply quoting the note names it. */
export function readSentMessage(answer: unknown): string | undefined {
  const urn = record(record(answer)?.value)?.entityUrn;
  return typeof urn === 'string' && urn.startsWith('urn:li:msg_message:') ? urn : undefined;
}

/** The conversation a createMessage answer names (`value.conversationUrn`), when it does. */
export function readSentConversation(answer: unknown): string | undefined {
  const value = record(record(answer)?.value);
  const urn = value?.conversationUrn;
  return typeof urn === 'string' && mailboxOf(urn) !== undefined ? urn : undefined;
}

/** A recipient's message in a listened conversation, as the recorder takes it. */
export function replyHeard(senderKey: string, recipient: string, message: ConversationMessage): Heard {
  return {
    kind: 'reply',
    platform: 'linkedin',
    senderKey,
    from: recipient,
    // Only live sends listen: a sandbox note sent with the same li_at is never answered by a real person.
    env: 'live',
    reply: { platformId: message.entityUrn, type: message.type, text: message.text, at: message.deliveredAt, quotes: message.quotes },
  };
}
