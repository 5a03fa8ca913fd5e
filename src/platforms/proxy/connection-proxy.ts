import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { parseProxyUrl, shownProxy, type ProxyAddress, type ProxyScheme } from '../../core/proxy-url.js';
import type { SecretBox } from '../../core/secret-box.js';
import type { Database } from '../../store/schema.js';
import { followLiveSenderProxy } from '../../store/sender-proxy.js';
import { probeProxy, schemesFor, webSocketHostOf, type Lookup } from './check.js';
import { holdToAddressRule, senderProxyUrl } from './sender-proxy-url.js';
import { ProxyFailure } from './tunnel.js';

/**
 * The proxy of a long-lived connection (a WhatsApp session's socket, a Telegram account's MTProto
 * connection), decided before each (re)connection (docs/proxies.md): the sender's own proxy, read then
 * so a change applies from its next connection, else OUTBOUND_PROXY, else direct. Before the library
 * connects through it, its address is held to the private-address rule again (the name resolved again:
 * what it points at may have changed since it was set) and one connection through it to the platform's
 * host is tried. Fail closed: a proxy that cannot be used is a ProxyFailure (the sender made
 * `disconnected`, `proxy_unreachable`, with `sender.updated`), never a reason to connect directly; one
 * that carries the connection again makes a sender it had cut off `ok`.
 */

export interface ConnectionProxy {
  /** The URL with its credentials (for the library; never logged), or null: direct. */
  url: string | null;
  proxy: ProxyAddress | null;
}

export interface ConnectionProxies {
  /** The proxy for the sender's next connection, checked; throws a ProxyFailure (after marking the sender) when it cannot carry it. */
  next(senderKey: string): Promise<ConnectionProxy>;
  /** The proxy URL the sender's next connection would take, unchecked (to see that it changed); undefined when it cannot be read. */
  current(senderKey: string): Promise<string | null | undefined>;
}

export function connectionProxies(deps: {
  db: Kysely<Database>;
  secretBox: SecretBox;
  outboundProxy: string | undefined;
  /** ALLOW_PRIVATE_URLS: a proxy at a private address is allowed. */
  allowPrivate: boolean;
  platform: string;
  /** Where the sender's connection goes first: the check's connection goes there. */
  target: { host: string; port: number };
  /** The schemes this kind of sender speaks through (a Telegram account: SOCKS5 only). */
  schemes: readonly ProxyScheme[];
  timeoutMs: number;
  log: Logger;
  lookup?: Lookup;
}): ConnectionProxies {
  const { db, platform } = deps;

  async function fail(senderKey: string, failure: ProxyFailure): Promise<never> {
    // The failure's message names the proxy by scheme, host and port only (tunnel.ts).
    deps.log.warn({ sender: senderKey, why: failure.message }, "the sender's proxy did not carry its connection; nothing connects directly");
    await followLiveSenderProxy(db, platform, senderKey, false).catch((err: unknown) => deps.log.warn({ err }, 'could not record the sender as cut off by its proxy'));
    throw failure;
  }

  // Direct (no proxy, or it was cleared): a sender its old proxy had cut off is not held by it any more.
  async function direct(senderKey: string): Promise<ConnectionProxy> {
    await followLiveSenderProxy(db, platform, senderKey, true).catch(() => undefined);
    return { url: null, proxy: null };
  }

  return {
    async current(senderKey) {
      try {
        const url = await senderProxyUrl(deps, { platform, senderKey });
        if (url !== null && url !== deps.outboundProxy) return url;
        // OUTBOUND_PROXY of a scheme this kind does not speak is not taken (next()).
        const parsed = url === null ? null : parseProxyUrl(url);
        return parsed && !('problem' in parsed) && deps.schemes.includes(parsed.scheme) ? url : null;
      } catch {
        return undefined;
      }
    },
    async next(senderKey) {
      let url: string | null;
      try {
        url = await senderProxyUrl(deps, { platform, senderKey });
      } catch (error) {
        return fail(senderKey, new ProxyFailure('unreachable', error instanceof Error ? error.message : "the sender's proxy cannot be read"));
      }
      if (url === null) return direct(senderKey);
      const proxy = parseProxyUrl(url);
      if ('problem' in proxy) return fail(senderKey, new ProxyFailure('unreachable', `the sender's proxy cannot be used: ${proxy.problem}`));
      const own = url !== deps.outboundProxy;
      if (!deps.schemes.includes(proxy.scheme)) {
        // Only OUTBOUND_PROXY can be of a scheme the kind does not speak (a sender's own is refused when set):
        // the operator's default is for the senders that can use it (docs/proxies.md).
        if (!own) return direct(senderKey);
        return fail(senderKey, new ProxyFailure('unreachable', `the proxy ${shownProxy(proxy)} is not one this sender can speak through`));
      }
      // The operator's own default is of their choice; a sender's is held to the rule at every connection.
      if (own) {
        try {
          await holdToAddressRule(url, { allowPrivate: deps.allowPrivate, ...(deps.lookup ? { lookup: deps.lookup } : {}) });
        } catch (error) {
          return fail(senderKey, error instanceof ProxyFailure ? error : new ProxyFailure('unreachable', "the sender's proxy is refused"));
        }
      }
      const failure = await probeProxy(proxy, deps.target, deps.timeoutMs);
      if (failure) return fail(senderKey, failure);
      await followLiveSenderProxy(db, platform, senderKey, true).catch((err: unknown) => deps.log.warn({ err }, 'could not record the sender as carried by its proxy'));
      return { url, proxy };
    },
  };
}

/** The proxies of one platform's long-lived connections, from the service's settings. */
export function platformConnectionProxies(
  platform: 'whatsapp' | 'telegram',
  settings: { outboundProxy: string | undefined; audioAllowPrivateUrls: boolean; whatsappWebSocketUrl: string; telegramDcAddress: { host: string; port: number } },
  deps: { db: Kysely<Database>; secretBox: SecretBox; log: Logger; timeoutMs: number },
): ConnectionProxies {
  return connectionProxies({
    ...deps,
    outboundProxy: settings.outboundProxy,
    allowPrivate: settings.audioAllowPrivateUrls,
    platform,
    target: platform === 'whatsapp' ? webSocketHostOf(settings.whatsappWebSocketUrl) : settings.telegramDcAddress,
    schemes: schemesFor(platform === 'whatsapp' ? 'whatsapp_session' : 'telegram_account'),
  });
}
