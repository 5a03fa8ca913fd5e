import type { Agent as HttpsAgent } from 'node:https';
import type { Logger } from 'pino';
import { parseProxyUrl } from '../../core/proxy-url.js';
import { proxiedNodeAgent } from '../proxy/node-agent.js';
import { proxiedAgent } from '../proxy/undici-agent.js';

/**
 * The seam between the service and the WhatsApp Web protocol: the few parts of a Baileys socket the
 * service uses. Production wraps Baileys (`createBaileysSocketFactory`); tests inject a fake that speaks
 * the same events.
 */

/** Baileys' `DisconnectReason` values the lifecycle tells apart (kept here so nothing loads Baileys to read them). */
export const DISCONNECT = {
  connectionClosed: 428,
  connectionLost: 408,
  connectionReplaced: 440,
  loggedOut: 401,
  badSession: 500,
  restartRequired: 515,
  multideviceMismatch: 411,
  forbidden: 403,
  unavailableService: 503,
} as const;

/** Creds are Baileys' `AuthenticationCreds`: opaque to the service except for the linked account. */
export type AuthCreds = Record<string, unknown> & { me?: { id: string; name?: string } };

/** Signal keys by type, then by id; `null` deletes a key. */
export type KeyData = Record<string, Record<string, unknown | null>>;

export interface SignalKeyStore {
  get(type: string, ids: string[]): Promise<Record<string, unknown>>;
  set(data: KeyData): Promise<void>;
}

export interface AuthState {
  creds: AuthCreds;
  keys: SignalKeyStore;
}

export interface ConnectionUpdate {
  connection?: 'open' | 'connecting' | 'close';
  /** A pairing code to show as a QR image. */
  qr?: string;
  lastDisconnect?: { error: Error | undefined; date?: Date };
  isNewLogin?: boolean;
  /** WhatsApp's reachout timelock (Baileys 7): the account may not start new chats until it ends. */
  reachoutTimeLock?: ReachoutLock;
}

/** Baileys' `ReachoutTimelockState`, as much of it as we read. */
export interface ReachoutLock {
  isActive: boolean;
  timeEnforcementEnds?: Date | undefined;
}

/**
 * Baileys 7's `NewChatMessageCapInfo` (`fetchNewChatMessageCap`, `message-capping.update`): how many new
 * chats the account may start in the current cycle, and where it stands against that cap.
 */
export interface NewChatCapInfo {
  total_quota?: number;
  used_quota?: number;
  /** Unix seconds, as a string. */
  cycle_start_timestamp?: string;
  cycle_end_timestamp?: string;
  /** `NONE`, `FIRST_WARNING`, `SECOND_WARNING` or `CAPPED` (Baileys' NewChatMessageCappingStatusType). */
  capping_status?: string;
}

/**
 * One entry of Baileys' `messages.update`: a message's new status (0 error, 2 server, 3 device, 4 read,
 * 5 played); an error carries the server's code first in `messageStubParameters`.
 */
export interface MessageStatusUpdate {
  key: { id?: string | null; remoteJid?: string | null; fromMe?: boolean | null };
  update: {
    status?: number | null;
    messageStubParameters?: Array<string | null | undefined> | null;
    /** A receipt's own time, in whole seconds (Baileys 7 rc14 lib/Socket/messages-recv.js:1201, the receipt's `t`). */
    messageTimestamp?: number | null;
  };
}

/** One message of Baileys' `messages.upsert` (a `WAMessage`): the parts the service reads. */
export interface IncomingWhatsappMessage {
  key: {
    id?: string | null;
    /** The chat: `<phone>@s.whatsapp.net`, `<lid>@lid`, `<id>@g.us` (a group), `status@broadcast`, … */
    remoteJid?: string | null;
    fromMe?: boolean | null;
    participant?: string | null;
    /** Baileys 7: the chat's other address (the phone-number JID of a `@lid` chat). */
    remoteJidAlt?: string | null;
    participantAlt?: string | null;
    /** Older Baileys releases: the sender's phone-number JID of a `@lid` message. */
    senderPn?: string | null;
    participantPn?: string | null;
  };
  /** A `proto.IMessage`. */
  message?: unknown;
  /** Seconds, a number or a Long. */
  messageTimestamp?: unknown;
}

/** Baileys' `messages.upsert`: `notify` for new messages, `append` for those WhatsApp held while offline, and our own sends echoed. */
export interface MessagesUpsert {
  messages: IncomingWhatsappMessage[];
  type: 'notify' | 'append' | string;
}

export interface SocketEvents {
  'connection.update': ConnectionUpdate;
  'creds.update': Partial<AuthCreds>;
  'messages.update': MessageStatusUpdate[];
  'messages.upsert': MessagesUpsert;
  /** A LID's phone number, learned (Baileys 7). */
  'lid-mapping.update': { lid: string; pn: string };
  /** WhatsApp's new-chat message cap changed (Baileys 7). */
  'message-capping.update': NewChatCapInfo;
}

