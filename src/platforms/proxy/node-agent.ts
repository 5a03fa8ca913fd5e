import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type { ProxyAddress } from '../../core/proxy-url.js';
import { openTunnelTo } from './tunnel.js';

/**
 * A Node `http.Agent` whose every connection is a tunnel through one proxy (docs/proxies.md), for
 * libraries that take a Node agent rather than an undici dispatcher: Baileys hands its `agent` to the
 * `ws` WebSocket (lib/Socket/Client/websocket.js, `agent: this.config.agent`) and, in 7.0.0-rc14 on
 * Node, its `fetchAgent` to `https.request` for media uploads (lib/Utils/messages-media.js,
 * uploadWithNodeHttp, `agent`). Node's agent calls `createConnection(options, callback)` and takes the
 * socket from the callback (lib/_http_agent.js, createSocket), so the tunnel may open asynchronously.
 * A proxy that fails is the request's error: never a direct connection.
 */

type ConnectOptions = { host?: string | null; hostname?: string | null; port?: number | string | null; servername?: string | null };
type Callback = (error: Error | null, socket?: Duplex) => void;

const DEFAULT_CONNECT_TIMEOUT_MS = 20_000;

/**
 * An agent for `protocol` targets (`https:` for wss:// and uploads, `http:` for ws://): Node refuses an
 * agent whose protocol is not the request's (lib/_http_client.js, ERR_INVALID_PROTOCOL).
 */
export function proxiedNodeAgent(proxy: ProxyAddress, protocol: 'http:' | 'https:', options: { connectTimeoutMs?: number } = {}): http.Agent {
  const timeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const Base = protocol === 'https:' ? https.Agent : http.Agent;
  class ProxiedAgent extends Base {
    override createConnection(connect: ConnectOptions, callback: Callback): undefined {
      const hostname = String(connect.hostname ?? connect.host ?? '');
      const port = Number(connect.port) || (protocol === 'https:' ? 443 : 80);
      openTunnelTo(proxy, { protocol, hostname, port, servername: connect.servername ?? null }, { timeoutMs }).then(
        (socket) => callback(null, socket),
        (error: Error) => callback(error),
      );
      return undefined;
    }
  }
  // No pooled sockets: each WebSocket or upload opens its own tunnel and closes it with itself.
  return new ProxiedAgent({ keepAlive: false });
}
