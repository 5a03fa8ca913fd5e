import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import {
  DISCONNECT,
  type AuthState,
  type SocketEvents,
  type VoiceNoteContent,
  type WhatsappSocket,
  type WhatsappSocketFactory,
} from '../../src/platforms/whatsapp/socket.js';

/**
 * WhatsApp as the service's socket seam sees it: a linked-device socket that shows pairing codes,
 * pairs when the test "scans" (creds with `me`, then the 515 restart Baileys does), opens with the
 * linked account, closes with any disconnect reason, and records what the service asked of it.
 * One `FakeWhatsapp` is "the WhatsApp network" shared by every app instance of a test; each instance
 * gets its own factory so the test can tell which process did what.
 */

export interface SentVoiceNote {
  instance: string;
  sessionId: string;
  jid: string;
  content: VoiceNoteContent;
  /** The signal session with this recipient was already in the key store (written by an earlier send). */
  hadSignalSession: boolean;
}

export interface FactoryCall {
  instance: string;
  sessionId: string;
  socket: FakeSocket;
  /** Whether the creds handed to the socket were already paired (carry `me`). */
  paired: boolean;
  noiseKeyPublic: Buffer | undefined;
}

type QrMode = 'show' | 'silent' | 'fail';

const boom = (message: string, statusCode: number): Error => Object.assign(new Error(message), { output: { statusCode } });

export class FakeSocket implements WhatsappSocket {
  readonly emitter = new EventEmitter();
  readonly ev = {
    on: <E extends keyof SocketEvents>(event: E, listener: (update: SocketEvents[E]) => void): void => {
      this.emitter.on(event, listener);
    },
  };
  user: { id: string } | undefined;
  /** The pairing code this socket showed, if it showed one. */
  qr: string | undefined;
  ended = false;
  opened = false;
  loggedOut = false;

  constructor(
    readonly world: FakeWhatsapp,
    readonly instance: string,
    readonly sessionId: string,
    readonly auth: AuthState,
  ) {}

  /** What the socket does once created: reconnect with paired creds, or show a code to scan. */
  start(mode: QrMode): void {
    setImmediate(() => {
      if (this.ended) return;
      this.emit('connection.update', { connection: 'connecting' });
      const me = this.auth.creds.me;
      if (me) {
        if (this.world.unreachable) this.closeWith(DISCONNECT.connectionLost, 'Connection Failure');
        else void this.open(me.id);
        return;
      }
      if (mode === 'show') {
        const noise = (this.auth.creds.noiseKey as { public: Uint8Array } | undefined)?.public;
        this.qr = `2@fake-ref-${randomBytes(9).toString('base64')},${Buffer.from(noise ?? []).toString('base64')},${randomBytes(32).toString('base64')}`;
        this.emit('connection.update', { qr: this.qr });
      } else if (mode === 'fail') {
        this.closeWith(DISCONNECT.connectionClosed, 'Connection Failure');
      }
    });
  }

  private async open(userId: string): Promise<void> {
    // Like Baileys after login: upload a pre-key (a key-store write), then report the connection open.
    await this.auth.keys.set({ 'pre-key': { [String(this.world.sockets.length)]: { public: randomBytes(32), private: randomBytes(32) } } });
    if (this.ended) return;
    this.user = { id: userId };
    this.opened = true;
    this.emit('connection.update', { connection: 'open', isNewLogin: false });
  }

  emit<E extends keyof SocketEvents>(event: E, update: SocketEvents[E]): void {
    this.emitter.emit(event, update);
  }

  /** The server closes the connection with a disconnect reason (401 logged out, 515 restart, 428…). */
  closeWith(code: number, message = `closed with ${code}`): void {
    if (this.ended) return;
    this.ended = true;
    this.emit('connection.update', { connection: 'close', lastDisconnect: { error: boom(message, code), date: new Date() } });
  }

