import { findSessionById } from '../../../store/whatsapp-live.js';
import { KeyedPacer } from '../../pacing.js';
import { paceFactorOf } from '../new-chat-cap.js';
import type { WhatsappSocket } from '../socket.js';
import type { Connections } from './connection.js';
import { keepForResend } from './resend.js';
import { SessionNotOpenError, type Acquired, type HeldSession, type LiveContext, type Link } from './context.js';

/**
 * Sending: the socket of a session held here (taking it over when it is free), one send at a time per
 * session with a gap and jitter between sends, since bursts get accounts banned.
 */
export function createSending(ctx: LiveContext, connections: Connections, restore: (id: string) => Promise<Link | undefined>) {
  const { db, tuning, links, holderId, state } = ctx;
  const { waitOpen } = connections;
  // A send that finds its session busy or in its gap is refused (PacingBusy) and goes back to the queue.
  // The gap widens at the warnings of WhatsApp's new-chat message cap (new-chat-cap.ts).
  const gapOf = (sessionId: string) => (tuning.sendGapMs + Math.random() * tuning.sendJitterMs) * paceFactorOf(links.get(sessionId)?.newChatCap);
  const sendPacer = new KeyedPacer(gapOf, tuning.sendGapMs + tuning.sendJitterMs);

  function heldSession(link: Link): HeldSession {
    return {
      sessionId: link.id,
      paced<T>(send: (socket: WhatsappSocket) => Promise<T>): Promise<T> {
        return sendPacer.run(link.id, async () => {
          const socket = link.socket;
          if (link.phase !== 'open' || !socket) throw new SessionNotOpenError(link.id);
          return send(socket);
        });
      },
      keepForResend: (sent) => keepForResend(ctx, link.id, sent),
    };
  }

  async function acquire(sessionId: string): Promise<Acquired> {
    let link = links.get(sessionId);
    if (!link) {
      if (!state.serving) return { reason: 'not_held' };
      link = await restore(sessionId);
      if (!link) {
        const row = await findSessionById(db, sessionId);
        if (row && row.auth_state === null) return { reason: 'no_credentials' };
        const heldElsewhere = row?.holder != null && row.holder !== holderId && Number(row.holder_expires_at) > Date.now();
        return { reason: heldElsewhere ? 'held_elsewhere' : 'not_held' };
      }
    }
    // Waiting for its proxy: the note waits too (retried as any transient fault), saying why.
    if (link.phase === 'waiting' && link.proxyFailure) return { reason: 'proxy_unreachable', message: link.proxyFailure };
    if (!(await waitOpen(link, tuning.connectWaitMs))) return link.proxyFailure ? { reason: 'proxy_unreachable', message: link.proxyFailure } : { reason: 'not_open' };
    return { held: heldSession(link) };
  }

  return { acquire };
}
