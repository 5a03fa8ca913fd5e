import { Agent } from '../../core/http-client.js';
import type { ProxyAddress } from '../../core/proxy-url.js';
import { openTunnelTo } from './tunnel.js';

/**
 * An undici Agent whose every connection is a tunnel through one proxy (docs/proxies.md): for the
 * adapters' HTTP calls (dispatchers.ts) and Baileys' fetch of WhatsApp Web's current version. A proxy
 * that fails is the request's error, never a direct connection.
 */

type AgentOptions = ConstructorParameters<typeof Agent>[0];

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** An Agent whose connections all go through `proxy`. */
export function proxiedAgent(proxy: ProxyAddress, options: AgentOptions & { connectTimeoutMs?: number } = {}): Agent {
  const { connectTimeoutMs = DEFAULT_CONNECT_TIMEOUT_MS, ...rest } = options;
  return new Agent({
    ...rest,
    connect: (opts, callback) => {
      const port = Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80);
      openTunnelTo(proxy, { protocol: opts.protocol, hostname: opts.hostname, port, servername: opts.servername ?? null }, { timeoutMs: connectTimeoutMs, alpn: ['http/1.1'] }).then(
        (socket) => callback(null, socket as never),
        (error: Error) => callback(error, null),
      );
    },
  });
}
