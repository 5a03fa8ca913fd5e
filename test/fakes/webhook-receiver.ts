import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  headers: IncomingHttpHeaders;
  body: string;
  path: string;
}

/** What the receiver does with the next request: answer with a status, or never answer. */
export type ReceiverBehaviour = { status: number; body?: string } | 'hang';

/**
 * A webhook receiver on loopback: records every request and answers as told (a queue of behaviours,
 * then the default), like a customer's endpoint that is up, failing or stuck.
 */
export interface WebhookReceiver {
  url(path?: string): string;
  port: number;
  received: ReceivedWebhook[];
  /** Behaviours for the next requests, in order; after them, `fallback`. */
  queue(...behaviours: ReceiverBehaviour[]): void;
  fallback: ReceiverBehaviour;
  /** Resolves once `count` requests (of `type`, when given) have arrived. */
  waitFor(count: number, type?: string, timeoutMs?: number): Promise<ReceivedWebhook[]>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const queued: ReceiverBehaviour[] = [];
  const hanging = new Set<import('node:http').ServerResponse>();
  const receiver: WebhookReceiver = {
    url: (path = '/hooks') => `http://127.0.0.1:${receiver.port}${path}`,
    port: 0,
    received: [],
    queue: (...behaviours) => void queued.push(...behaviours),
    fallback: { status: 200, body: '{"ok":true}' },
    async waitFor(count, type, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const matching = receiver.received.filter((r) => type === undefined || (JSON.parse(r.body) as { type: string }).type === type);
        if (matching.length >= count) return matching;
        if (Date.now() > deadline) throw new Error(`expected ${count} webhook(s)${type ? ` of ${type}` : ''}, got ${matching.length}: ${receiver.received.map((r) => r.body).join('\n')}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      receiver.received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), path: req.url ?? '/' });
      const behaviour = queued.shift() ?? receiver.fallback;
      if (behaviour === 'hang') {
        hanging.add(res);
        return;
      }
      res.writeHead(behaviour.status, { 'content-type': 'application/json' });
      res.end(behaviour.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.port = (server.address() as AddressInfo).port;
  return receiver;
}
