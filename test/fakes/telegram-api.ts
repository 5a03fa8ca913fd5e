import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import busboy from 'busboy';

/**
 * A local Telegram Bot API for `sendVoice` and `sendChatAction`: strict about what it takes, and
 * answering in Telegram's own shapes and words (tdlib/telegram-bot-api's HttpConnection.cpp,
 * ClientManager.cpp and Client.cpp: 404 "Not Found" for a path that is not /bot<token>/<method>,
 * 401 "Unauthorized: invalid token specified" for a token it cannot read, 401 "Unauthorized" for one it
 * does not know, 404 "Not Found: method not found"). Told per chat id or per token, it answers a
 * documented failure.
 */

/** What Telegram answers instead of accepting the voice note. */
export type TelegramFailure =
  | { kind: 'unauthorized' }
  /** What the Bot API answers for a path it does not serve. */
  | { kind: 'not_found' }
  | { kind: 'chat_not_found' }
  | { kind: 'bot_blocked' }
  | { kind: 'cant_initiate' }
  | { kind: 'user_deactivated' }
  /** A Premium user whose privacy settings refuse voice messages. */
  | { kind: 'voice_forbidden' }
  /** A user whose privacy settings refuse voice notes from this bot. */
  | { kind: 'voice_restricted' }
  /** A group or channel whose permissions do not let the bot send voice notes (tdlib's check, through the Bot API). */
  | { kind: 'no_voice_rights' }
  | { kind: 'rate_limited'; retryAfter: number }
  | { kind: 'server_error'; status?: number }
  /** The front proxy's HTML page, as when the Bot API behind it is down. */
  | { kind: 'html_gateway_error' }
  | { kind: 'bad_request'; description: string; parameters?: Record<string, unknown> }
  /** Takes the whole upload, then never answers. */
  | { kind: 'stall' };

export interface TelegramVoicePart {
  bytes: Buffer;
  fileName: string;
  mimeType: string;
}

export interface TelegramCall {
  httpMethod: string;
  /** As written in the path (Telegram matches method names case-insensitively). */
  method: string;
  token: string;
  /** Every text field as received. */
  fields: Record<string, string>;
  chatId: string | undefined;
  caption: string | undefined;
  /** The `duration` field as sent (a string on the wire). */
  duration: string | undefined;
  voice: TelegramVoicePart | undefined;
  reply: { status: number; body: string };
  /** When the request's body was read (Date.now()). */
  at: number;
  /** When the request arrived (epoch ms, its headers in): how far apart the retries came. */
  receivedAt: number;
  /** The client's port as this server saw it: tells a proxy's connection (test/fixtures/proxies.ts) from a direct one. */
  remotePort?: number;
}

interface FailureRule {
  chatId?: string;
  token?: string;
  failure: TelegramFailure;
  /** Calls left that this rule answers; Infinity for all of them. */
  remaining: number;
}

export interface TelegramFake {
  /** The value for TELEGRAM_API_ROOT. */
  readonly apiRoot: string;
  /** Every request that reached a Bot API path, answered or not, in order. */
  readonly calls: TelegramCall[];
  callsForChat(chatId: string): TelegramCall[];
  /** Answers `failure` to calls for this chat id, for the next `times` of them (all by default). */
  failForChat(chatId: string, failure: TelegramFailure, times?: number): void;
  failForToken(token: string, failure: TelegramFailure, times?: number): void;
  /** Resolves once `count` calls matching `filter` have been answered. */
  waitForCalls(count: number, filter?: (call: TelegramCall) => boolean, timeoutMs?: number): Promise<TelegramCall[]>;
  /**
   * From now on, answer as Telegram's flood control does: 429 with retry_after to a send that comes less
   * than `perChatMs` after the last accepted one for the same chat, or beyond `perBotPerSecond` calls of
   * one bot within a second (core.telegram.org/bots/faq, "My bot is hitting limits": about one message a
   * second per chat, about 30 a second in bulk; the 429's `parameters.retry_after`,
   * core.telegram.org/bots/api#responseparameters). Telegram publishes no exact window, so this is a
   * strict sliding second. Chat actions count toward their bot's calls; not toward the chat's (an action
   * is not a message): Telegram documents neither, this is the cautious reading.
   */
  enforceFloodLimits(limits?: { perChatMs?: number; perBotPerSecond?: number }): void;
  /** 429 answers flood control gave so far. */
  readonly floodRefusals: number;
  /** Connections from clients that are open now (a client that hung up is no longer counted once the fake has seen it). */
  readonly openConnections: number;
  /** Runs once a request's headers are in and before its body is read (the client is still uploading). */
  beforeReadingBody: ((token: string) => Promise<void>) | undefined;
  /** Users who never started the bot: getChat answers "chat not found" for them, as Telegram does. */
  readonly unstartedChats: Set<string>;
  /**
   * getUpdates: queues an update for the bot (its update_id is given here), answered to its next
   * getUpdates, or at once to one waiting; kept until a getUpdates confirms it with a higher `offset`.
   */
  pushUpdate(token: string, update: Record<string, unknown>): number;
  /** The bot has a webhook: getUpdates answers 409, as Telegram does (only deleteWebhook would clear it). */
  setWebhook(token: string): void;
  /** The next `times` getUpdates of the bot are answered 429 with `parameters.retry_after` (the Bot API's flood control, core.telegram.org/bots/api#responseparameters). */
  limitGetUpdates(token: string, retryAfterSeconds: number, times?: number): void;
  /** getUpdates ended by another one for the same bot (409 "terminated by other getUpdates request"). */
  readonly pollConflicts: number;
  /** The most getUpdates of one bot that were waiting at the same time. */
  readonly maxConcurrentPolls: number;
  close(): Promise<void>;
}

