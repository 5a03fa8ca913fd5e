import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * WhatsApp Web's socket as far as the proxy tests need it: a WebSocket server on 127.0.0.1 at the path
 * Baileys connects to (`/ws/chat`, its DEFAULT_CONNECTION_CONFIG.waWebSocketUrl), which takes the
 * upgrade and then stays silent (a real server would answer Baileys' Noise handshake; Baileys waits for
 * it, lib/Socket/socket.js, validateConnection). It records the remote port of every TCP connection and
 * of every WebSocket, which is the local port of a proxy's onward connection when one came through a
 * proxy (test/fixtures/proxies.ts), so a test can tell through which proxy each came, or that it came
 * directly.
 */
export interface FakeWhatsappWeb {
  /** ws://127.0.0.1:<port>/ws/chat: WHATSAPP_WEB_SOCKET_URL of the app under test. */
  readonly url: string;
  readonly port: number;
  /** Remote ports of every TCP connection (a proxy check's included). */
  readonly connections: number[];
  /** Remote ports of every WebSocket that was opened (Baileys' sockets). */
  readonly sockets: number[];
  close(): Promise<void>;
}

export async function startFakeWhatsappWeb(): Promise<FakeWhatsappWeb> {
  const server = http.createServer((_request, response) => response.writeHead(404).end());
  const connections: number[] = [];
  const sockets: number[] = [];
  const open = new Set<Socket>();
  server.on('connection', (socket) => connections.push(socket.remotePort!));
  // The opening handshake of RFC 6455 §4.2.2 (the accept key is the client's key and the GUID, SHA-1, base64).
  server.on('upgrade', (request: http.IncomingMessage, socket: Socket) => {
    const key = request.headers['sec-websocket-key'];
    if (request.url !== '/ws/chat' || typeof key !== 'string') return socket.destroy();
    const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    sockets.push(socket.remotePort!);
    open.add(socket);
    socket.on('error', () => undefined).on('close', () => open.delete(socket));
    // Whatever Baileys writes (its Noise hello) is read and left unanswered.
    socket.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `ws://127.0.0.1:${port}/ws/chat`,
    port,
    connections,
    sockets,
    async close() {
      for (const socket of open) socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
