import type { SecretBox } from '../../core/secret-box.js';
import { loadBaileys } from './socket.js';

/**
 * What a resend request needs of a sent message, and for how long it is kept. WhatsApp asks the sender's
 * device to send a message again when a recipient's device could not decrypt it ("Waiting for this
 * message"); Baileys answers through `getMessage` with the message's content, re-encrypted for that
 * device. The content of a voice note holds the URL and media key of the audio already uploaded, so a
 * resend does not upload it again.
 */

/** How long a sent message can be asked for again. */
export const RESEND_KEEP_DAYS = 14;
export const RESEND_KEEP_MS = RESEND_KEEP_DAYS * 86_400_000;

/** The content as protobuf bytes (base64), sealed: the media key inside opens the uploaded audio. */
export async function sealMessageContent(box: SecretBox, message: unknown): Promise<string> {
  const { proto } = await loadBaileys();
  const bytes = proto.Message.encode(proto.Message.fromObject(message as Record<string, unknown>)).finish();
  return box.seal(Buffer.from(bytes).toString('base64'));
}

/** The content again, as the `proto.Message` Baileys relays. */
export async function openMessageContent(box: SecretBox, sealed: string): Promise<unknown> {
  const { proto } = await loadBaileys();
  return proto.Message.decode(Buffer.from(box.open(sealed), 'base64'));
}

/**
 * A chat as WhatsApp names it, without the device (`14155550100:3@s.whatsapp.net` →
 * `14155550100@s.whatsapp.net`): `pn` for a phone-number chat, `lid` for a linked-identity one (the
 * addressing Baileys 7 also receives). Undefined for anything else (groups, broadcasts, channels).
 */
export function chatOfJid(jid: string | null | undefined): { kind: 'pn' | 'lid'; user: string; jid: string } | undefined {
  const at = jid ? jid.indexOf('@') : -1;
  if (!jid || at <= 0) return undefined;
  const server = jid.slice(at + 1);
  const user = jid.slice(0, at).split(':')[0]!.split('_')[0]!;
  if (!/^\d+$/.test(user)) return undefined;
  if (server === 's.whatsapp.net' || server === 'c.us') return { kind: 'pn', user, jid: `${user}@s.whatsapp.net` };
  if (server === 'lid' || server === 'hosted.lid') return { kind: 'lid', user, jid: `${user}@lid` };
  return undefined;
}
