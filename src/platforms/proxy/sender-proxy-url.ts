import type { Kysely } from 'kysely';
import type { SecretBox } from '../../core/secret-box.js';
import type { Database } from '../../store/schema.js';
import { findLiveProxyByKey, findSenderProxy } from '../../store/sender-proxy.js';
import type { SenderRef } from '../../store/senders.js';
import { parseProxyUrl, shownProxy } from '../../core/proxy-url.js';
import { privateAddressProblem, type Lookup } from './check.js';
import { ProxyFailure } from './tunnel.js';

/** A sender's own proxy sealed under another SECRET_KEY: it can never be opened again. */
export class UnreadableProxy extends Error {}

/**
 * The proxy URL a live sender's connections go through (docs/proxies.md): its own, read at each use so a
 * change applies from its next connection, else the operator's OUTBOUND_PROXY, else null (direct).
 * Throws when its own cannot be opened (sealed under another SECRET_KEY): never direct instead.
 */
export async function senderProxyUrl(
  deps: { db: Kysely<Database>; secretBox: SecretBox; outboundProxy: string | undefined; allowPrivate?: boolean; lookup?: Lookup },
  sender: SenderRef | { platform: string; senderKey: string },
): Promise<string | null> {
  const sealed = 'accountId' in sender ? await findSenderProxy(deps.db, sender) : await findLiveProxyByKey(deps.db, sender.platform, sender.senderKey);
  if (sealed === null) return deps.outboundProxy ?? null;
  let url: string;
  try {
    url = deps.secretBox.open(sealed);
  } catch {
    throw new UnreadableProxy("the sender's stored proxy cannot be decrypted (was SECRET_KEY changed since it was set?); set it again with PATCH /senders/{id}");
  }
  if (deps.allowPrivate !== undefined) await holdToAddressRule(url, { allowPrivate: deps.allowPrivate, ...(deps.lookup ? { lookup: deps.lookup } : {}) });
  return url;
}

/**
 * The private-address rule again at each use of a sender's own proxy (docs/proxies.md, "No door inside"),
 * its name resolved again: where a name points may have changed since it was set. A ProxyFailure when it
 * is refused: never a reason to connect directly.
 */
export async function holdToAddressRule(url: string, options: { allowPrivate: boolean; lookup?: Lookup }): Promise<void> {
  if (options.allowPrivate) return;
  const proxy = parseProxyUrl(url);
  if ('problem' in proxy) throw new ProxyFailure('unreachable', `the sender's proxy cannot be used: ${proxy.problem}`);
  const problem = await privateAddressProblem(proxy, options);
  if (problem) throw new ProxyFailure('unreachable', `the proxy ${shownProxy(proxy)} is refused: ${problem}`);
}