/** What `sendMessage` receives for a voice note. */
export interface VoiceNoteContent {
  audio: Buffer;
  mimetype: string;
  ptt: true;
  seconds: number;
  waveform: Uint8Array;
}

/** What Baileys' `sendMessage` gives back (a `WebMessageInfo`): the key and the message content it relayed. */
export interface SentWhatsappMessage {
  key?: { remoteJid?: string | null; id?: string | null; fromMe?: boolean | null };
  /** A `proto.IMessage`: for a voice note, its `audioMessage` with the uploaded file's URL and media key. */
  message?: unknown;
}

/** The key Baileys hands `getMessage` when a device asks for a message again (a retry receipt). */
export interface ResendRequestKey {
  remoteJid?: string | null;
  id?: string | null;
  fromMe?: boolean | null;
  participant?: string | null;
}

export interface WhatsappSocket {
  ev: { on<E extends keyof SocketEvents>(event: E, listener: (update: SocketEvents[E]) => void): void };
  /** The linked account once open: `<digits>:<device>@s.whatsapp.net`. */
  readonly user: { id: string } | undefined;
  onWhatsApp(...phoneNumbers: string[]): Promise<Array<{ jid: string; exists: boolean | unknown }> | undefined>;
  /** `messageId`: chosen by us, so every attempt of one message carries the same id (recipients' devices key messages by it). */
  sendMessage(jid: string, content: VoiceNoteContent, options: { messageId: string }): Promise<SentWhatsappMessage | undefined>;
  /** Presence in a chat: `recording` shows "recording audio…" to the recipient, `paused` ends it. */
  sendPresenceUpdate(type: 'recording' | 'paused', jid: string): Promise<unknown>;
  /**
   * Asks WhatsApp for an 8-character code to type on the phone (Linked devices → Link with phone number
   * instead), for a socket whose creds are not registered yet. `phoneNumber`: digits with country code.
   */
  requestPairingCode(phoneNumber: string): Promise<string>;
  /** Baileys' signal repository: its LID mapping store knows the phone numbers of LIDs it has seen. */
  readonly signalRepository?: { lidMapping?: { getPNForLID(lid: string): Promise<string | null> } };
  /** Baileys 7 (`fetchAccountReachoutTimelock`): whether the account is locked out of new chats, and until when. */
  fetchAccountReachoutTimelock?(): Promise<ReachoutLock>;
  /** Baileys 7 (`fetchNewChatMessageCap`): the account's new-chat message cap and its use. */
  fetchNewChatMessageCap?(): Promise<NewChatCapInfo>;
  /** Unlinks this device from the phone, then closes. */
  logout(message?: string): Promise<void>;
  /** Closes the connection; the device stays linked. */
  end(error: Error | undefined): unknown;
}

export interface SocketFactoryInput {
  sessionId: string;
  auth: AuthState;
  logger: Logger;
  /** How long Baileys shows one pairing code before it makes the next one. */
  qrTimeoutMs: number;
  /**
   * Baileys' `getMessage`: the content (`proto.IMessage`) of a message this session sent, when a
   * recipient's device could not decrypt it and asks for it again; undefined when it is not kept.
   */
  getMessage(key: ResendRequestKey): Promise<unknown>;
  /**
   * The proxy this connection goes through, with its credentials (docs/proxies.md): its WebSocket and its
   * media uploads. Null: direct. Never logged.
   */
  proxyUrl: string | null;
}

export type WhatsappSocketFactory = (input: SocketFactoryInput) => WhatsappSocket | Promise<WhatsappSocket>;

