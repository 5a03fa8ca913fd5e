/**
 * A sender's proxy as written by its owner (docs/proxies.md): `http://`, `https://` (HTTP CONNECT),
 * `socks5://` or `socks5h://` (the proxy resolves the name), with an optional `user:password@`.
 * Only the syntax here; whether it may be used (its address, its sender's kind) and whether it answers
 * are checked where it is set.
 */

export const PROXY_SCHEMES = ['http', 'https', 'socks5', 'socks5h'] as const;
export type ProxyScheme = (typeof PROXY_SCHEMES)[number];

export interface ProxyAddress {
  scheme: ProxyScheme;
  /** The host as written (brackets removed from an IPv6 literal). */
  host: string;
  port: number;
  username: string | null;
  password: string | null;
}

export const MAX_PROXY_URL_LENGTH = 2048;

// The port a scheme means when none is written: an HTTP proxy's usual 80/443, SOCKS' registered 1080.
const DEFAULT_PORTS: Record<ProxyScheme, number> = { http: 80, https: 443, socks5: 1080, socks5h: 1080 };

/** The proxy, or a message saying what is wrong with the text (it never repeats the text: it may hold a password). */
export function parseProxyUrl(text: string): ProxyAddress | { problem: string } {
  if (text.length > MAX_PROXY_URL_LENGTH) return { problem: `proxy is longer than ${MAX_PROXY_URL_LENGTH} characters` };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { problem: 'proxy is not a URL; write it as scheme://[user:password@]host:port, e.g. socks5://proxy.example:1080' };
  }
  const scheme = url.protocol.slice(0, -1).toLowerCase();
  if (!(PROXY_SCHEMES as readonly string[]).includes(scheme)) {
    return { problem: `proxy must use one of ${PROXY_SCHEMES.map((s) => `${s}://`).join(', ')}` };
  }
  if (url.hostname === '') return { problem: 'proxy has no host' };
  if ((url.pathname !== '' && url.pathname !== '/') || url.search !== '' || url.hash !== '') {
    return { problem: 'proxy is only scheme://[user:password@]host:port, without a path, query or fragment' };
  }
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const port = url.port === '' ? DEFAULT_PORTS[scheme as ProxyScheme] : Number(url.port);
  return {
    scheme: scheme as ProxyScheme,
    host,
    port,
    username: url.username === '' ? null : decodeURIComponent(url.username),
    password: url.password === '' ? null : decodeURIComponent(url.password),
  };
}

/** What may be shown of a proxy: its scheme, host and port, never its user name or password. */
export function shownProxy(proxy: ProxyAddress): string {
  const host = proxy.host.includes(':') ? `[${proxy.host}]` : proxy.host;
  return `${proxy.scheme}://${host}:${proxy.port}`;
}

/** The proxy written out again, credentials included (to be sealed, never shown). */
export function proxyUrlOf(proxy: ProxyAddress): string {
  const auth = proxy.username !== null ? `${encodeURIComponent(proxy.username)}${proxy.password !== null ? `:${encodeURIComponent(proxy.password)}` : ''}@` : '';
  const host = proxy.host.includes(':') ? `[${proxy.host}]` : proxy.host;
  return `${proxy.scheme}://${auth}${host}:${proxy.port}`;
}

export const isSocks = (proxy: ProxyAddress): boolean => proxy.scheme === 'socks5' || proxy.scheme === 'socks5h';
