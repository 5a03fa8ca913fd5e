import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { failRefusedNote } from '../../store/refused-notes.js';
import type { Database } from '../../store/schema.js';
import { applyReachoutLock, readReachoutLock } from './reachout-lock.js';
import type { MessageStatusUpdate, WhatsappSocket } from './socket.js';

/**
 * WhatsApp refusing a note after the send: Baileys' `sendMessage` resolves once the message is relayed,
 * before the server's acknowledgement. A refusal comes later, in that acknowledgement, and Baileys
 * reports it as `messages.update` with `status` 0 (ERROR) and the server's code first in
 * `messageStubParameters` (rc14 `lib/Socket/messages-recv.js`, `handleBadAck`). The note was recorded
 * as delivered by then: it becomes `failed` (`platform_refused`), and is never sent again by itself
 * (Baileys: a retry counts as another reach-out and worsens a restriction).
 *
 * 463 is both the reachout timelock and a chat missing its privacy token (rc14 gives the two the same
 * code and runs its token recovery, never its own lock branch; Baileys #2441, #2688, #2698; WAHA #2219
 * saw 463 with no lock active): WhatsApp is asked whether a lock is active, and the session's sender is
 * `restricted` only when it is.
 */

/** `WAMessageStatus.ERROR` (`proto.WebMessageInfo.Status`). */
export const WHATSAPP_ERROR_STATUS = 0;

/** How long after a refusal its note's delivery is waited for, when the refusal came before the outcome was written. */
const SETTLE_WAITS_MS = [100, 250, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000];

export function refusalMessage(code: string): string {
  const why =
    code === '463'
      ? 'error 463: this number may not start a chat with the recipient now — its reachout timelock, or a chat WhatsApp has no privacy token for'
      : `error ${code}`;
  return `WhatsApp refused the voice note after accepting it (${why}); it is not sent again by itself`;
}

/** The error acknowledgements among a socket's `messages.update`, each made the failure of its note. */
export async function followErrorAcks(
  deps: { db: Kysely<Database>; logger: Logger; now: () => number },
  session: { id: string; socket: WhatsappSocket },
  updates: readonly MessageStatusUpdate[],
): Promise<void> {
  for (const { key, update } of updates) {
    if (update.status !== WHATSAPP_ERROR_STATUS || key.fromMe === false || !key.id) continue;
    const code = String(update.messageStubParameters?.[0] ?? 'unknown');
    const failed = await failWhenSettled(deps, key.id, code);
    if (!failed) continue;
    deps.logger.warn({ message_id: failed, code }, 'WhatsApp refused a voice note it had taken: failed');
    if (code !== '463') continue;
    const lock = await readReachoutLock(session.socket);
    if (lock?.isActive) await applyReachoutLock(deps.db, session.id, lock);
  }
}

/** Fails the note once its delivery is written (the acknowledgement can come first); its id, or undefined when it is none of ours. */
async function failWhenSettled(deps: { db: Kysely<Database>; logger: Logger; now: () => number }, platformMessageId: string, code: string): Promise<string | undefined> {
  for (const waitMs of [0, ...SETTLE_WAITS_MS]) {
    if (waitMs > 0) await sleep(waitMs, undefined, { ref: false });
    const result = await failRefusedNote(deps.db, platformMessageId, { errorCode: 'platform_refused', errorMessage: refusalMessage(code), at: deps.now() });
    if (result.kind === 'failed') return result.message.id;
    if (result.kind === 'none') return undefined;
  }
  deps.logger.warn({ platform_message_id: platformMessageId, code }, "WhatsApp refused a voice note whose delivery was not written in time; it stays as it is");
  return undefined;
}
