import { BlockList, isIP } from 'node:net';

type V4Range = readonly [address: string, prefix: number, why: string];

// IANA special-purpose IPv4 registry, plus multicast/reserved: nothing an audio host
// on the public internet can legitimately live at.
const V4_FORBIDDEN: readonly V4Range[] = [
  ['0.0.0.0', 8, 'unspecified / "this network"'],
  ['10.0.0.0', 8, 'private (RFC 1918)'],
  ['100.64.0.0', 10, 'carrier-grade NAT'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local / cloud metadata'],
  ['172.16.0.0', 12, 'private (RFC 1918)'],
  ['192.0.0.0', 24, 'IETF protocol assignments'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, '6to4 relay anycast'],
  ['192.168.0.0', 16, 'private (RFC 1918)'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved / broadcast'],
];

type V6Range = readonly [address: string, prefix: number, why: string];

const V6_FORBIDDEN: readonly V6Range[] = [
  // Covers :: (unspecified), ::1 (loopback) and the deprecated IPv4-compatible form.
  ['::', 96, 'unspecified / loopback / IPv4-compatible'],
  ['64:ff9b:1::', 48, 'local-use NAT64'],
  ['100::', 64, 'discard-only'],
  ['2001::', 32, 'Teredo'],
  ['2001:db8::', 32, 'documentation'],
  ['2001:2::', 48, 'benchmarking'],
  ['3fff::', 20, 'documentation'],
  ['fc00::', 7, 'unique local (ULA)'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local (deprecated)'],
  ['ff00::', 8, 'multicast'],
];

/** Every refused range, as `address/prefix` (tests hold one refused address for each). */
export const FORBIDDEN_RANGES: readonly string[] = [...V4_FORBIDDEN, ...V6_FORBIDDEN].map(([address, prefix]) => `${address}/${prefix}`);

function hex16(a: number, b: number): string {
  return ((a << 8) | b).toString(16);
}

function buildLists(): { v4: BlockList; v6: BlockList; mapped: BlockList } {
  // Kept apart on purpose: node's BlockList matches IPv4 addresses against IPv6 rules
  // through their mapped form, so a ::ffff:0:0/96 rule would swallow every IPv4 address.
  const v4 = new BlockList();
  const v6 = new BlockList();
  const mapped = new BlockList();
  for (const [addr, prefix] of V4_FORBIDDEN) v4.addSubnet(addr, prefix, 'ipv4');
  for (const [addr, prefix] of V6_FORBIDDEN) v6.addSubnet(addr, prefix, 'ipv6');
  mapped.addSubnet('::ffff:0:0', 96, 'ipv6');
  // IPv6 forms that embed an IPv4 address and reach it through a translator:
  // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) of any forbidden IPv4 range.
  for (const [addr, prefix] of V4_FORBIDDEN) {
    v6.addSubnet(`64:ff9b::${addr}`, 96 + prefix, 'ipv6');
    const o = addr.split('.').map(Number) as [number, number, number, number];
    v6.addSubnet(`2002:${hex16(o[0], o[1])}:${hex16(o[2], o[3])}::`, 16 + prefix, 'ipv6');
  }
  return { v4, v6, mapped };
}

const LISTS = buildLists();

function stripBrackets(address: string): string {
  return address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
}

/**
 * Why an IP address must not be fetched from, or null when it is a public unicast address.
 * Anything that is not a canonical IP literal is refused too: callers only pass resolved
 * addresses or WHATWG-normalised hostnames, so anything else means a parser disagreement.
 */
export function forbiddenAddressReason(address: string): string | null {
  const ip = stripBrackets(address);
  const family = isIP(ip);
  if (family === 4) {
    return LISTS.v4.check(ip, 'ipv4') ? `${ip} is in a non-public IPv4 range` : null;
  }
  if (family === 6) {
    if (ip.includes('%')) return `${ip} carries a zone index`;
    if (LISTS.mapped.check(ip, 'ipv6')) return `${ip} is an IPv4-mapped IPv6 address`;
    if (LISTS.v6.check(ip, 'ipv6')) return `${ip} is in a non-public IPv6 range`;
    return null;
  }
  return `${address} is not an IP address`;
}

export function isIpLiteral(host: string): boolean {
  return isIP(stripBrackets(host)) !== 0;
}