  async onWhatsApp(...phoneNumbers: string[]): Promise<Array<{ jid: string; exists: boolean }>> {
    this.assertOpen();
    this.world.lookups.push(...phoneNumbers);
    return phoneNumbers.filter((n) => !this.world.absent.has(n)).map((n) => ({ jid: `${n}@s.whatsapp.net`, exists: true }));
  }

  async sendMessage(jid: string, content: VoiceNoteContent): Promise<unknown> {
    this.assertOpen();
    if (this.world.failSends > 0) {
      this.world.failSends -= 1;
      throw boom('Timed Out', DISCONNECT.connectionLost);
    }
    // Like the signal protocol: read the session with the recipient, then store the ratcheted one.
    const existing = await this.auth.keys.get('session', [jid]);
    await this.auth.keys.set({ session: { [jid]: randomBytes(48) } });
    this.world.sent.push({ instance: this.instance, sessionId: this.sessionId, jid, content, hadSignalSession: existing[jid] !== undefined });
    return { key: { id: randomBytes(8).toString('hex'), remoteJid: jid, fromMe: true } };
  }

  async logout(): Promise<void> {
    this.world.logouts.push({ instance: this.instance, sessionId: this.sessionId });
    this.loggedOut = true;
    setImmediate(() => this.closeWith(DISCONNECT.loggedOut, 'Intentional Logout'));
  }

  end(error: Error | undefined): void {
    if (this.ended) return;
    this.ended = true;
    // Baileys reports its own end as a close, too.
    this.emit('connection.update', { connection: 'close', lastDisconnect: { error, date: new Date() } });
  }

  private assertOpen(): void {
    if (!this.opened || this.ended) throw boom('Connection Closed', DISCONNECT.connectionClosed);
  }
}

export class FakeWhatsapp {
  /** Numbers that are not on WhatsApp. */
  readonly absent = new Set<string>();
  /** What a socket with unpaired creds does: show a code, stay silent, or fail to connect. */
  qrMode: QrMode = 'show';
  /** The next this many sends fail with a timeout. */
  failSends = 0;
  /** Paired devices cannot connect (every attempt closes with 408). */
  unreachable = false;
  readonly sockets: FakeSocket[] = [];
  readonly calls: FactoryCall[] = [];
  readonly sent: SentVoiceNote[] = [];
  readonly lookups: string[] = [];
  readonly logouts: Array<{ instance: string; sessionId: string }> = [];

  factory(instance: string): WhatsappSocketFactory {
    return ({ sessionId, auth }) => {
      const socket = new FakeSocket(this, instance, sessionId, auth);
      const noise = (auth.creds.noiseKey as { public?: Uint8Array } | undefined)?.public;
      this.sockets.push(socket);
      this.calls.push({ instance, sessionId, socket, paired: auth.creds.me !== undefined, noiseKeyPublic: noise ? Buffer.from(noise) : undefined });
      socket.start(this.qrMode);
      return socket;
    };
  }

  socketsOf(sessionId: string): FakeSocket[] {
    return this.sockets.filter((s) => s.sessionId === sessionId);
  }

  /** The session's socket that is still connected or connecting. */
  current(sessionId: string): FakeSocket | undefined {
    return this.socketsOf(sessionId).filter((s) => !s.ended).at(-1);
  }

  /**
   * The phone scans the code: the device gets its identity (creds with `me`), then the server asks
   * for a restart (515) and the next connection opens as `<phone>:<device>@s.whatsapp.net`.
   */
  scan(sessionId: string, phone: string, device = 12): void {
    const socket = this.current(sessionId);
    if (!socket?.qr) throw new Error(`session ${sessionId} shows no QR code to scan`);
    socket.emit('creds.update', { me: { id: `${phone}:${device}@s.whatsapp.net`, name: 'Test Phone' }, registered: true });
    socket.closeWith(DISCONNECT.restartRequired, 'Restart Required');
  }
}

/** Polls until `check` returns something truthy. */
export async function eventually<T>(check: () => T | Promise<T>, what: string, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
