import { lookup as dnsLookup } from 'node:dns/promises';
import { forbiddenAddressReason, isIpLiteral } from '../../audio/ip-ranges.js';
import { PROXY_SCHEMES, type ProxyAddress, type ProxyScheme } from '../../core/proxy-url.js';
import { openTunnel, ProxyFailure } from './tunnel.js';

/**
 * What is checked when a proxy is set (docs/proxies.md, "Checked when set"): that its sender's kind can
 * speak through it, that it is no door into the server's own network, and that it answers.
 */

/** The schemes each kind of sender takes: a Telegram account speaks MTProto over TCP, which GramJS tunnels through SOCKS only. */
export function schemesFor(kind: string): readonly ProxyScheme[] {
  return kind === 'telegram_account' ? ['socks5', 'socks5h'] : PROXY_SCHEMES;
}

/** Null when `kind` takes this proxy, else why not (naming the schemes it takes). */
export function kindProblem(proxy: ProxyAddress, kind: string): string | null {
  const schemes = schemesFor(kind);
  if (schemes.includes(proxy.scheme)) return null;
  const why = kind === 'telegram_account' ? 'a Telegram account speaks MTProto over TCP, which goes only through a SOCKS5 proxy' : `a ${kind} sender`;
  return `${why}: proxy must use ${schemes.map((s) => `${s}://`).join(' or ')}`;
}

/** Where a WebSocket URL connects: its host and port (ws 80, wss 443 when none is written). */
export function webSocketHostOf(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname.replace(/^\[|\]$/g, ''), port: Number(parsed.port) || (parsed.protocol === 'wss:' ? 443 : 80) };
}

export type Lookup = (host: string) => Promise<string[]>;
const systemLookup: Lookup = async (host) => (await dnsLookup(host, { all: true })).map((a) => a.address);

/**
 * Null when the proxy's host is a public address (a name: every address it resolves to), else why it is
 * refused: the audio URLs' rule (audio/ip-ranges.ts), lifted by the same ALLOW_PRIVATE_URLS.
 */
export async function privateAddressProblem(proxy: ProxyAddress, options: { allowPrivate: boolean; lookup?: Lookup }): Promise<string | null> {
  if (options.allowPrivate) return null;
  const host = proxy.host.toLowerCase().replace(/\.$/, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return `the proxy's host is a local name (${proxy.host})`;
  if (isIpLiteral(proxy.host)) {
    // A literal only repeats what the caller wrote: say why it is refused.
    const reason = forbiddenAddressReason(proxy.host);
    return reason === null ? null : `the proxy's host is not a public address: ${reason}`;
  }
  // A name: neither where it points nor whether it resolves at all is told (as for audio and webhook
  // URLs, docs/security.md): that would map the server's own network for the caller.
  const refused = "the proxy's host is not a public address";
  let addresses: string[];
  try {
    addresses = await (options.lookup ?? systemLookup)(proxy.host);
  } catch {
    return refused;
  }
  return addresses.length === 0 || addresses.some((address) => forbiddenAddressReason(address) !== null) ? refused : null;
}

/** Opens one connection through the proxy to the platform's host and closes it; the failure, or null when it carried it. */
export async function probeProxy(proxy: ProxyAddress, target: { host: string; port: number }, timeoutMs: number): Promise<ProxyFailure | null> {
  try {
    const socket = await openTunnel(proxy, target.host, target.port, { timeoutMs });
    socket.destroy();
    return null;
  } catch (error) {
    if (error instanceof ProxyFailure) return error;
    return new ProxyFailure('unreachable', 'the connection through the proxy failed');
  }
}
