import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { getGlobalDispatcher } from '../../core/http-client.js';
import { parseProxyUrl } from '../../core/proxy-url.js';
import type { SecretBox } from '../../core/secret-box.js';
import type { Database } from '../../store/schema.js';
import { followLiveSenderProxy } from '../../store/sender-proxy.js';
import { probeProxy } from '../proxy/check.js';
import { ProxyDispatchers } from '../proxy/dispatchers.js';
import { senderProxyUrl } from '../proxy/sender-proxy-url.js';
import { ProxyFailure, proxyFailureOf } from '../proxy/tunnel.js';

/**
 * The connections of a listened li_at (its looks and its realtime stream) through its proxy, as its
 * deliveries' (docs/proxies.md): its own proxy, read at each connection so a change applies from the
 * next one, else OUTBOUND_PROXY, else direct. Fail closed: a proxy that cannot be used or does not carry
 * the connection is a ProxyFailure, never a reason to connect directly; the sender then shows
 * `disconnected` (`proxy_unreachable`) until its proxy carries a connection again.
 */

export interface ListenConnection {
  dispatcher: Dispatcher;
  /** Through a proxy (the sender's or OUTBOUND_PROXY), not direct. */
  proxied: boolean;
}

export interface ListenProxies {
  /** The dispatcher for the sender's next connection; throws a ProxyFailure when its proxy cannot be used. */
  connectionFor(senderKey: string): Promise<ListenConnection>;
  /**
   * The connection for a look, once its proxy was seen to carry one to LinkedIn (so a dead proxy costs
   * no look of the daily cap); undefined after telling `failed` when it did not.
   */
  readyFor(senderKey: string): Promise<ListenConnection | undefined>;
  /** The sender's proxy did not carry a connection: the sender is cut off (sender.updated). */
  failed(senderKey: string, failure: ProxyFailure): Promise<void>;
  /** LinkedIn answered through the sender's proxy: a sender it had cut off is `ok` again. */
  carried(senderKey: string): Promise<void>;
}

export function linkedinListenProxies(deps: {
  db: Kysely<Database>;
  secretBox: SecretBox;
  outboundProxy: string | undefined;
  /** ALLOW_PRIVATE_URLS: otherwise a cookie's own proxy is held to the private-address rule again at each connection. */
  allowPrivate: boolean;
  apiRoot: string;
  timeoutMs: number;
  log: Logger;
}): ListenProxies {
  const dispatchers = new ProxyDispatchers(getGlobalDispatcher(), { connectTimeoutMs: deps.timeoutMs });
  const api = new URL(deps.apiRoot);
  const target = { host: api.hostname.replace(/^\[|\]$/g, ''), port: Number(api.port) || (api.protocol === 'https:' ? 443 : 80) };

  async function proxyUrlOf(senderKey: string): Promise<string | null> {
    try {
      return await senderProxyUrl(deps, { platform: 'linkedin', senderKey });
    } catch (error) {
      // Sealed under another SECRET_KEY: it says so, and nothing connects without it.
      throw new ProxyFailure('unreachable', error instanceof Error ? error.message : "the sender's proxy cannot be read");
    }
  }

  async function connectionFor(senderKey: string): Promise<ListenConnection> {
    const url = await proxyUrlOf(senderKey);
    try {
      return { dispatcher: dispatchers.for(url), proxied: url !== null };
    } catch (error) {
      throw new ProxyFailure('unreachable', error instanceof Error ? error.message : "the sender's proxy cannot be used");
    }
  }

  async function failed(senderKey: string, failure: ProxyFailure): Promise<void> {
    // The failure's message names the proxy by scheme, host and port only (tunnel.ts).
    deps.log.warn({ sender: senderKey, why: failure.message }, "the LinkedIn sender's proxy did not carry its listening; nothing is read directly");
    await followLiveSenderProxy(deps.db, 'linkedin', senderKey, false);
  }

  return {
    connectionFor,
    failed,
    carried: (senderKey) => followLiveSenderProxy(deps.db, 'linkedin', senderKey, true),
    async readyFor(senderKey) {
      let url: string | null;
      try {
        url = await proxyUrlOf(senderKey);
        if (url !== null) {
          const proxy = parseProxyUrl(url);
          if ('problem' in proxy) throw new ProxyFailure('unreachable', `the sender's proxy cannot be used: ${proxy.problem}`);
          const failure = await probeProxy(proxy, target, deps.timeoutMs);
          if (failure) throw failure;
        }
        return await connectionFor(senderKey);
      } catch (error) {
        const failure = proxyFailureOf(error);
        if (!failure) throw error;
        await failed(senderKey, failure);
        return undefined;
      }
    },
  };
}
