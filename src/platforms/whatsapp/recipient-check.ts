import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import { findRecipientCheck, saveRecipientCheck } from '../../store/recipient-checks.js';
import type { Database } from '../../store/schema.js';
import { PacingBusy } from '../pacing.js';
import { DeliveryError, type RecipientCheck } from '../platform.js';
import type { Acquired } from './live.js';
import type { WhatsappSocket } from './socket.js';

/**
 * Is a number on WhatsApp? The session's own `onWhatsApp`, its answer (and the JID it gives) kept per
 * session for 30 days (store/recipient-checks.ts): a live send asks only before its first note to a number,
 * since writing to numbers that are not on WhatsApp is one way a number gets locked out of new chats.
 */
export async function askWhatsapp(db: Kysely<Database>, socket: WhatsappSocket, sessionId: string, recipient: string): Promise<{ exists: boolean; jid: string | null }> {
  let found: Awaited<ReturnType<WhatsappSocket['onWhatsApp']>>;
  try {
    found = await socket.onWhatsApp(recipient);
  } catch (error) {
    throw new DeliveryError('platform_error', `WhatsApp could not look up the recipient: ${(error as Error).message}`, true);
  }
  if (found === undefined) throw new DeliveryError('platform_error', 'WhatsApp did not answer the recipient lookup', true);
  const account = found.find((entry) => entry.exists === true);
  const answer = { exists: account !== undefined, jid: account ? account.jid || `${recipient}@s.whatsapp.net` : null };
  await saveRecipientCheck(db, sessionId, recipient, { exists: answer.exists, address: answer.jid });
  return answer;
}

/** The recipient's JID for a send: the kept answer when there is one, else the session asks (inside its pacing). */
export async function recipientJidFor(db: Kysely<Database>, socket: WhatsappSocket, sessionId: string, recipient: string): Promise<string> {
  const known = await findRecipientCheck(db, sessionId, recipient).catch(() => undefined);
  const answer = known ? { exists: known.exists, jid: known.address } : await askWhatsapp(db, socket, sessionId, recipient);
  if (!answer.exists) throw new DeliveryError('recipient_not_found', `${recipient} is not on WhatsApp`, false);
  return answer.jid ?? `${recipient}@s.whatsapp.net`;
}

/** The longest a check waits for the session's turn (its sends and other checks) before saying it could not ask. */
const TURN_WAIT_MS = 10_000;

/** POST /recipients/check for a live session: asked now, paced with the session's sends (waiting up to 10 s for its turn). */
export async function askWhatsappAboutRecipient(
  deps: { db: Kysely<Database>; acquire(sessionId: string): Promise<Acquired> },
  sessionId: string,
  recipient: string,
): Promise<RecipientCheck> {
  const acquired = await deps.acquire(sessionId);
  if (!acquired.held) return { exists: null, reason: `the WhatsApp session cannot be used from here right now (${acquired.reason.replaceAll('_', ' ')})` };
  const ask = () => acquired.held.paced((socket) => askWhatsapp(deps.db, socket, sessionId, recipient));
  try {
    const deadline = Date.now() + TURN_WAIT_MS;
    let answer;
    for (;;) {
      try {
        answer = await ask();
        break;
      } catch (error) {
        if (!(error instanceof PacingBusy) || Date.now() + error.retryAfterMs > deadline) throw error;
        await sleep(error.retryAfterMs);
      }
    }
    return answer.exists ? { exists: true, reason: null } : { exists: false, reason: `${recipient} is not on WhatsApp` };
  } catch (error) {
    return { exists: null, reason: `WhatsApp did not say: ${(error as Error).message}` };
  }
}