/** The status code of a close (Baileys puts a Boom in `lastDisconnect.error`). */
export function disconnectCode(update: ConnectionUpdate): number | undefined {
  const error = update.lastDisconnect?.error as (Error & { output?: { statusCode?: unknown } }) | undefined;
  const code = error?.output?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

/** `14155550123:7@s.whatsapp.net` → `14155550123`. */
export function phoneOfJid(jid: string | undefined): string | null {
  const digits = jid?.split('@')[0]?.split(':')[0];
  return digits && /^\d+$/.test(digits) ? digits : null;
}

type Baileys = typeof import('@whiskeysockets/baileys');
let baileys: Promise<Baileys> | undefined;

/** Baileys, loaded the first time a live session needs it (the service starts without it). */
export function loadBaileys(): Promise<Baileys> {
  baileys ??= import('@whiskeysockets/baileys');
  return baileys;
}

type WaVersion = [number, number, number];
const VERSION_TTL_MS = 6 * 60 * 60_000;

/**
 * WhatsApp Web refuses clients that announce a version it retired, and the one built into a Baileys
 * release ages: ask WhatsApp for the current one (briefly, cached), else use Baileys' own.
 */
function currentWebVersion(b: Baileys, proxyUrl: string | null): Promise<WaVersion | undefined> {
  const at = Date.now();
  if (!webVersion || at - webVersion.at > VERSION_TTL_MS) {
    // Asked through the connecting session's proxy when it has one, as everything it does (docs/proxies.md).
    const proxy = proxyUrl === null ? null : parseProxyUrl(proxyUrl);
    const dispatcher = proxy && !('problem' in proxy) ? proxiedAgent(proxy, { connectTimeoutMs: 5_000 }) : undefined;
    const value = b
      .fetchLatestWaWebVersion({ signal: AbortSignal.timeout(5_000), ...(dispatcher ? { dispatcher } : {}) } as Parameters<Baileys['fetchLatestWaWebVersion']>[0])
      .then((found) => (found.isLatest ? (found.version as WaVersion) : undefined))
      .catch(() => undefined)
      .finally(() => void dispatcher?.close().catch(() => undefined));
    webVersion = { at, value };
  }
  return webVersion.value;
}
let webVersion: { at: number; value: Promise<WaVersion | undefined> } | undefined;

/** WhatsApp Web's own socket (Baileys' DEFAULT_CONNECTION_CONFIG.waWebSocketUrl). */
export const WHATSAPP_WEB_SOCKET_URL = 'wss://web.whatsapp.com/ws/chat';

/**
 * Baileys' `agent` (its WebSocket) and `fetchAgent` (its media uploads) for a proxy: Node agents whose
 * every connection is a tunnel through it (proxy/node-agent.ts). In 7.0.0-rc14 on Node, uploads go
 * through `https.request({ agent: fetchAgent })` (lib/Utils/messages-media.js, uploadWithNodeHttp), so
 * `fetchAgent` is a Node agent for https, not an undici dispatcher.
 */
export function proxyAgentsFor(proxyUrl: string | null, webSocketUrl: string): { agent?: HttpsAgent; fetchAgent?: HttpsAgent } {
  if (proxyUrl === null) return {};
  const proxy = parseProxyUrl(proxyUrl);
  // Checked when set and before each connection (connection-proxy.ts): never a reason to go direct.
  if ('problem' in proxy) throw new Error(`the session's proxy cannot be used: ${proxy.problem}`);
  return {
    // Baileys types both as https.Agent; a ws:// socket (a test's, a relay's) needs an http one, which `ws` takes as well.
    agent: proxiedNodeAgent(proxy, new URL(webSocketUrl).protocol === 'ws:' ? 'http:' : 'https:') as HttpsAgent,
    fetchAgent: proxiedNodeAgent(proxy, 'https:') as HttpsAgent,
  };
}

/**
 * The real socket: a Baileys linked device with the given auth state. `webSocketUrl`: where it connects
 * (WHATSAPP_WEB_SOCKET_URL; another than WhatsApp's own is a test's or a relay's, and WhatsApp is then
 * not asked for its current Web version).
 */
export function createBaileysSocketFactory(options: { webSocketUrl?: string } = {}): WhatsappSocketFactory {
  const webSocketUrl = options.webSocketUrl ?? WHATSAPP_WEB_SOCKET_URL;
  return async ({ auth, logger, qrTimeoutMs, getMessage, proxyUrl }) => {
    const agents = proxyAgentsFor(proxyUrl, webSocketUrl);
    const b = await loadBaileys();
    const { makeWASocket, makeCacheableSignalKeyStore, Browsers } = b;
    const version = webSocketUrl === WHATSAPP_WEB_SOCKET_URL ? await currentWebVersion(b, proxyUrl) : undefined;
    type Config = Parameters<typeof makeWASocket>[0];
    // Baileys talks a lot at info level; its warnings and errors are worth keeping.
    const socketLogger = logger.child({ component: 'baileys' }, { level: logger.levelVal > 40 ? logger.level : 'warn' });
    const keys = makeCacheableSignalKeyStore(auth.keys as unknown as Config['auth']['keys'], socketLogger);
    const sock = makeWASocket({
      auth: { creds: auth.creds as unknown as Config['auth']['creds'], keys },
      logger: socketLogger,
      browser: Browsers.ubuntu('Chrome'),
      waWebSocketUrl: webSocketUrl,
      ...agents,
      ...(version ? { version } : {}),
      qrTimeout: qrTimeoutMs,
      // A sending device: no history download, and the phone keeps its notifications.
      markOnlineOnConnect: false,
      syncFullHistory: false,
      shouldSyncHistoryMessage: () => false,
      // Resend requests: Baileys' own cache holds sent messages 5 minutes, in this process only; this
      // answers from the database, after a restart or a takeover too.
      getMessage: getMessage as Config['getMessage'],
    });
    return sock as unknown as WhatsappSocket;
  };
}
