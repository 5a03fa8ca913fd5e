import { findSentMessage, keepSentMessage } from '../../../store/whatsapp-sent-messages.js';
import { chatOfJid, openMessageContent, RESEND_KEEP_MS, sealMessageContent } from '../resend.js';
import type { ResendRequestKey, SentWhatsappMessage } from '../socket.js';
import type { LiveContext, Link } from './context.js';

/**
 * Resend requests of live sessions: every voice note a session sends is kept (sealed, in the database)
 * so that whichever process holds the session when a recipient's device asks for it again answers
 * with it — after a restart, a takeover, or days later — not only the process that sent it, within
 * Baileys' own five-minute cache.
 */

/** Keeps what Baileys sent; a failure is logged, not thrown: the voice note is out already. */
export async function keepForResend(ctx: LiveContext, sessionId: string, sent: SentWhatsappMessage | undefined): Promise<void> {
  const log = ctx.log(sessionId);
  const chat = chatOfJid(sent?.key?.remoteJid);
  const messageId = sent?.key?.id;
  if (!chat || !messageId || !sent?.message) {
    log.warn({ message_id: messageId ?? null }, 'WhatsApp gave back no message content; a resend request for it cannot be answered');
    return;
  }
  try {
    const content = await sealMessageContent(ctx.secretBox, sent.message);
    const kept = await keepSentMessage(ctx.db, { sessionId, remoteJid: chat.jid, messageId, content, createdAt: Date.now() });
    if (!kept) log.debug({ message_id: messageId }, 'the session is gone; the sent message is not kept');
  } catch (err) {
    log.warn({ err, message_id: messageId }, 'could not keep a sent WhatsApp message for resend requests');
  }
}

/** Baileys' `getMessage` for one session: the content of a message it sent (and still keeps), or undefined. */
export function resendAnswers(ctx: LiveContext, link: Link): (key: ResendRequestKey) => Promise<unknown> {
  return async (key) => {
    const log = ctx.log(link.id);
    // Only what this device sent is asked for again from here.
    if (!key.id || key.fromMe === false) return undefined;
    try {
      const chat = chatOfJid(key.remoteJid);
      if (!chat) return undefined;
      const chats = [chat.jid];
      // A chat WhatsApp names by linked identity: the phone number it stands for, from the mapping Baileys keeps.
      if (chat.kind === 'lid') {
        const reverse = `${chat.user}_reverse`;
        const mapped = (await link.auth.keys.get('lid-mapping', [reverse]))[reverse];
        if (typeof mapped === 'string' && /^\d+$/.test(mapped)) chats.unshift(`${mapped}@s.whatsapp.net`);
      }
      const since = Date.now() - RESEND_KEEP_MS;
      for (const remoteJid of chats) {
        const sealed = await findSentMessage(ctx.db, { sessionId: link.id, remoteJid, messageId: key.id, since });
        if (sealed !== undefined) {
          log.info({ message_id: key.id }, 'a recipient device asked for a voice note again; resending it');
          return await openMessageContent(ctx.secretBox, sealed);
        }
      }
      log.debug({ message_id: key.id }, 'a resend request for a message that is not kept');
      return undefined;
    } catch (err) {
      log.warn({ err, message_id: key.id }, 'could not look up a sent WhatsApp message for a resend request');
      return undefined;
    }
  };
}
