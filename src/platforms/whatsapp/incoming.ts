import type { HeardReply, ReplyType } from '../../inbound/heard.js';
import { phoneOfJid, type IncomingWhatsappMessage, type MessagesUpsert } from './socket.js';

/**
 * What a live socket's `messages.upsert` brings, turned into the one heard shape. Both kinds of upsert:
 * `notify` (a message as it arrives) and `append`, which is how Baileys hands on what WhatsApp held while
 * no socket was connected (rc14 `lib/Socket/messages-recv.js`: `upsertMessage(msg, node.attrs.offline ?
 * 'append' : 'notify')`) — every reconnect, restart or takeover has such a window. Our own sends echoed
 * (also `append`) are left out as any message from us is; a message heard twice is recorded once (by its
 * id). Only messages from someone else in a one-to-one chat: groups (`@g.us`), status updates
 * (`status@broadcast`), broadcast lists and channels are never heard. Media is described (its kind and
 * caption), never downloaded.
 *
 * WhatsApp now delivers many private chats from a hidden `@lid` identity instead of the phone number
 * the note went to; the phone number comes from the key (Baileys 7: `remoteJidAlt`; older releases:
 * `senderPn`), from the LID mappings this socket announced (`lid-mapping.update`), or from Baileys' own
 * LID mapping store. A LID that none of them can map is not heard (it could only be a stranger to us).
 */

/** The LIDs this socket has learned the phone numbers of, and Baileys' store for the rest. */
export interface LidResolver {
  learned: Map<string, string>;
  lookup?: (lid: string) => Promise<string | null>;
}

const userOf = (jid: string): string => jid.split('@')[0]!.split(':')[0]!;

export async function phoneOfSender(key: IncomingWhatsappMessage['key'], lids: LidResolver): Promise<string | null> {
  const jid = key.remoteJid ?? '';
  if (jid.endsWith('@s.whatsapp.net')) return phoneOfJid(jid);
  if (!jid.endsWith('@lid')) return null;
  for (const alt of [key.remoteJidAlt, key.senderPn, key.participantPn, key.participantAlt]) {
    if (alt && alt.endsWith('@s.whatsapp.net')) return phoneOfJid(alt);
  }
  const learned = lids.learned.get(userOf(jid));
  if (learned) return learned;
  const found = await lids.lookup?.(jid).catch(() => null);
  return found ? phoneOfJid(found) : null;
}

type Content = Record<string, unknown>;
const WRAPPERS = ['ephemeralMessage', 'viewOnceMessage', 'viewOnceMessageV2', 'viewOnceMessageV2Extension', 'documentWithCaptionMessage', 'editedMessage'];

/** The message inside the wrappers WhatsApp puts around disappearing, view-once and captioned documents. */
function unwrap(message: Content | null | undefined): Content | undefined {
  let content = message ?? undefined;
  for (let depth = 0; content && depth < 4; depth++) {
    const wrapper = WRAPPERS.map((name) => content![name] as { message?: Content } | undefined).find((w) => w?.message);
    if (!wrapper) break;
    content = wrapper.message;
  }
  return content;
}

const str = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

/** Its kind and text or caption; undefined for what is no message of the person (protocol messages, key distribution, stubs). */
export function describeContent(message: Content | null | undefined): { type: ReplyType; text: string | null } | undefined {
  const content = unwrap(message);
  if (!content) return undefined;
  const field = <T = Content>(name: string) => content[name] as (T & Content) | undefined;
  if (str(content.conversation)) return { type: 'text', text: str(content.conversation) };
  if (field('extendedTextMessage')) return { type: 'text', text: str(field('extendedTextMessage')!.text) };
  if (field('audioMessage')) return { type: field('audioMessage')!.ptt === true ? 'voice' : 'audio', text: null };
  if (field('imageMessage')) return { type: 'image', text: str(field('imageMessage')!.caption) };
  if (field('videoMessage')) return { type: 'video', text: str(field('videoMessage')!.caption) };
  if (field('ptvMessage')) return { type: 'video', text: null };
  if (field('documentMessage')) return { type: 'document', text: str(field('documentMessage')!.caption) };
  if (field('stickerMessage')) return { type: 'sticker', text: null };
  const meaningful = Object.keys(content).filter((name) => !['protocolMessage', 'senderKeyDistributionMessage', 'messageContextInfo'].includes(name));
  return meaningful.length > 0 ? { type: 'other', text: null } : undefined;
}

/**
 * The id of the message this one quotes (a reply to it in WhatsApp's interface): `contextInfo.stanzaId`
 * of its content (`extendedTextMessage`, `audioMessage`, `imageMessage`, …; proto `ContextInfo`).
 */
export function quotedId(message: Content | null | undefined): string | undefined {
  const content = unwrap(message);
  if (!content) return undefined;
  for (const value of Object.values(content)) {
    const stanzaId = (value as { contextInfo?: { stanzaId?: unknown } } | null)?.contextInfo?.stanzaId;
    if (typeof stanzaId === 'string' && stanzaId !== '') return stanzaId;
  }
  return undefined;
}

/** Epoch ms of Baileys' `messageTimestamp` (seconds, as a number or a Long); `fallback` when missing. */
function timestampMs(value: unknown, fallback: number): number {
  const seconds = typeof value === 'number' ? value : typeof value === 'object' && value !== null && 'toNumber' in value ? (value as { toNumber(): number }).toNumber() : Number(value);
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : fallback;
}

const quoting = (message: Content | null | undefined): { quotes?: string } => {
  const quotes = quotedId(message);
  return quotes ? { quotes } : {};
};

/** The replies an upsert carries, for the session `sessionId` (the notes' sender key). */
export async function heardFromUpsert(upsert: MessagesUpsert, sessionId: string, lids: LidResolver, now: number): Promise<HeardReply[]> {
  if (upsert.type !== 'notify' && upsert.type !== 'append') return [];
  const heard: HeardReply[] = [];
  for (const message of upsert.messages) {
    const { key } = message;
    if (key.fromMe || !key.id || !key.remoteJid) continue;
    const described = describeContent(message.message as Content | null | undefined);
    if (!described) continue;
    const phone = await phoneOfSender(key, lids);
    if (!phone) continue;
    heard.push({
      kind: 'reply',
      platform: 'whatsapp',
      senderKey: sessionId,
      from: phone,
      reply: { platformId: key.id, type: described.type, text: described.text, at: timestampMs(message.messageTimestamp, now), ...quoting(message.message as Content | null | undefined) },
    });
  }
  return heard;
}
