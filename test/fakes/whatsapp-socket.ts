import { EventEmitter } from 'node:events';
import { createHash, randomBytes } from 'node:crypto';
import {
  DISCONNECT,
  type AuthState,
  type NewChatCapInfo,
  type MessageStatusUpdate,
  type ResendRequestKey,
  type SentWhatsappMessage,
  type SocketEvents,
  type VoiceNoteContent,
  type WhatsappSocket,
  type WhatsappSocketFactory,
} from '../../src/platforms/whatsapp/socket.js';
import { describeOggOpus } from '../fixtures/ogg-opus-reader.js';

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
  messageId: string;
  /** The signal session with this recipient was already in the key store (written by an earlier send). */
  hadSignalSession: boolean;
  /** The message content the send produced (what Baileys' sendMessage gives back): the uploaded audio's URL and media key. */
  message: Record<string, any>;
  /** When it was sent (epoch ms). */
  at: number;
}

/** A recipient's device asked the sender for a message again, and what the sender's `getMessage` gave. */
export interface ResendRequest {
  instance: string;
  sessionId: string;
  key: ResendRequestKey;
  answer: unknown;
  /** What Baileys would relay: the answer as protobuf bytes (null when there was no answer, so nothing is sent). */
  relayed: Buffer | null;
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

/** A message someone writes to a session's number, as the fake socket's `receive` takes it. */
export interface IncomingInput {
  chat: string;
  id: string;
  message: unknown;
  at?: number;
  key?: Record<string, unknown>;
  type?: 'notify' | 'append';
  fromMe?: boolean;
}

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
  /** The 8-character code this socket asked for, and for which phone. */
  pairingCode: string | undefined;
  pairingPhone: string | undefined;
  ended = false;
  opened = false;
  loggedOut = false;
  /** Keys of the Baileys 7 types as the key store returned them when this socket connected. */
  keysAtOpen: Record<string, Record<string, unknown>> = {};

  constructor(
    readonly world: FakeWhatsapp,
    readonly instance: string,
    readonly sessionId: string,
    readonly auth: AuthState,
    /** The `getMessage` the socket was configured with (Baileys' default answers nothing). */
    readonly getMessage: (key: ResendRequestKey) => Promise<unknown> = async () => undefined,
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
    // What the key store holds at connect: Baileys 7 reads its LID mappings, device lists and tokens back.
    this.keysAtOpen = {};
    for (const [type, ids] of Object.entries(BAILEYS7_KEY_IDS)) this.keysAtOpen[type] = await this.auth.keys.get(type, ids);
    // Like Baileys after login: upload a pre-key (a key-store write), then report the connection open.
    await this.auth.keys.set({ 'pre-key': { [String(this.world.sockets.length)]: { public: randomBytes(32), private: randomBytes(32) } } });
    if (Object.keys(this.keysAtOpen['lid-mapping'] ?? {}).length === 0) {
      // First connection of this device: Baileys 7 learns and stores LID-first keys of its own types.
      await this.auth.keys.set(this.world.baileys7Keys);
    }
    if (this.ended) return;
    this.user = { id: userId };
    this.opened = true;
    this.emit('connection.update', { connection: 'open', isNewLogin: false });
    // What WhatsApp held for this number while no socket of it was connected comes once the new one is
    // open, marked `offline`, and Baileys upserts it as `append`, not `notify` (Baileys 7.0.0-rc14
    // lib/Socket/messages-recv.js:1432, `upsertMessage(msg, node.attrs.offline ? 'append' : 'notify')`).
    const held = this.world.heldWhileOffline.get(this.sessionId) ?? [];
    this.world.heldWhileOffline.delete(this.sessionId);
    for (const message of held) this.receive({ ...message, type: 'append' });
    // Receipts WhatsApp held meanwhile come too, marked `offline`: Baileys queues them
    // (messages-recv.js:1603-1605, offlineNodeProcessor) for the same handleReceipt as live ones, which
    // emits `messages.update` with the status (messages-recv.js:1199-1202).
    const receipts = this.world.receiptsHeldWhileOffline.get(this.sessionId) ?? [];
    this.world.receiptsHeldWhileOffline.delete(this.sessionId);
    if (receipts.length > 0) this.emit('messages.update', receipts);
  }

  emit<E extends keyof SocketEvents>(event: E, update: SocketEvents[E]): void {
    this.emitter.emit(event, update);
  }

