import { randomBytes } from 'node:crypto';
import { DISCONNECT, type MessageStatusUpdate, type NewChatCapInfo, type WhatsappSocketFactory } from '../../src/platforms/whatsapp/socket.js';
import { FakeSocket, type FactoryCall, type IncomingInput, type QrMode, type ResendRequest, type SentVoiceNote } from './whatsapp-socket.js';

/**
 * "The WhatsApp network" of a test: one is shared by every app instance, each instance gets its own
 * socket factory (so the test can tell which process did what), and the test plays the phones and the
 * recipients through it (scan, write, report) and reads what the sockets were asked (sent, lookups, …).
 */
export class FakeWhatsapp {
  /** Numbers that are not on WhatsApp. */
  readonly absent = new Set<string>();
  /** What a socket with unpaired creds does: show a code, stay silent, or fail to connect. */
  qrMode: QrMode = 'show';
  /** The next this many sends fail with a timeout. */
  failSends = 0;
  /** The next this many sends are delivered, but their acknowledgement is lost (the sender sees a timeout). */
  acceptThenTimeOut = 0;
  /** Sends a real client would not make (no ptt, no seconds, a waveform that is not 64 values, no or a changed message id). */
  readonly violations: string[] = [];
  /** Sends whose message id the recipient already had: shown once. */
  readonly deduplicated: SentVoiceNote[] = [];
  readonly seenIds = new Set<string>();
  /** What a device stores of the Baileys 7 key types after its first connection (values of each shape Baileys uses). */
  readonly baileys7Keys: Record<string, Record<string, unknown>> = {
    'lid-mapping': { '14155550123': '201987654321098', '14155550123_reverse': '14155550123' },
    'device-list': { '14155550123': ['0', '12', '31'] },
    tctoken: { '14155550123@s.whatsapp.net': { token: randomBytes(24), timestamp: '1763856000' } },
  };
  readonly unacknowledged = new Map<string, { audio: Buffer; messageId: string }>();
  /** Paired devices cannot connect (every attempt closes with 408). */
  unreachable = false;
  readonly sockets: FakeSocket[] = [];
  readonly calls: FactoryCall[] = [];
  readonly sent: SentVoiceNote[] = [];
  readonly lookups: string[] = [];
  /** Presence updates in chats, in order, with when and how many notes had been sent before each. */
  readonly presences: Array<{ instance: string; sessionId: string; jid: string; type: string; at: number; sentBefore: number }> = [];
  readonly logouts: Array<{ instance: string; sessionId: string }> = [];
  /** Recipients WhatsApp addresses by linked identity (phone number → LID user): a send stores the mapping, as Baileys 7 does. */
  readonly lids = new Map<string, string>();
  /** WhatsApp's reachout lock on every number of this world, until then (sends to new chats answer 463). */
  reachoutLock: { until: Date } | undefined;
  /** Chats a send was refused for by the reachout lock. */
  readonly refusedNewChats: string[] = [];
  /**
   * Chats WhatsApp refuses every message to, with this error code in its acknowledgement: '463' with no
   * lock active (a chat without a privacy token, WAHA #2219), '479' (smax-invalid), …
   */
  readonly refusedChats = new Map<string, string>();
  /** Every send refused in its acknowledgement (the reachout lock's and refusedChats'). */
  readonly refusals: Array<{ sessionId: string; jid: string; messageId: string; code: string }> = [];
  /** How long after a send its acknowledgement comes back. */
  ackDelayMs = 20;
  /** Times a socket read the reachout lock. */
  lockReads = 0;
  /** WhatsApp's new-chat message cap of every number of this world (Baileys' NewChatMessageCapInfo). */
  newChatCap: NewChatCapInfo = { capping_status: 'NONE', used_quota: 0, total_quota: 100 };
  /** Times a socket read the new-chat message cap. */
  capReads = 0;
  /** Every resend request a recipient's device made, with the sender's answer. */
  readonly resendRequests: ResendRequest[] = [];
  /** Messages written to a session's number while none of its sockets was open: delivered when one opens. */
  readonly heldWhileOffline = new Map<string, IncomingInput[]>();
  /** Receipts of a session's notes reported while none of its sockets was open: delivered when one opens. */
  readonly receiptsHeldWhileOffline = new Map<string, MessageStatusUpdate[]>();

