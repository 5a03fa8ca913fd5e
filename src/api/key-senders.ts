import type { PlatformDefinition, PlatformSession } from '../platforms/platform.js';
import type { Services } from '../services.js';
import { findSenderByRef } from '../store/senders.js';
import type { Caller } from './caller.js';
import { ApiError } from './errors.js';

/**
 * A key limited to named senders (docs/security.md, "Key scopes") sends, and asks about recipients, only
 * as one of them: a WhatsApp or Telegram account session named by its id (ws_…, ts_…), or any sender
 * named by its sender id (snd_…, from GET /senders). A sender the account never used has no sender id
 * yet, so only a key with no limit can be the first to send from it.
 */
export async function checkKeySender(services: Services, caller: Caller, platform: PlatformDefinition, session: PlatformSession): Promise<void> {
  const allowed = caller.senders;
  if (allowed === null) return;
  const senderKey = platform.senderKey?.(session);
  if (senderKey !== undefined) {
    // WhatsApp sessions and Telegram accounts are their own sender key (ws_…, ts_…).
    if (allowed.includes(senderKey)) return;
    const record = await findSenderByRef(services.db.kysely, { accountId: caller.accountId, env: caller.env, platform: platform.name, senderKey });
    if (record && allowed.includes(record.id)) return;
  }
  throw new ApiError(
    'sender_not_allowed',
    `this key (scope ${caller.scope}) may send only from ${allowed.join(', ')}; this ${platform.name} session is not one of them`,
    { scope: caller.scope, senders: [...allowed] },
  );
}
