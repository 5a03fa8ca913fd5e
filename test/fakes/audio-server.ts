import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the fake audio host does for one path. */
export type AudioRoute =
  | { kind: 'file'; path: string; contentType?: string; omitLength?: boolean }
  | { kind: 'bytes'; body: Buffer | string; contentType?: string }
  | { kind: 'redirect'; location: string; status?: number }
  | { kind: 'status'; status: number; body?: string }
  /** Goes silent without closing: before the headers, or after the headers and `afterBytes` of body. */
  | { kind: 'stall'; beforeHeaders?: boolean; afterBytes?: number }
  /** Streams `totalBytes` of filler, optionally declaring Content-Length. */
  | { kind: 'stream'; totalBytes: number; declareLength: boolean }
  /** Says nothing until `until` settles, then answers as `then` (a request takes the route of its arrival). */
  | { kind: 'held'; until: Promise<void>; then: AudioRoute };

export interface RecordedRequest {
  method: string;
  path: string;
  host: string;
}

export interface AudioServer {
  readonly host: string;
  readonly port: number;
  readonly origin: string;
  readonly requests: RecordedRequest[];
  url(path: string): string;
  route(path: string, route: AudioRoute): void;
  close(): Promise<void>;
}

const CHUNK = Buffer.alloc(64 * 1024, 0x55);

async function handle(route: AudioRoute | undefined, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (!route) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    return;
  }
  switch (route.kind) {
    case 'file': {
      const st = await stat(route.path);
      const headers: Record<string, string | number> = { 'content-type': route.contentType ?? 'application/octet-stream' };
      if (!route.omitLength) headers['content-length'] = st.size;
      res.writeHead(200, headers);
      createReadStream(route.path).pipe(res);
      return;
    }
    case 'bytes':
      res.writeHead(200, { 'content-type': route.contentType ?? 'application/octet-stream', 'content-length': Buffer.byteLength(route.body) });
      res.end(route.body);
      return;
    case 'redirect':
      res.writeHead(route.status ?? 302, { location: route.location }).end();
      return;
    case 'status':
      res.writeHead(route.status, { 'content-type': 'text/plain' }).end(route.body ?? '');
      return;
    case 'held':
      req.socket.setTimeout(0);
      await route.until;
      return handle(route.then, req, res);
    case 'stall':
      req.socket.setTimeout(0);
      if (route.beforeHeaders) return;
      res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': 10_000_000 });
      if (route.afterBytes) res.write(Buffer.alloc(route.afterBytes, 0xff));
      return; // never ends; the client must give up
    case 'stream': {
      const headers: Record<string, string | number> = { 'content-type': 'audio/mpeg' };
      if (route.declareLength) headers['content-length'] = route.totalBytes;
      res.writeHead(200, headers);
      let left = route.totalBytes;
      const pump = (): void => {
        while (left > 0) {
          const n = Math.min(left, CHUNK.length);
          left -= n;
          if (!res.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n))) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      res.on('close', () => {
        left = 0;
      });
      pump();
      return;
    }
  }
}

/** A local HTTP server standing in for wherever customers host their audio. */
export async function startAudioServer(opts: { host?: string } = {}): Promise<AudioServer> {
  const routes = new Map<string, AudioRoute>();
  const requests: RecordedRequest[] = [];
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    requests.push({ method: req.method ?? 'GET', path, host: req.headers.host ?? '' });
    handle(routes.get(path), req, res).catch(() => res.destroy());
  });
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  return {
    host,
    port,
    origin,
    requests,
    url: (path) => `${origin}${path}`,
    route: (path, route) => void routes.set(path, route),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
