import { lookup } from 'node:dns/promises';
import net from 'node:net';
import tls from 'node:tls';
import { SocksClient } from 'socks';
import { errorCodeOf } from '../../core/error-code.js';
import { shownProxy, type ProxyAddress } from '../../core/proxy-url.js';

/**
 * A connection to a platform's host through a sender's proxy (docs/proxies.md): HTTP CONNECT for
 * `http://` and `https://` proxies, the `socks` package for `socks5://` (the name resolved here) and
 * `socks5h://` (resolved by the proxy). Nothing here ever connects directly: a proxy that fails is a
 * ProxyFailure, never a reason to try without it.
 */

/** The proxy did not carry the connection: it did not answer, or refused the credentials. Its message names only the proxy's scheme, host and port. */
export class ProxyFailure extends Error {
  constructor(
    readonly kind: 'unreachable' | 'auth_failed',
    message: string,
  ) {
    super(message);
    this.name = 'ProxyFailure';
  }
}

/** The ProxyFailure along an error and its causes (undici hands a connector's error on as it is, or as `cause`). */
export function proxyFailureOf(error: unknown): ProxyFailure | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && typeof current === 'object' && current !== null; depth++) {
    if (current instanceof ProxyFailure) return current;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

export interface TunnelOptions {
  /** Longest wait for the proxy to carry the connection (its own connection and its answer). */
  timeoutMs: number;
  signal?: AbortSignal;
}

const unreachable = (proxy: ProxyAddress, why: string) => new ProxyFailure('unreachable', `could not reach the proxy ${shownProxy(proxy)}: ${why}`);
const authFailed = (proxy: ProxyAddress, why: string) => new ProxyFailure('auth_failed', `the proxy ${shownProxy(proxy)} refused the credentials: ${why}`);

/** A TCP (or, for an `https://` proxy, TLS) socket to `host:port` through the proxy. */
export async function openTunnel(proxy: ProxyAddress, host: string, port: number, options: TunnelOptions): Promise<net.Socket> {
  options.signal?.throwIfAborted();
  if (proxy.scheme === 'socks5' || proxy.scheme === 'socks5h') return socksTunnel(proxy, host, port, options);
  return connectTunnel(proxy, host, port, options);
}

async function socksTunnel(proxy: ProxyAddress, host: string, port: number, options: TunnelOptions): Promise<net.Socket> {
  // socks5: the name is resolved here and the proxy is given an address; socks5h hands it the name.
  let destination = host;
  if (proxy.scheme === 'socks5' && net.isIP(host) === 0) {
    try {
      destination = (await lookup(host)).address;
    } catch (error) {
      throw unreachable(proxy, `the platform's host name did not resolve (${errorCodeOf(error) ?? 'DNS error'})`);
    }
  }
  try {
    const { socket } = await SocksClient.createConnection({
      command: 'connect',
      proxy: {
        host: proxy.host,
        port: proxy.port,
        type: 5,
        ...(proxy.username !== null ? { userId: proxy.username, password: proxy.password ?? '' } : {}),
      },
      destination: { host: destination, port },
      timeout: options.timeoutMs,
    });
    return socket;
  } catch (error) {
    const message = error instanceof Error ? error.message : '';
    // The socks package's own wording (its ERRORS in build/common/constants.js); never its socket's message, which names addresses.
    if (/Authentication failed|no accepted authentication type/i.test(message)) throw authFailed(proxy, 'SOCKS5 authentication failed');
    if (/rejected connection/i.test(message)) throw unreachable(proxy, 'it refused to connect to the platform');
    if (/timed? ?out/i.test(message)) throw unreachable(proxy, `no answer within ${options.timeoutMs} ms`);
    throw unreachable(proxy, errorCodeOf(error) ?? 'it did not speak SOCKS5');
  }
}

/** HTTP CONNECT (RFC 9110 §9.3.6): one request, the answer's status line, then the raw tunnel. */
function connectTunnel(proxy: ProxyAddress, host: string, port: number, options: TunnelOptions): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket: net.Socket =
      proxy.scheme === 'https' ? tls.connect({ host: proxy.host, port: proxy.port, servername: net.isIP(proxy.host) ? undefined : proxy.host }) : net.connect({ host: proxy.host, port: proxy.port });
    let settled = false;
    const fail = (failure: ProxyFailure) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      reject(failure);
    };
    const timer = setTimeout(() => fail(unreachable(proxy, `no answer within ${options.timeoutMs} ms`)), options.timeoutMs);
    const onAbort = () => fail(unreachable(proxy, 'the attempt was stopped'));
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const authority = net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
    const lines = [`CONNECT ${authority} HTTP/1.1`, `Host: ${authority}`];
    if (proxy.username !== null) lines.push(`Proxy-Authorization: Basic ${Buffer.from(`${proxy.username}:${proxy.password ?? ''}`).toString('base64')}`);
    socket.once(proxy.scheme === 'https' ? 'secureConnect' : 'connect', () => socket.write(`${lines.join('\r\n')}\r\n\r\n`));
    socket.on('error', (error) => fail(unreachable(proxy, errorCodeOf(error) ?? 'connection failed')));
    socket.on('close', () => fail(unreachable(proxy, 'it closed the connection')));
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > 16 * 1024) fail(unreachable(proxy, 'its answer to CONNECT was too long'));
        return;
      }
      socket.off('data', onData);
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, end).toString('latin1'))?.[1] ?? 0);
      if (status === 407) return fail(authFailed(proxy, 'it answered 407 Proxy Authentication Required'));
      if (status < 200 || status > 299) return fail(unreachable(proxy, status === 0 ? 'it did not answer CONNECT as an HTTP proxy' : `it answered CONNECT with ${status}`));
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      socket.removeAllListeners('error');
      socket.removeAllListeners('close');
      // Bytes past the answer already belong to the tunnel.
      const rest = head.subarray(end + 4);
      if (rest.length > 0) socket.unshift(rest);
      resolve(socket);
    };
    socket.on('data', onData);
  });
}

/** A tunnel, with TLS over it for an `https:` target (the platform's certificate checked as on a direct connection). */
export async function openTunnelTo(proxy: ProxyAddress, target: { protocol: string; hostname: string; port: number; servername?: string | null }, options: TunnelOptions & { alpn?: string[] }): Promise<net.Socket> {
  const hostname = target.hostname.startsWith('[') ? target.hostname.slice(1, -1) : target.hostname;
  const socket = await openTunnel(proxy, hostname, target.port, options);
  if (target.protocol !== 'https:') return socket;
  const servername = target.servername ?? (net.isIP(hostname) ? undefined : hostname);
  return new Promise((resolve, reject) => {
    const secure = tls.connect({ socket, ...(servername ? { servername } : {}), ...(options.alpn ? { ALPNProtocols: options.alpn } : {}) });
    secure.once('secureConnect', () => {
      secure.off('error', reject);
      resolve(secure);
    });
    secure.once('error', reject);
  });
}