export interface TelegramFakeOptions {
  /** Tokens the fake knows; any other well-formed token gets 401 Unauthorized. All are known when omitted. */
  knownTokens?: string[];
}

const MB = 1024 * 1024;
// Bots may send voice files up to 50 MB.
const MAX_UPLOAD_BYTES = 50 * MB;
const TOKEN_IN_PATH = /^\/bot([^/]*)\/([A-Za-z]+)$/;

/** The Bot API's own first look at a token (ClientManager::send): a bot id, a colon, at most 80 characters. */
function readableToken(token: string): boolean {
  const colon = token.indexOf(':');
  if (token === '' || token[0] === '0' || token.length > 80 || colon < 0) return false;
  const id = token.slice(0, colon);
  return /^[0-9]+$/.test(id) && Number(id) > 0 && Number(id) < 2 ** 54;
}
const WELL_FORMED_TOKEN = /^[0-9]+:[A-Za-z0-9_-]{30,}$/;
const BOT_ID_NAME = 'voicenote_test_bot';
// The actions sendChatAction takes (Bot API documentation).
const CHAT_ACTIONS = new Set([
  'typing',
  'upload_photo',
  'record_video',
  'upload_video',
  'record_voice',
  'upload_voice',
  'upload_document',
  'choose_sticker',
  'find_location',
  'record_video_note',
  'upload_video_note',
]);

type Reply = { status: number; body: string; contentType: string } | { stall: true };

const json = (status: number, body: unknown): Reply => ({ status, body: JSON.stringify(body), contentType: 'application/json' });
const failure = (errorCode: number, description: string, parameters?: Record<string, unknown>): Reply =>
  json(errorCode, { ok: false, error_code: errorCode, description, ...(parameters ? { parameters } : {}) });

function failureReply(f: TelegramFailure): Reply {
  switch (f.kind) {
    case 'unauthorized':
      return failure(401, 'Unauthorized');
    case 'not_found':
      return failure(404, 'Not Found');
    case 'chat_not_found':
      return failure(400, 'Bad Request: chat not found');
    case 'bot_blocked':
      return failure(403, 'Forbidden: bot was blocked by the user');
    case 'cant_initiate':
      return failure(403, "Forbidden: bot can't initiate conversation with a user");
    case 'user_deactivated':
      return failure(403, 'Forbidden: user is deactivated');
    case 'voice_forbidden':
      return failure(400, 'Bad Request: VOICE_MESSAGES_FORBIDDEN');
    case 'voice_restricted':
      return failure(400, 'Bad Request: user restricted receiving of voice note messages');
    case 'no_voice_rights':
      return failure(400, 'Bad Request: not enough rights to send voice notes to the chat');
    case 'rate_limited':
      return failure(429, `Too Many Requests: retry after ${f.retryAfter}`, { retry_after: f.retryAfter });
    case 'server_error':
      return failure(f.status ?? 500, 'Internal Server Error');
    case 'html_gateway_error':
      return {
        status: 502,
        contentType: 'text/html',
        body: '<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n',
      };
    case 'bad_request':
      return failure(400, f.description, f.parameters);
    case 'stall':
      return { stall: true };
  }
}

