import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
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
import type { FakeWhatsapp } from './whatsapp-network.js';
import { BAILEYS7_KEY_IDS, encodedMessage, uploadedVoiceNote, voiceNoteProblem } from './whatsapp-voice-note.js';

/**
 * WhatsApp as the service's socket seam sees it: a linked-device socket that shows pairing codes,
 * pairs when the test "scans" (creds with `me`, then the 515 restart Baileys does), opens with the
 * linked account, closes with any disconnect reason, and records what the service asked of it.
 * The sockets come from a `FakeWhatsapp` (whatsapp-network.ts), "the WhatsApp network" shared by every app
 * instance of a test; each instance gets its own factory so the test can tell which process did what.
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

export type QrMode = 'show' | 'silent' | 'fail';

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
