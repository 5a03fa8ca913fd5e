import { createServer, type Server } from 'node:net';

/**
 * R5 (RELIABILITY.md): audio URLs that point inside the network, in every spelling a URL parser or a
 * resolver accepts. `port` is a canary listening on 127.0.0.1, `port6` one on ::1. Shared by the suite
 * (test/reliability-ssrf.test.ts) and bench/reliability/r5-ssrf.ts (which adds /etc/hosts names and redirects).
 */
export function ssrfTricks(port: number, port6: number): string[] {
  return [
    `http://127.0.0.1:${port}/x.ogg`,
    `http://127.1:${port}/x.ogg`,
    `http://127.0.1:${port}/x.ogg`,
    `http://0x7f.1:${port}/x.ogg`,
    `http://0x7f.0.0.1:${port}/x.ogg`,
    `http://0x7f000001:${port}/x.ogg`,
    `http://2130706433:${port}/x.ogg`,
    `http://0177.0.0.1:${port}/x.ogg`,
    `http://017700000001:${port}/x.ogg`,
    `http://%31%32%37.0.0.1:${port}/x.ogg`,
    `http://127.000.000.001:${port}/x.ogg`,
    `http://127.255.255.254:${port}/x.ogg`,
    `http://0.0.0.0:${port}/x.ogg`,
    `http://0:${port}/x.ogg`,
    `http://[::ffff:127.0.0.1]:${port}/x.ogg`,
    `http://[::ffff:7f00:1]:${port}/x.ogg`,
    `http://[0:0:0:0:0:ffff:127.0.0.1]:${port}/x.ogg`,
    `http://[::127.0.0.1]:${port}/x.ogg`,
    `http://[64:ff9b::127.0.0.1]:${port}/x.ogg`,
    `http://[2002:7f00:1::]:${port}/x.ogg`,
    `http://[::1]:${port6}/x.ogg`,
    `http://[0:0:0:0:0:0:0:1]:${port6}/x.ogg`,
    `http://[::]:${port6}/x.ogg`,
    `http://localhost:${port}/x.ogg`,
    `http://LocalHost.:${port}/x.ogg`,
    `http://localhost.localdomain:${port}/x.ogg`,
    `http://user:pass@127.0.0.1:${port}/x.ogg`,
    `https://127.0.0.1:${port}/x.ogg`,
    'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
    'http://[fd00:ec2::254]/latest/meta-data/',
    'http://[::ffff:a9fe:a9fe]/latest/meta-data/',
    'http://10.0.0.7/x.ogg',
    'http://172.16.0.1/x.ogg',
    'http://192.168.1.1/x.ogg',
    'http://100.64.1.1/x.ogg',
    'http://[fd00::7]/x.ogg',
    'http://[fe80::1]/x.ogg',
    'http://224.0.0.1/x.ogg',
    'http://255.255.255.255/x.ogg',
  ];
}


/** A TCP listener that only counts connections: any connection at all means a trick got through. */
export async function startCanary(host: string): Promise<{ port: number; connections: () => number; close(): Promise<void> } | null> {
  let count = 0;
  const server: Server = createServer((socket) => {
    count++;
    socket.destroy();
  });
  const ok = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(0, host, () => resolve(true));
  });
  if (!ok) return null;
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    connections: () => count,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