interface ParsedForm {
  fields: Record<string, string>;
  files: Record<string, TelegramVoicePart>;
  /** Set when the body could not be taken as Telegram takes it. */
  error?: Reply;
}

/** Reads the whole body; multipart strictly (a malformed or truncated form is refused). */
function parseForm(req: IncomingMessage): Promise<ParsedForm> {
  const parsed: ParsedForm = { fields: {}, files: {} };
  const contentType = req.headers['content-type'] ?? '';
  if (!/^(multipart\/form-data|application\/x-www-form-urlencoded)\b/i.test(contentType)) {
    // Telegram also reads JSON and the query string, but a voice file can only come as multipart.
    // JSON bodies (what clients send for calls without a file, such as sendChatAction): top-level values as fields.
    if (/^application\/json\b/i.test(contentType)) {
      return new Promise((resolve) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          try {
            const body: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new Error('not an object');
            for (const [name, value] of Object.entries(body)) parsed.fields[name] = typeof value === 'string' ? value : JSON.stringify(value);
          } catch {
            parsed.error = failure(400, "Bad Request: can't parse JSON object");
          }
          resolve(parsed);
        });
        req.on('error', () => resolve(parsed));
      });
    }
    return new Promise((resolve) => {
      req.resume();
      req.on('end', () => resolve(parsed));
      req.on('error', () => resolve(parsed));
    });
  }
  return new Promise((resolve) => {
    let settled = false;
    const done = (error?: Reply): void => {
      if (settled) return;
      settled = true;
      if (error) {
        parsed.error = error;
        req.unpipe();
        req.resume();
      }
      resolve(parsed);
    };
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: req.headers, limits: { fileSize: MAX_UPLOAD_BYTES, files: 10, fields: 100, fieldSize: 1 * MB } });
    } catch {
      done(failure(400, 'Bad Request: failed to parse the multipart/form-data body'));
      return;
    }
    parser.on('field', (name, value, info) => {
      if (info.valueTruncated) done(failure(400, `Bad Request: field "${name}" is too long`));
      parsed.fields[name] = value;
    });
    parser.on('file', (name, stream, info) => {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('limit', () => done(failure(413, 'Request Entity Too Large')));
      stream.on('end', () => {
        parsed.files[name] = { bytes: Buffer.concat(chunks), fileName: info.filename ?? '', mimeType: info.mimeType };
      });
    });
    parser.on('error', () => done(failure(400, 'Bad Request: failed to parse the multipart/form-data body')));
    parser.on('close', () => done());
    req.on('error', () => done(failure(400, 'Bad Request: the request body was cut off')));
    req.pipe(parser);
  });
}

