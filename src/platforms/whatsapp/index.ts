import { MiB, WHATSAPP_PTT_VOICE } from '../../audio/targets.js';
import { DeliveryError, type PlatformDefinition, type PlatformSession } from '../platform.js';
import { createWhatsappAdapter } from './adapter.js';
import { askWhatsappAboutRecipient } from './recipient-check.js';
import { checkWhatsappRecipient, checkWhatsappSession, type WhatsappSessionRef } from './rules.js';

const sessionIdOf = (session: PlatformSession): string => (session as unknown as WhatsappSessionRef).session_id;

/** WhatsApp as a linked device (Baileys), through a session linked with POST /whatsapp/sessions. */
export const whatsapp: PlatformDefinition = {
  name: 'whatsapp',
  // Ogg Opus in the native push-to-talk profile (src/audio/whatsapp-ptt.ts); WhatsApp takes audio up to 16 MB.
  audio: { ...WHATSAPP_PTT_VOICE, maxBytes: 16 * MiB, maxDurationSeconds: null },
  maxCaptionLength: null,
  sessionFields: ['session_id'],
  checkRecipient: checkWhatsappRecipient,
  checkSession: checkWhatsappSession,
  // Presence `recording` on the chat.
  recordingIndicator: true,
  // The linked session, by its id (not a secret).
  senderKey: sessionIdOf,
  senderKind: () => 'whatsapp_session',

  async checkAtAccept(session, owner, services) {
    const id = sessionIdOf(session);
    const linked = await services.whatsappSessions.get(owner, id);
    if (!linked) {
      return { code: 'invalid_parameter', message: `no WhatsApp session ${id} for this API key's account and environment`, details: { field: 'session.session_id' } };
    }
    if (linked.status !== 'connected') {
      return {
        code: 'session_not_connected',
        message: `WhatsApp session ${linked.id} is ${linked.status}, not connected`,
        details: { field: 'session.session_id', status: linked.status },
      };
    }
    return null;
  },

  recipientExists: ({ session, recipient }, services) => askWhatsappAboutRecipient({ db: services.db.kysely, acquire: (id) => services.whatsappLive.acquire(id) }, sessionIdOf(session), recipient),

  // Only the process holding the session's socket can send through it.
  affinityKey: sessionIdOf,

  createLiveAdapter: ({ services }) => createWhatsappAdapter({ db: services.db.kysely, live: services.whatsappLive }),

  async sandboxCheck(job, { services }) {
    const status = (await services.whatsappSessions.get({ accountId: job.accountId, env: job.env }, sessionIdOf(job.session)))?.status;
    if (status === undefined) throw new DeliveryError('invalid_session', 'the WhatsApp session no longer exists', false);
    if (status !== 'connected') throw new DeliveryError('session_not_connected', `the WhatsApp session is ${status}, not connected`, false);
  },
};
