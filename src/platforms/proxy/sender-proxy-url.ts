import type { Kysely } from 'kysely';
import type { SecretBox } from '../../core/secret-box.js';
import type { Database } from '../../store/schema.js';
import { findLiveProxyByKey, findSenderProxy } from '../../store/sender-proxy.js';
import type { SenderRef } from '../../store/senders.js';

/** A sender's own proxy sealed under another SECRET_KEY: it can never be opened again. */
export class UnreadableProxy extends Error {}

/**
 * The proxy URL a live sender's connections go through (docs/proxies.md): its own, read at each use so a
 * change applies from its next connection, else the operator's OUTBOUND_PROXY, else null (direct).
 * Throws when its own cannot be opened (sealed under another SECRET_KEY): never direct instead.
 */
export async function senderProxyUrl(
  deps: { db: Kysely<Database>; secretBox: SecretBox; outboundProxy: string | undefined },
  sender: SenderRef | { platform: string; senderKey: string },
): Promise<string | null> {
  const sealed = 'accountId' in sender ? await findSenderProxy(deps.db, sender) : await findLiveProxyByKey(deps.db, sender.platform, sender.senderKey);
  if (sealed === null) return deps.outboundProxy ?? null;
  try {
    return deps.secretBox.open(sealed);
  } catch {
    throw new UnreadableProxy("the sender's stored proxy cannot be decrypted (was SECRET_KEY changed since it was set?); set it again with PATCH /senders/{id}");
  }
}