export async function startTelegramApi(options: TelegramFakeOptions = {}): Promise<TelegramFake> {
  const calls: TelegramCall[] = [];
  const rules: FailureRule[] = [];
  const sockets = new Set<Socket>();
  const stalled = new Set<ServerResponse>();
  const waiters = new Set<() => void>();
  const hooks: { beforeReadingBody?: ((token: string) => Promise<void>) | undefined } = {};
  const knownTokens = options.knownTokens ? new Set(options.knownTokens) : undefined;
  let flood: { perChatMs: number; perBotPerSecond: number } | undefined;
  let floodRefusals = 0;
  const lastByChat = new Map<string, number>();
  const recentByBot = new Map<string, number[]>();
  const unstartedChats = new Set<string>();

  /**
   * Flood control as Telegram applies it, on calls that would otherwise be accepted: every call against
   * its bot's limit, a message (`chatId` given) also against its chat's.
   */
  function floodControl(token: string, chatId: string | undefined): Reply | undefined {
    if (!flood) return undefined;
    const at = performance.now();
    const chatKey = chatId === undefined ? undefined : `${token} ${chatId}`;
    const last = chatKey === undefined ? undefined : lastByChat.get(chatKey);
    const recent = (recentByBot.get(token) ?? []).filter((t) => at - t < 1000);
    if ((last !== undefined && at - last < flood.perChatMs) || recent.length >= flood.perBotPerSecond) {
      floodRefusals += 1;
      return failure(429, 'Too Many Requests: retry after 1', { retry_after: 1 });
    }
    if (chatKey !== undefined) lastByChat.set(chatKey, at);
    recent.push(at);
    recentByBot.set(token, recent);
    return undefined;
  }
  let nextMessageId = 1;

  function takeRule(match: (rule: FailureRule) => boolean): TelegramFailure | undefined {
    const rule = rules.find((r) => r.remaining > 0 && match(r));
    if (!rule) return undefined;
    rule.remaining -= 1;
    return rule.failure;
  }

  function accepted(chatId: string, caption: string | undefined, duration: string | undefined, voice: TelegramVoicePart): Reply {
    const numeric = /^-?[0-9]+$/.test(chatId);
    const chat = numeric
      ? Number(chatId) > 0
        ? { id: Number(chatId), first_name: 'Test', type: 'private' }
        : { id: Number(chatId), title: 'Test group', type: 'supergroup' }
      : { id: -1001234567890, title: 'Test channel', username: chatId.slice(1), type: 'channel' };
    return json(200, {
      ok: true,
      result: {
        message_id: nextMessageId++,
        ...(chat.type === 'channel' ? { sender_chat: chat } : { from: { id: 7000000001, is_bot: true, first_name: 'Voicenote test', username: BOT_ID_NAME } }),
        chat,
        date: Math.floor(Date.now() / 1000),
        voice: {
          duration: duration !== undefined ? Number(duration) : 0,
          mime_type: 'audio/ogg',
          file_id: randomBytes(52).toString('base64url'),
          file_unique_id: randomBytes(11).toString('base64url').slice(0, 15),
          file_size: voice.bytes.length,
        },
        ...(caption !== undefined && caption !== '' ? { caption } : {}),
      },
    });
  }

  /** getChat: the chat when the bot knows it (a user who started it, a group it is in); "chat not found" otherwise. */
  function decideGetChat(token: string, form: ParsedForm): Reply {
    const tokenFailure = takeRule((r) => r.token === token);
    if (tokenFailure) return failureReply(tokenFailure);
    if (knownTokens && !knownTokens.has(token)) return failure(401, 'Unauthorized');
    if (form.error) return form.error;
    const chatId = form.fields.chat_id;
    if (chatId === undefined || chatId === '') return failure(400, 'Bad Request: chat_id is empty');
    if (unstartedChats.has(chatId)) return failure(400, 'Bad Request: chat not found');
    const chatFailure = takeRule((r) => r.chatId === chatId);
    if (chatFailure) return failureReply(chatFailure);
    return json(200, { ok: true, result: { id: Number(chatId), first_name: 'Test', type: 'private' } });
  }

  /** sendChatAction as the Bot API takes it: a chat and one of the documented actions; `true` back. */
  function decideChatAction(token: string, form: ParsedForm): Reply {
    const tokenFailure = takeRule((r) => r.token === token);
    if (tokenFailure) return failureReply(tokenFailure);
    if (knownTokens && !knownTokens.has(token)) return failure(401, 'Unauthorized');
    if (form.error) return form.error;
    const chatId = form.fields.chat_id;
    if (chatId === undefined || chatId === '') return failure(400, 'Bad Request: chat_id is empty');
    if (!CHAT_ACTIONS.has(form.fields.action ?? '')) return failure(400, 'Bad Request: wrong parameter action in request');
    const flooded = floodControl(token, undefined);
    if (flooded) return flooded;
    return json(200, { ok: true, result: true });
  }

  function decide(token: string, method: string, form: ParsedForm): Reply {
    if (!readableToken(token)) return failure(401, 'Unauthorized: invalid token specified');
    if (method.toLowerCase() === 'sendchataction') return decideChatAction(token, form);
    if (method.toLowerCase() === 'getchat') return decideGetChat(token, form);
    const tokenFailure = takeRule((r) => r.token === token);
    if (tokenFailure) return failureReply(tokenFailure);
    if (!WELL_FORMED_TOKEN.test(token) || (knownTokens && !knownTokens.has(token))) return failure(401, 'Unauthorized');
    // This fake serves sendVoice and sendChatAction: any other method name is one it does not know.
    if (method.toLowerCase() !== 'sendvoice') return failure(404, 'Not Found: method not found');
    if (form.error) return form.error;
    const chatId = form.fields.chat_id;
    if (chatId === undefined || chatId === '') return failure(400, 'Bad Request: chat_id is empty');
    const voice = form.files.voice;
    if (!voice) {
      return form.fields.voice !== undefined
        ? failure(400, 'Bad Request: wrong remote file identifier specified: can\'t unserialize it. Wrong last symbol')
        : failure(400, 'Bad Request: there is no voice in the request');
    }
    if (voice.bytes.length === 0) return failure(400, 'Bad Request: file must be non-empty');
    const duration = form.fields.duration;
    // Telegram reads `duration` as an Integer; this fake refuses anything else so a fractional value shows.
    if (duration !== undefined && !/^[0-9]+$/.test(duration)) return failure(400, 'Bad Request: field "duration" must be an Integer');
    // Telegram does not read the length from the file (the note would show 0:00): a client that leaves
    // `duration` out, or sends 0, is doing it wrong, and this fake says so.
    if (duration === undefined || Number(duration) < 1) return failure(400, 'Bad Request: fake: duration must be sent, in whole seconds, at least 1');
    const caption = form.fields.caption;
    if (caption !== undefined && [...caption].length > 1024) return failure(400, 'Bad Request: message caption is too long');
    const chatFailure = takeRule((r) => r.chatId === chatId);
    if (chatFailure) return failureReply(chatFailure);
    const flooded = floodControl(token, chatId);
    if (flooded) return flooded;
    return accepted(chatId, caption, duration, voice);
  }

  // getUpdates: queued updates per bot, the one poll waiting per bot, bots with a webhook.
  const queued = new Map<string, Array<Record<string, unknown> & { update_id: number }>>();
  const waiting = new Map<string, { answer: (reply: Reply) => void; wake: () => void }>();
  const webhooks = new Set<string>();
  const getUpdatesLimits = new Map<string, { retryAfter: number; times: number }>();
  let nextUpdateId = 700_000_001;
  let pollConflicts = 0;
  let maxConcurrentPolls = 0;
  const pollsNow = new Map<string, number>();

  /** getUpdates as the Bot API answers it: 409 with a webhook, the previous poll ended by a new one, long polling up to `timeout`. */
  async function getUpdates(token: string, form: ParsedForm, hungUp: Promise<void>): Promise<Reply> {
    if (!readableToken(token)) return failure(401, 'Unauthorized: invalid token specified');
    if (!WELL_FORMED_TOKEN.test(token) || (knownTokens && !knownTokens.has(token))) return failure(401, 'Unauthorized');
    if (form.error) return form.error;
    if (webhooks.has(token)) return failure(409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first");
    const limit = getUpdatesLimits.get(token);
    if (limit && limit.times > 0) {
      limit.times--;
      return failure(429, `Too Many Requests: retry after ${limit.retryAfter}`, { retry_after: limit.retryAfter });
    }
    const previous = waiting.get(token);
    if (previous) {
      pollConflicts++;
      previous.answer(failure(409, 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running'));
    }
    const offset = form.fields.offset !== undefined ? Number(form.fields.offset) : undefined;
    const allowed = form.fields.allowed_updates !== undefined ? (JSON.parse(form.fields.allowed_updates) as string[]) : undefined;
    const timeout = Number(form.fields.timeout ?? 0);
    const list = queued.get(token) ?? [];
    // An offset confirms every update before it: they are never sent again.
    if (offset !== undefined) queued.set(token, list.filter((u) => u.update_id >= offset));
    const ready = (): Array<Record<string, unknown>> => (queued.get(token) ?? []).filter((u) => !allowed || allowed.some((type) => type in u));
    if (ready().length > 0 || timeout <= 0) return json(200, { ok: true, result: ready() });
    pollsNow.set(token, (pollsNow.get(token) ?? 0) + 1);
    maxConcurrentPolls = Math.max(maxConcurrentPolls, pollsNow.get(token)!);
    try {
      return await new Promise<Reply>((resolve) => {
        const timer = setTimeout(() => finish(json(200, { ok: true, result: ready() })), timeout * 1000);
        const me = {
          answer: (reply: Reply) => finish(reply),
          wake: () => {
            if (ready().length > 0) finish(json(200, { ok: true, result: ready() }));
          },
        };
        function finish(reply: Reply): void {
          clearTimeout(timer);
          if (waiting.get(token) === me) waiting.delete(token);
          resolve(reply);
        }
        waiting.set(token, me);
        // A client that hangs up no longer polls.
        void hungUp.then(() => finish(json(200, { ok: true, result: [] })));
      });
    } finally {
      pollsNow.set(token, pollsNow.get(token)! - 1);
    }
  }

  const server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://fake.invalid');
      const path = TOKEN_IN_PATH.exec(url.pathname);
      if (!path) {
        req.resume();
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: false, error_code: 404, description: 'Not Found' }));
        return;
      }
      const [, token = '', method = ''] = path;
      const receivedAt = Date.now();
      if (hooks.beforeReadingBody) {
        await hooks.beforeReadingBody(token);
        // The client hung up while the request waited to be read: like a server that reads a request
        // only once it gets to it, nothing is processed (and the call is recorded as never answered).
        if (req.socket.destroyed) {
          calls.push({ httpMethod: req.method ?? '', method, token, fields: {}, chatId: undefined, caption: undefined, duration: undefined, voice: undefined, reply: { status: 0, body: '' }, at: Date.now(), receivedAt });
          for (const wake of [...waiters]) wake();
          return;
        }
      }
      const form = await parseForm(req);
      const hungUp = new Promise<void>((resolve) => res.on('close', () => resolve()));
      const reply = method.toLowerCase() === 'getupdates' ? await getUpdates(token, form, hungUp) : decide(token, method, form);
      const call: TelegramCall = {
        httpMethod: req.method ?? '',
        method,
        token,
        fields: form.fields,
        chatId: form.fields.chat_id,
        caption: form.fields.caption,
        duration: form.fields.duration,
        voice: form.files.voice,
        reply: 'stall' in reply ? { status: 0, body: '' } : { status: reply.status, body: reply.body },
        at: Date.now(),
        receivedAt,
        ...(req.socket.remotePort !== undefined ? { remotePort: req.socket.remotePort } : {}),
      };
      calls.push(call);
      if ('stall' in reply) {
        stalled.add(res);
        res.on('close', () => stalled.delete(res));
      } else {
        res.writeHead(reply.status, { 'content-type': reply.contentType, 'content-length': Buffer.byteLength(reply.body) }).end(reply.body);
      }
      for (const wake of [...waiters]) wake();
    })().catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' }).end(`fake telegram crashed: ${String(err)}`);
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    apiRoot: `http://127.0.0.1:${port}`,
    calls,
    get beforeReadingBody() {
      return hooks.beforeReadingBody;
    },
    set beforeReadingBody(hook) {
      hooks.beforeReadingBody = hook;
    },
    callsForChat: (chatId) => calls.filter((c) => c.chatId === chatId),
    unstartedChats,
    failForChat(chatId, f, times = Infinity) {
      rules.push({ chatId, failure: f, remaining: times });
    },
    enforceFloodLimits(limits = {}) {
      flood = { perChatMs: limits.perChatMs ?? 900, perBotPerSecond: limits.perBotPerSecond ?? 30 };
    },
    get floodRefusals() {
      return floodRefusals;
    },
    get openConnections() {
      return sockets.size;
    },
    pushUpdate(token, update) {
      const update_id = nextUpdateId++;
      const list = queued.get(token) ?? [];
      list.push({ ...update, update_id });
      queued.set(token, list);
      waiting.get(token)?.wake();
      return update_id;
    },
    setWebhook(token) {
      webhooks.add(token);
    },
    get pollConflicts() {
      return pollConflicts;
    },
    get maxConcurrentPolls() {
      return maxConcurrentPolls;
    },
    limitGetUpdates(token, retryAfter, times = 1) {
      getUpdatesLimits.set(token, { retryAfter, times });
    },
    failForToken(token, f, times = Infinity) {
      rules.push({ token, failure: f, remaining: times });
    },
    waitForCalls(count, filter = () => true, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = (): boolean => {
          const matching = calls.filter(filter);
          if (matching.length < count) return false;
          cleanup();
          resolve(matching);
          return true;
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`the fake Bot API saw ${calls.filter(filter).length} matching calls, not ${count}, in ${timeoutMs} ms`));
        }, timeoutMs);
        const wake = (): void => void check();
        const cleanup = (): void => {
          clearTimeout(timer);
          waiters.delete(wake);
        };
        waiters.add(wake);
        check();
      });
    },
    async close() {
      for (const res of stalled) res.destroy();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
