import { PRIVATE_URLS_HINT } from '../audio/url-check.js';
import { parseProxyUrl, proxyUrlOf, shownProxy, type ProxyAddress } from '../core/proxy-url.js';
import { kindProblem, privateAddressProblem, probeProxy, webSocketHostOf } from '../platforms/proxy/check.js';
import type { Services } from '../services.js';
import { setSenderProxy, type KeptProxy } from '../store/sender-proxy.js';
import type { SenderRecordsTable } from '../store/schema.js';
import { ApiError, invalidParameter } from './errors.js';

/**
 * A proxy being set on a sender, whichever way (docs/proxies.md): `session.proxy` of a send, `proxy` of a
 * new WhatsApp session or Telegram account, PATCH /senders/{id}. Checked in order: its syntax, that the
 * sender's kind can use it, its address (no door into the server's own network), and, for live senders,
 * one connection through it to the platform's host. A sandbox sender keeps it after the syntax check.
 */

// How long the check waits for the proxy to carry its connection.
const PROBE_TIMEOUT_MS = 10_000;

/** Where a sender of this kind connects first: the check's connection goes there. */
export function platformHostOf(services: Services, platform: string, kind?: string): { host: string; port: number } {
  const root = (url: string) => {
    const parsed = new URL(url);
    return { host: parsed.hostname.replace(/^\[|\]$/g, ''), port: Number(parsed.port) || (parsed.protocol === 'https:' ? 443 : 80) };
  };
  // A Telegram account's MTProto connection goes to a data centre (TELEGRAM_DC_ADDRESS), not to the Bot API.
  if (kind === 'telegram_account') return services.config.telegramDcAddress;
  if (platform === 'telegram') return root(services.config.telegramApiRoot);
  if (platform === 'linkedin') return root(services.config.linkedinApiRoot);
  // WhatsApp Web's socket (WHATSAPP_WEB_SOCKET_URL).
  return webSocketHostOf(services.config.whatsappWebSocketUrl);
}

/** The proxy to keep (sealed, and its shown form), or an ApiError naming `field`. */
export async function proxyToKeep(
  services: Services,
  value: unknown,
  sender: { platform: string; kind: string; env: string; field: string; probeTarget?: { host: string; port: number } },
): Promise<KeptProxy> {
  const proxy = checkedProxySyntax(value, sender);
  if (sender.env === 'live') {
    const privateProblem = await privateAddressProblem(proxy, { allowPrivate: services.config.audioAllowPrivateUrls });
    if (privateProblem) throw invalidParameter(sender.field, `${privateProblem}${PRIVATE_URLS_HINT}`);
    const failure = await probeProxy(proxy, sender.probeTarget ?? platformHostOf(services, sender.platform, sender.kind), PROBE_TIMEOUT_MS);
    if (failure) {
      throw new ApiError(failure.kind === 'auth_failed' ? 'proxy_auth_failed' : 'proxy_unreachable', failure.message, { field: sender.field, proxy: shownProxy(proxy) });
    }
  }
  return { sealed: services.secretBox.seal(proxyUrlOf(proxy)), shown: shownProxy(proxy) };
}

/** The proxy's syntax and scheme for this kind of sender, or a 422 naming the field. */
export function checkedProxySyntax(value: unknown, sender: { kind: string; field: string }): ProxyAddress {
  if (typeof value !== 'string' || value === '') throw invalidParameter(sender.field, `${sender.field} must be a proxy URL (scheme://[user:password@]host:port), or null to clear it`);
  const proxy = parseProxyUrl(value);
  if ('problem' in proxy) throw invalidParameter(sender.field, proxy.problem);
  const problem = kindProblem(proxy, sender.kind);
  if (problem) throw invalidParameter(sender.field, problem);
  return proxy;
}

/**
 * Keeps (or with null clears) a sender's proxy, whichever way it was set (PATCH /senders/{id}, the
 * dashboard): a WhatsApp socket or Telegram account connection held by this process connects again
 * through the new one now; other processes see the change at their next lease renewal.
 */
export async function applySenderProxy(services: Services, record: Pick<SenderRecordsTable, 'account_id' | 'env' | 'platform' | 'sender_key' | 'kind'>, kept: KeptProxy | null): Promise<void> {
  const ref = { accountId: record.account_id, env: record.env, platform: record.platform, senderKey: record.sender_key };
  await setSenderProxy(services.db.kysely, ref, record.kind, kept);
  if (record.env !== 'live') return;
  if (record.kind === 'whatsapp_session') await services.whatsappLive.proxyChanged(record.sender_key);
  if (record.kind === 'telegram_account') await services.telegramAccounts.proxyChanged(record.sender_key);
}