  factory(instance: string): WhatsappSocketFactory {
    return ({ sessionId, auth, getMessage }) => {
      const socket = new FakeSocket(this, instance, sessionId, auth, getMessage);
      const noise = (auth.creds.noiseKey as { public?: Uint8Array } | undefined)?.public;
      this.sockets.push(socket);
      this.calls.push({ instance, sessionId, socket, paired: auth.creds.me !== undefined, noiseKeyPublic: noise ? Buffer.from(noise) : undefined });
      socket.start(this.qrMode);
      return socket;
    };
  }

  /**
   * Someone writes to the session's number: heard at once (`notify`) by its open socket, else held by
   * WhatsApp and delivered as offline messages (`append`) when a socket of the session opens.
   */
  write(sessionId: string, input: Omit<IncomingInput, 'type'>): void {
    const socket = this.current(sessionId);
    if (socket?.opened) {
      socket.receive(input);
      return;
    }
    this.heldWhileOffline.set(sessionId, [...(this.heldWhileOffline.get(sessionId) ?? []), input]);
  }

  /**
   * The recipient's device reports a note of the session reached it, was read or played (3, 4, 5):
   * at once to its open socket, else held by WhatsApp and delivered when a socket of the session opens.
   * Stamped with when it was reported, in whole seconds, as Baileys passes the receipt's `t` on
   * (rc14 lib/Socket/messages-recv.js:1199-1202), unless the test gives a time.
   */
  report(sessionId: string, reported: MessageStatusUpdate): void {
    const receipt = { ...reported, update: { messageTimestamp: Math.floor(Date.now() / 1000), ...reported.update } };
    const socket = this.current(sessionId);
    if (socket?.opened) {
      socket.emit('messages.update', [receipt]);
      return;
    }
    this.receiptsHeldWhileOffline.set(sessionId, [...(this.receiptsHeldWhileOffline.get(sessionId) ?? []), receipt]);
  }

  socketsOf(sessionId: string): FakeSocket[] {
    return this.sockets.filter((s) => s.sessionId === sessionId);
  }

  /** The session's socket that is still connected or connecting. */
  current(sessionId: string): FakeSocket | undefined {
    return this.socketsOf(sessionId).filter((s) => !s.ended).at(-1);
  }

  /** The user types the pairing code on the phone: linked like a scan, as that phone number. */
  enterCode(sessionId: string, code: string, device = 14): void {
    const socket = this.current(sessionId);
    if (!socket?.pairingCode || socket.pairingCode !== code) throw new Error(`session ${sessionId} did not ask for the code ${code}`);
    socket.emit('creds.update', { me: { id: `${socket.pairingPhone}:${device}@s.whatsapp.net`, name: 'Test Phone' }, registered: true });
    socket.closeWith(DISCONNECT.restartRequired, 'Restart Required');
  }

  /** WhatsApp tells the session's socket that its reachout lock started or was lifted (as Baileys emits it). */
  announceReachoutLock(sessionId: string): void {
    const lock = this.reachoutLock;
    const state = lock && lock.until.getTime() > Date.now() ? { isActive: true, timeEnforcementEnds: lock.until } : { isActive: false };
    this.current(sessionId)?.emit('connection.update', { reachoutTimeLock: state });
  }

  /**
   * WhatsApp tells the session's socket its new-chat message cap changed: Baileys emits the
   * notification's payload as it comes (rc14 lib/Socket/messages-recv.js:182-191,
   * handleMessageCappingNotification).
   */
  announceNewChatCap(sessionId: string): void {
    this.current(sessionId)?.emit('message-capping.update', { ...this.newChatCap });
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
