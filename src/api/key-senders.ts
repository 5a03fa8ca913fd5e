import type { PlatformDefinition, PlatformSession } from '../platforms/platform.js';
import type { Services } from '../services.js';
import { findMessage } from '../store/messages.js';
import { findSenderByRef } from '../store/senders.js';
import type { Caller } from './caller.js';
import { ApiError } from './errors.js';

/**
 * A key limited to named senders (docs/security.md, "Key scopes") sends, asks about recipients and
 * cancels notes only as one of them: a WhatsApp or Telegram account session named by its id (ws_…,
 * ts_…), or any sender named by its sender id (snd_…, from GET /senders). A sender the account never
 * used has no sender id yet, so only a key with no limit can be the first to send from it.
 */
export async function checkKeySender(services: Services, caller: Caller, platform: PlatformDefinition, session: PlatformSession): Promise<void> {
  if (caller.senders === null) return;
  const senderKey = platform.senderKey?.(session) ?? null;
  if (await senderAllowed(services, caller, caller.senders, platform.name, senderKey)) return;
  throw notAllowed(caller, caller.senders, `this ${platform.name} session is not one of them`);
}

/**
 * Canceling is as limited as sending: a key given one sender cancels only that sender's notes (an
 * agent's key must not stop what a person scheduled from another). An unknown id passes, for the route
 * to answer 404 as it does to any key.
 */
export async function checkKeySenderOfMessage(services: Services, caller: Caller, messageId: string): Promise<void> {
  if (caller.senders === null) return;
  const message = await findMessage(services.db.kysely, { accountId: caller.accountId, env: caller.env }, messageId);
  if (!message) return;
  if (await senderAllowed(services, caller, caller.senders, message.platform, message.sender_key ?? null)) return;
  throw notAllowed(caller, caller.senders, `message ${messageId} was sent from another sender`);
}

async function senderAllowed(services: Services, caller: Caller, allowed: readonly string[], platform: string, senderKey: string | null): Promise<boolean> {
  if (senderKey === null) return false;
  // WhatsApp sessions and Telegram accounts are their own sender key (ws_…, ts_…).
  if (allowed.includes(senderKey)) return true;
  const record = await findSenderByRef(services.db.kysely, { accountId: caller.accountId, env: caller.env, platform, senderKey });
  return record !== undefined && allowed.includes(record.id);
}

const notAllowed = (caller: Caller, allowed: readonly string[], why: string): ApiError =>
  new ApiError('sender_not_allowed', `this key (scope ${caller.scope}) may send only from ${allowed.join(', ')}; ${why}`, { scope: caller.scope, senders: [...allowed] });