  /**
   * Baileys 7's LID mapping store: what the key store holds under `lid-mapping` (`<lid>_reverse` → the
   * phone number's user), as a phone-number JID.
   */
  readonly signalRepository = {
    lidMapping: {
      getPNForLID: async (lid: string): Promise<string | null> => {
        const user = lid.split('@')[0]!.split(':')[0]!;
        const found = await this.auth.keys.get('lid-mapping', [`${user}_reverse`]);
        const phone = found[`${user}_reverse`];
        return typeof phone === 'string' ? `${phone}@s.whatsapp.net` : null;
      },
    },
  };

  /**
   * Someone writes to this device: `messages.upsert` as Baileys emits it (`notify` for a new message).
   * `chat` is the JID the message comes from (`<phone>@s.whatsapp.net`, `<lid>@lid`, a group's
   * `…@g.us`); `key` adds what Baileys puts beside it (`remoteJidAlt`, `senderPn`, `participant`).
   */
  receive(input: IncomingInput): void {
    this.emit('messages.upsert', {
      type: input.type ?? 'notify',
      messages: [
        {
          key: { remoteJid: input.chat, fromMe: input.fromMe ?? false, id: input.id, ...input.key },
          message: input.message,
          messageTimestamp: Math.floor((input.at ?? Date.now()) / 1000),
        },
      ],
    });
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

  async sendMessage(jid: string, content: VoiceNoteContent, options?: { messageId?: string }): Promise<SentWhatsappMessage> {
    this.assertOpen();
    // What a WhatsApp client must send for a voice note (anything else arrives as a file, or not at all).
    const problem = voiceNoteProblem(content, options);
    if (problem) {
      this.world.violations.push(problem);
      throw boom(`fake WhatsApp refused the send: ${problem}`, 400);
    }
    const messageId = options!.messageId!;
    // WhatsApp's reachout lock: a first message to someone this number never wrote to is refused with 463.
    const lock = this.world.reachoutLock;
    const newChatLocked = lock && lock.until.getTime() > Date.now() && !this.world.sent.some((s) => s.sessionId === this.sessionId && s.jid === jid);
    if (newChatLocked) this.world.refusedNewChats.push(jid);
    const refusal = newChatLocked ? '463' : this.world.refusedChats.get(jid);
    if (refusal) {
      // Refused by the server, but not to the sender's face: Baileys' sendMessage resolves once the message
      // is relayed, and the refusal comes later in the server's acknowledgement, which Baileys reports as
      // `messages.update` with status 0 (ERROR) and the code in `messageStubParameters` (rc14
      // lib/Socket/messages-recv.js, handleBadAck, lines 1494-1560; for 463 it runs its privacy-token
      // recovery and announces no lock). Nothing reaches the recipient.
      this.world.refusals.push({ sessionId: this.sessionId, jid, messageId, code: refusal });
      const key = { remoteJid: jid, fromMe: true, id: messageId };
      setTimeout(() => this.emit('messages.update', [{ key, update: { status: 0, messageStubParameters: [refusal] } }]), this.world.ackDelayMs).unref();
      return { key, message: uploadedVoiceNote(content) };
    }
    if (this.world.failSends > 0) {
      this.world.failSends -= 1;
      throw boom('Timed Out', DISCONNECT.connectionLost);
    }
    const retried = this.world.unacknowledged.get(`${this.sessionId} ${jid}`);
    if (retried && retried.audio.equals(content.audio) && retried.messageId !== messageId) {
      // The same voice note again after a lost acknowledgement, under a new id: the recipient would see it twice.
      this.world.violations.push(`a retry to ${jid} changed the message id from ${retried.messageId} to ${messageId}`);
    }
    this.world.unacknowledged.delete(`${this.sessionId} ${jid}`);
    // Like the signal protocol: read the session with the recipient, then store the ratcheted one.
    const existing = await this.auth.keys.get('session', [jid]);
    await this.auth.keys.set({ session: { [jid]: randomBytes(48) } });
    const user = jid.split('@')[0]!;
    const lid = this.world.lids.get(user);
    // Like Baileys 7 when it learns a contact's linked identity: the mapping both ways, in the key store.
    if (lid) await this.auth.keys.set({ 'lid-mapping': { [user]: lid, [`${lid}_reverse`]: user } });
    const message = uploadedVoiceNote(content);
    const note = { instance: this.instance, sessionId: this.sessionId, jid, content, messageId, hadSignalSession: existing[jid] !== undefined, message, at: Date.now() };
    if (this.world.seenIds.has(`${jid} ${messageId}`)) {
      // Recipients' devices key messages by id: the same id again is the same message, shown once.
      this.world.deduplicated.push(note);
    } else {
      this.world.seenIds.add(`${jid} ${messageId}`);
      this.world.sent.push(note);
    }
    if (this.world.acceptThenTimeOut > 0) {
      // WhatsApp took the message, but the acknowledgement never reached the sender.
      this.world.acceptThenTimeOut -= 1;
      this.world.unacknowledged.set(`${this.sessionId} ${jid}`, { audio: content.audio, messageId });
      throw boom('Timed Out', DISCONNECT.connectionLost);
    }
    return { key: { id: messageId, remoteJid: jid, fromMe: true }, message };
  }

  /**
   * A recipient's device could not decrypt a message and sends a retry receipt: Baileys asks the
   * socket's `getMessage` for the message (key as Baileys builds it from the receipt: the chat as the
   * receipt names it, `fromMe`, the asking device as participant) and relays whatever it gets, encoded
   * as a `proto.Message`; nothing when it gets nothing.
   */
  async askForResend(request: { remoteJid: string; id: string; participant?: string }): Promise<ResendRequest> {
    const key: ResendRequestKey = { remoteJid: request.remoteJid, id: request.id, fromMe: true, participant: request.participant ?? request.remoteJid };
    const answer = await this.getMessage(key);
    const relayed = answer ? await encodedMessage(answer) : null;
    const recorded = { instance: this.instance, sessionId: this.sessionId, key, answer, relayed };
    this.world.resendRequests.push(recorded);
    return recorded;
  }

  /**
   * Baileys 7's `fetchNewChatMessageCap` (rc14 lib/Socket/socket.js:922, a MEX query answering
   * `xwa2_message_capping_info`): the cap as the server reports it.
   */
  async fetchNewChatMessageCap(): Promise<NewChatCapInfo> {
    this.assertOpen();
    this.world.capReads += 1;
    return { ...this.world.newChatCap };
  }

  /** Baileys 7's `fetchAccountReachoutTimelock`: the lock as the server reports it. */
  async fetchAccountReachoutTimelock(): Promise<{ isActive: boolean; timeEnforcementEnds?: Date }> {
    this.assertOpen();
    this.world.lockReads += 1;
    const lock = this.world.reachoutLock;
    return lock && lock.until.getTime() > Date.now() ? { isActive: true, timeEnforcementEnds: lock.until } : { isActive: false };
  }

  async sendPresenceUpdate(type: 'recording' | 'paused', jid: string): Promise<void> {
    this.assertOpen();
    // Presence types a chat takes (Baileys' WAPresence).
    if (!['unavailable', 'available', 'composing', 'recording', 'paused'].includes(type)) {
      this.world.violations.push(`presence ${String(type)}`);
      throw boom(`fake WhatsApp refused the presence ${String(type)}`, 400);
    }
    if (!/^[0-9]+@s\.whatsapp\.net$/.test(jid)) this.world.violations.push(`presence to ${jid}, not a user jid`);
    this.world.presences.push({ instance: this.instance, sessionId: this.sessionId, jid, type, at: Date.now(), sentBefore: this.world.sent.length });
  }

  async requestPairingCode(phoneNumber: string): Promise<string> {
    // Like Baileys: only a socket that is waiting to be linked, and only for a phone number in digits.
    if (this.ended || this.opened) throw boom('Connection Closed', DISCONNECT.connectionClosed);
    if (this.auth.creds.registered === true) throw new Error('fake WhatsApp: these creds are already registered');
    if (!/^[0-9]{7,15}$/.test(phoneNumber)) throw new Error(`fake WhatsApp: ${phoneNumber} is not a phone number in digits`);
    const alphabet = '123456789ABCDEFGHJKLMNPQRSTVWXYZ';
    this.pairingCode = Array.from(randomBytes(8), (b) => alphabet[b % 32]).join('');
    this.pairingPhone = phoneNumber;
    // Baileys records the pending link in the creds at once (`me` with the phone's jid, name "~").
    this.emit('creds.update', { pairingCode: this.pairingCode, me: { id: `${phoneNumber}@s.whatsapp.net`, name: '~' } });
    return this.pairingCode;
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

/** Key types Baileys 7 writes besides the signal ones, with the ids the fake uses. */
const BAILEYS7_KEY_IDS: Record<string, string[]> = {
  'lid-mapping': ['14155550123', '14155550123_reverse'],
  'device-list': ['14155550123'],
  tctoken: ['14155550123@s.whatsapp.net'],
};

/** What Baileys' sendMessage makes of a voice note once the audio is uploaded: an audioMessage pointing at the encrypted file. */
function uploadedVoiceNote(content: VoiceNoteContent): Record<string, any> {
  const path = `/v/t62.7117-24/${randomBytes(12).toString('hex')}.enc?ccb=11-4&oh=${randomBytes(16).toString('hex')}&oe=69A1B2C3&_nc_sid=5e03e0`;
  return {
    audioMessage: {
      url: `https://mmg.whatsapp.net${path}&mms3=true`,
      mimetype: content.mimetype,
      fileSha256: createHash('sha256').update(content.audio).digest(),
      fileLength: content.audio.length,
      seconds: content.seconds,
      ptt: true,
      mediaKey: randomBytes(32),
      fileEncSha256: randomBytes(32),
      directPath: path,
      mediaKeyTimestamp: Math.floor(Date.now() / 1000),
      waveform: Buffer.from(content.waveform),
    },
    messageContextInfo: { messageSecret: randomBytes(32) },
  };
}

/** A message as the protobuf bytes Baileys encrypts and relays (`proto.Message.encode`). */
export async function encodedMessage(message: unknown): Promise<Buffer> {
  const { proto } = await import('@whiskeysockets/baileys');
  return Buffer.from(proto.Message.encode(proto.Message.fromObject(message as Record<string, unknown>)).finish());
}

/** What an iPhone refuses ("this audio is no longer available"): anything but the native push-to-talk profile. */
function pushToTalkProblem(audio: Buffer, seconds: number): string | null {
  let d;
  try {
    d = describeOggOpus(audio);
  } catch (err) {
    return `audio is not a valid Ogg Opus stream (${(err as Error).message})`;
  }
  if (d.channels !== 1 || d.inputRate !== 16000) return `audio is ${d.channels} channel(s) at an input rate of ${d.inputRate}, not mono 16 kHz`;
  if (/^Lav[fc]/.test(d.vendor) || d.comments.some((c) => /^encoder=/i.test(c))) return "audio carries ffmpeg's vendor string or encoder tag";
  const bad = d.packets.findIndex((p, i) => p.config !== 9 || p.code !== 3 || (i < d.packets.length - 1 && p.frameSizes.length !== 3));
  if (bad !== -1) return `audio packet ${bad} is not three SILK wideband 20 ms frames in a code 3 packet`;
  const length = Number(d.lastGranule - BigInt(d.preSkip)) / 48000;
  if (Math.abs(length - seconds) > 1) return `seconds ${seconds} for ${length.toFixed(2)} s of audio`;
  return null;
}

function voiceNoteProblem(content: VoiceNoteContent, options: { messageId?: string } | undefined): string | null {
  if (content.ptt !== true) return 'ptt is not true';
  if (content.mimetype !== 'audio/ogg; codecs=opus') return `mimetype ${content.mimetype}`;
  if (!Buffer.isBuffer(content.audio) || content.audio.subarray(0, 4).toString('latin1') !== 'OggS') return 'audio is not an Ogg stream';
  if (!Number.isInteger(content.seconds) || content.seconds < 1) return `seconds ${content.seconds} is not a whole number of at least 1`;
  const profile = pushToTalkProblem(content.audio, content.seconds);
  if (profile) return profile;
  const waveform = content.waveform as unknown;
  if (!(waveform instanceof Uint8Array) || waveform.length !== 64 || [...waveform].some((v) => v > 100)) return 'waveform is not 64 values 0-100';
  if (typeof options?.messageId !== 'string' || options.messageId === '') return 'no message id chosen by the sender';
  return null;
}

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
   */
  report(sessionId: string, receipt: MessageStatusUpdate): void {
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

  /**
   * The phone scans the code: the device gets its identity (creds with `me`), then the server asks
   * for a restart (515) and the next connection opens as `<phone>:<device>@s.whatsapp.net`.
   */
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

  scan(sessionId: string, phone: string, device = 12): void {
    const socket = this.current(sessionId);
    if (!socket?.qr) throw new Error(`session ${sessionId} shows no QR code to scan`);
    socket.emit('creds.update', { me: { id: `${phone}:${device}@s.whatsapp.net`, name: 'Test Phone' }, registered: true });
    socket.closeWith(DISCONNECT.restartRequired, 'Restart Required');
  }
}

/** Polls until `check` returns something truthy. */
export async function eventually<T>(check: () => T | Promise<T>, what: string, timeoutMs = 30_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
