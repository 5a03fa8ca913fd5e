import { hash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { networkErrorCode } from '../../core/error-code.js';
import { Agent, request } from '../../core/http-client.js';
import { deadline } from '../deadline.js';
import { proxyDeliveryError, ProxyDispatchers } from '../proxy/dispatchers.js';
import { createMemorySlotPacer, takeSlot, type SlotPacer } from '../pacing.js';
import { DeliveryError, type DeliveryJob, type PlatformAdapter } from '../platform.js';
import { VoiceBytes } from '../voice-bytes.js';
import { tellBotName } from './bot-name.js';
import { scrubber } from './token-scrub.js';
import { multipartBody, multipartParts } from './multipart.js';
import type { TelegramSession } from './rules.js';

/**
 * Live delivery through the official Bot API: one multipart
 * `sendVoice` per attempt, with the bot token of the message's own session.
 */
export interface TelegramAdapterOptions {
  /** `TELEGRAM_API_ROOT`, without a trailing slash. */
  apiRoot: string;
  timeouts?: Partial<TelegramTimeouts>;
  /** Tests: a dispatcher of their own. */
  dispatcher?: Dispatcher;
  /** Where send slots are booked (Redis when configured, so every process paces together); memory by default. */
  pacer?: SlotPacer;
  /** Longest a delivery waits here for its slot before going back to the queue (default 1 s). */
  maxPaceWaitMs?: number;
  /** How often `record_voice` is sent again while the indicator shows (default 4 s: Telegram shows it for up to 5 s). */
  chatActionEveryMs?: number;
  /** Whether the chat blocked this bot (heard from its updates when it is listened to): such a note fails at once, without a call. */
  isBlocked?: (token: string, chatId: string) => Promise<boolean>;
  /** The note was sent: Telegram's id of it in its chat (a reply quoting it names that id). */
  onSent?: (job: DeliveryJob, token: string, sent: { chatId: string; messageId: number }) => Promise<void>;
}

const DEFAULT_CHAT_ACTION_EVERY_MS = 4_000;
// Telegram's flood limits (not published exactly; a 429's retry_after is the authority): about 30
// messages a second per bot, about 1 a second per chat, about 20 a minute per group or channel.
const BOT_INTERVAL_MS = 35;
const PRIVATE_CHAT_INTERVAL_MS = 1_000;
const GROUP_CHAT_INTERVAL_MS = 3_000;
// A delivery waiting for its slot holds one of the worker's few slots (WORKER_CONCURRENCY, 64 by
// default) that other bots and chats could use. Up to a second keeps one bot at its full pace (~28 sends
// in line); a longer line goes back to the queue, to come back when its turn is near (pacing.ts). With
// 10 s here, twenty notes sent at once to each of a few chats held every slot asleep (and booked their
// bot up to 10 s ahead): one bot delivered 3 notes a second instead of 28.
const DEFAULT_MAX_PACE_WAIT_MS = 1_000;

/** The slots one send needs: its bot's and its chat's (groups and channels have negative ids or a @username). */
export function telegramPaceRules(token: string, chatId: string): Array<{ key: string; intervalMs: number }> {
  // Never the token itself in a key: keys are visible to anyone who can list Redis.
  const bot = hash('sha256', token, 'base64url').slice(0, 22);
  const isPrivate = /^[0-9]+$/.test(chatId);
  return [
    { key: `telegram:bot:${bot}`, intervalMs: BOT_INTERVAL_MS },
    { key: `telegram:chat:${bot}:${chatId}`, intervalMs: isPrivate ? PRIVATE_CHAT_INTERVAL_MS : GROUP_CHAT_INTERVAL_MS },
  ];
}

export interface TelegramTimeouts {
  connectMs: number;
  /** From the end of the upload to the reply's headers: Telegram stores the file before it answers. */
  headersMs: number;
  /** Longest silence while the reply's body arrives. */
  bodyMs: number;
  /** The whole call, upload included; grows with the file so a large note is not cut off. */
  totalMs(sizeBytes: number): number;
}

const MiB = 1024 * 1024;

// 60 s for the largest voice file a bot may send (50 MB), 20 s for a small one.
const DEFAULT_TIMEOUTS: TelegramTimeouts = {
  connectMs: 10_000,
  headersMs: 30_000,
  bodyMs: 30_000,
  totalMs: (sizeBytes) => 20_000 + Math.ceil((sizeBytes / MiB) * 800),
};

// Replies are a few hundred bytes; anything far larger is not the Bot API talking.
const MAX_REPLY_BYTES = 1 * MiB;

interface TelegramReply {
  ok: boolean;
  /** What a successful call returns (for sendVoice, the Message sent). */
  result?: unknown;
  error_code?: unknown;
  description?: unknown;
  parameters?: { retry_after?: unknown; migrate_to_chat_id?: unknown } | null;
}

/** The reply's text; undefined when it grows past MAX_REPLY_BYTES (read by its events: cheaper than an async iterator). */
function readCapped(body: Dispatcher.ResponseData['body']): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_REPLY_BYTES) {
        body.destroy();
        resolve(undefined);
      } else chunks.push(chunk);
    });
    body.once('end', () => resolve(Buffer.concat(chunks, size).toString('utf8')));
    body.once('error', reject);
  });
}

function parseReply(text: string | undefined): TelegramReply | undefined {
  if (text === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed !== null && typeof parsed === 'object' && typeof (parsed as TelegramReply).ok === 'boolean') return parsed as TelegramReply;
  } catch {
    // not JSON: handled as a reply from something other than the Bot API
  }
  return undefined;
}

// Telegram's descriptions for a recipient who will not take the bot's messages (the documented 403s).
const RECIPIENT_REFUSES = ['bot was blocked by the user', "bot can't initiate conversation with a user", 'user is deactivated'];

/**
 * Refusals of voice notes in particular, as the Bot API words them (docs/platforms.md, "Telegram"), and
 * why, for the message the caller sees. The bot may still send other things to the chat.
 */
const VOICE_REFUSALS: Array<{ says: string; why: string }> = [
  // tdlib's check of the chat's permissions for a voice note (MessageContent.cpp), through the Bot API.
  {
    says: 'not enough rights to send voice notes',
    why: "the bot may not send voice notes in this chat: the group's or channel's permissions do not allow it (an admin can allow voice messages for members, or make the bot an admin)",
  },
  // A user whose privacy settings refuse voice notes from this bot (Settings → Privacy and Security → Voice Messages).
  {
    says: 'user restricted receiving of voice note messages',
    why: "the recipient's privacy settings refuse voice messages from this bot (Settings → Privacy and Security → Voice Messages)",
  },
  // The same refusal as the MTProto error, passed through: a (Premium) user who takes no voice messages.
  {
    says: 'voice_messages_forbidden',
    why: 'the recipient does not accept voice messages: their privacy settings refuse them (Settings → Privacy and Security → Voice Messages)',
  },
];

/** A Bot API failure reply as a DeliveryError (one of the documented failure codes). */
export function telegramFailure(httpStatus: number, reply: TelegramReply): DeliveryError {
  const errorCode = typeof reply.error_code === 'number' ? reply.error_code : httpStatus;
  const description = typeof reply.description === 'string' && reply.description !== '' ? reply.description : `HTTP ${httpStatus}`;
  const said = `Telegram answered ${errorCode} "${description}"`;
  const lower = description.toLowerCase();

  // Only 401 says the token is bad: "Unauthorized" for a token Telegram does not know or has revoked,
  // "Unauthorized: invalid token specified" for one it cannot read (telegram-bot-api's ClientManager).
  if (errorCode === 401) return new DeliveryError('invalid_session', `${said}: the bot token is wrong or has been revoked`, false);
  if (errorCode === 404) {
    // The Bot API answers 404 only for a path it does not serve ("Not Found", "Not Found: method not
    // found"): this service is talking to the wrong address, not the sender's fault. Tried again, so
    // the notes go out once the operator has fixed TELEGRAM_API_ROOT (within the retry window).
    return new DeliveryError('platform_error', `${said}: no Bot API sendVoice at this address; TELEGRAM_API_ROOT is probably wrong (it is the Bot API's root, such as https://api.telegram.org)`, true);
  }
  if (errorCode === 429) {
    const retryAfter = reply.parameters?.retry_after;
    const retryAfterMs = typeof retryAfter === 'number' && Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter * 1000 : undefined;
    return new DeliveryError('platform_rate_limited', `${said}: the bot is sending too fast`, true, retryAfterMs);
  }
  if (errorCode >= 500) return new DeliveryError('platform_error', `${said}: a server error on Telegram's side`, true);
  if (lower.includes('chat not found')) {
    return new DeliveryError('recipient_not_found', `${said}: no chat with this id or username is known to the bot`, false);
  }
  const voiceRefusal = VOICE_REFUSALS.find((r) => lower.includes(r.says));
  if (voiceRefusal) return new DeliveryError('recipient_blocked', `${said}: ${voiceRefusal.why}`, false);
  if (errorCode === 403 || RECIPIENT_REFUSES.some((text) => lower.includes(text))) {
    return new DeliveryError('recipient_blocked', `${said}: the recipient does not accept voice notes from this bot`, false);
  }
  const migrated = reply.parameters?.migrate_to_chat_id;
  if (typeof migrated === 'number') {
    return new DeliveryError('recipient_not_found', `${said}: the group is now the supergroup ${migrated}; send to that chat id`, false);
  }
  return new DeliveryError('platform_error', `${said}: Telegram refused the voice note`, false);
}

/** Whole seconds, rounded up, at least 1 (Telegram takes an Integer). */
export function telegramDuration(seconds: number): number {
  return Number.isFinite(seconds) ? Math.max(1, Math.ceil(seconds)) : 1;
}

export function createTelegramAdapter(options: TelegramAdapterOptions): PlatformAdapter {
  const timeouts: TelegramTimeouts = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
  const pacer = options.pacer ?? createMemorySlotPacer();
  const maxPaceWaitMs = options.maxPaceWaitMs ?? DEFAULT_MAX_PACE_WAIT_MS;
  // Each sender's proxy its own dispatcher (docs/proxies.md); senders without one go direct.
  const dispatchers = new ProxyDispatchers(
    options.dispatcher ??
      new Agent({
        connect: { timeout: timeouts.connectMs },
        headersTimeout: timeouts.headersMs,
        bodyTimeout: timeouts.bodyMs,
      }),
    { connectTimeoutMs: timeouts.connectMs, headersTimeout: timeouts.headersMs, bodyTimeout: timeouts.bodyMs },
  );
  const voiceBytes = new VoiceBytes();
  const chatActionEveryMs = options.chatActionEveryMs ?? DEFAULT_CHAT_ACTION_EVERY_MS;
  /** The indicators this process keeps up, by message id: a light timer each, ended by the note or its time. */
  const indicators = new Map<string, NodeJS.Timeout>();

  /** One sendChatAction `record_voice` in its pacing slot; false when the slot is too far off (that repetition is skipped). */
  async function chatAction(token: string, chatId: string, proxy: string | null | undefined, signal: AbortSignal | undefined, scrub: (text: string) => string): Promise<boolean> {
    if ((await takeSlot(pacer, telegramPaceRules(token, chatId), maxPaceWaitMs, signal)).kind !== 'go') return false;
    const limit = deadline(signal, timeouts.connectMs + timeouts.headersMs);
    let status: number;
    let text: string | undefined;
    try {
      const response = await request(`${options.apiRoot}/bot${token}/sendChatAction`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ chat_id: chatId, action: 'record_voice' }),
        dispatcher: dispatchers.for(proxy),
        signal: limit.signal,
        headersTimeout: timeouts.headersMs,
        bodyTimeout: timeouts.bodyMs,
      });
      status = response.statusCode;
      text = await readCapped(response.body);
    } catch (error) {
      throw proxyDeliveryError(error) ?? new DeliveryError('platform_error', scrub(`could not reach Telegram (${networkErrorCode(error)})`), true);
    } finally {
      limit.clear();
    }
    handleReply(status, text, scrub);
    return true;
  }

  function stopIndicator(messageId: string): void {
    const timer = indicators.get(messageId);
    if (timer) clearInterval(timer);
    indicators.delete(messageId);
  }

  /** One call of sendVoice with this body; the reply's status and text. */
  async function post(token: string, job: DeliveryJob, body: { contentType: string; length: number; payload: Buffer | Readable }, size: number, scrub: (text: string) => string) {
    const limit = deadline(job.signal, timeouts.totalMs(size));
    try {
      const response = await request(`${options.apiRoot}/bot${token}/sendVoice`, {
        method: 'POST',
        headers: { 'content-type': body.contentType, 'content-length': String(body.length) },
        body: body.payload,
        dispatcher: dispatchers.for(job.proxy),
        signal: limit.signal,
        headersTimeout: timeouts.headersMs,
        bodyTimeout: timeouts.bodyMs,
      });
      return { status: response.statusCode, text: await readCapped(response.body) };
    } catch (error) {
      // The code only, never the error's text: it names the address of TELEGRAM_API_ROOT (error-code.ts).
      const proxyFailure = job.signal.aborted ? undefined : proxyDeliveryError(error);
      if (proxyFailure) throw proxyFailure;
      const what = job.signal.aborted ? ': the attempt was aborted' : limit.timedOut ? `: no reply within ${timeouts.totalMs(size)} ms` : ` (${networkErrorCode(error)})`;
      throw new DeliveryError('platform_error', scrub(`could not reach Telegram${what}`), true);
    } finally {
      limit.clear();
    }
  }

  /** Tells `onSent` the id Telegram gave the note; a failure there never fails a note already sent. */
  async function sent(token: string, job: DeliveryJob, reply: TelegramReply): Promise<void> {
    const message = reply.result as { message_id?: unknown; chat?: { id?: unknown } } | undefined;
    const chatId = typeof message?.chat?.id === 'number' || typeof message?.chat?.id === 'string' ? String(message.chat.id) : job.recipient;
    if (typeof message?.message_id === 'number') await options.onSent?.(job, token, { chatId, messageId: message.message_id }).catch(() => undefined);
  }

  return {
    async showRecording(job: DeliveryJob, ms: number): Promise<void> {
      if (job.session.platform !== 'telegram') return;
      const token = (job.session as unknown as Extract<TelegramSession, { bot_token: string }>).bot_token;
      const scrub = scrubber(token);
      stopIndicator(job.messageId);
      const until = Date.now() + ms;
      await chatAction(token, job.recipient, job.proxy, job.signal, scrub);
      // Telegram shows the action for up to 5 s: again every few seconds until the note's time is up.
      // A timer, not a wait: the worker's slot is free meanwhile (and a failed repetition is just skipped).
      const timer = setInterval(() => {
        if (Date.now() + chatActionEveryMs / 2 > until) {
          stopIndicator(job.messageId);
          return;
        }
        chatAction(token, job.recipient, job.proxy, undefined, scrub).catch(() => stopIndicator(job.messageId));
      }, chatActionEveryMs);
      timer.unref();
      indicators.set(job.messageId, timer);
    },

    async deliver(job: DeliveryJob): Promise<void> {
      // The note itself ends the indicator on Telegram's side; no repetition after it.
      stopIndicator(job.messageId);
      if (job.session.platform !== 'telegram') {
        throw new DeliveryError('invalid_session', 'the message does not carry a Telegram bot token', false);
      }
      const token = (job.session as unknown as Extract<TelegramSession, { bot_token: string }>).bot_token;
      const scrub = scrubber(token);
      if (await options.isBlocked?.(token, job.recipient)) {
        throw new DeliveryError('recipient_blocked', 'the recipient blocked this bot (Telegram told the listened bot so); not sent', false);
      }

      // Within the flood limits, so a bulk send does not run into 429s; a long line goes back to the queue.
      const slot = await takeSlot(pacer, telegramPaceRules(token, job.recipient), maxPaceWaitMs, job.signal);
      if (slot.kind === 'later') {
        throw new DeliveryError(
          'platform_rate_limited',
          "more voice notes are lined up for this bot or chat than Telegram's flood limits let through now; it waits its turn in the queue",
          true,
          slot.retryAfterMs,
          { notAttempted: true },
        );
      }
      // A shutdown or a lost lease stops the wait at once: nothing was sent, the message goes back untouched.
      if (slot.kind === 'stopped') {
        throw new DeliveryError('platform_error', 'the attempt was stopped while it waited for its pacing slot; not attempted', true, undefined, { notAttempted: true });
      }

      const fields: Array<[string, string]> = [['chat_id', job.recipient]];
      if (job.caption !== null && job.caption !== '') fields.push(['caption', job.caption]);
      // Telegram does not read the length from the file: without `duration` the note shows 0:00.
      fields.push(['duration', String(telegramDuration(job.audio.durationSeconds))]);

      const part = { name: 'voice', fileName: job.audio.fileName, mimeType: job.audio.mimeType };
      if (voiceBytes.fits(job.audio)) {
        // A voice note of a usual size: the whole form in one buffer, sent in one write (the bytes of a
        // recording sent to many recipients are read once: voice-bytes.ts).
        const bytes = await voiceBytes.read(job.audio);
        const form = multipartParts(fields, part);
        const payload = Buffer.concat([form.head, bytes, form.tail]);
        const { status, text } = await post(token, job, { contentType: form.contentType, length: payload.length, payload }, payload.length, scrub);
        await sent(token, job, handleReply(status, text, scrub, job));
        return;
      }
      // One handle for the whole upload: the file stays the same bytes even if the audio cache
      // touches or replaces its path meanwhile (a path-backed Blob fails the read when that happens).
      const file = await open(job.audio.path, 'r');
      try {
        const { size } = await file.stat();
        const body = multipartBody(fields, { ...part, file, size });
        const { status, text } = await post(token, job, { contentType: body.contentType, length: body.length, payload: Readable.from(body.stream(), { objectMode: false }) }, size, scrub);
        await sent(token, job, handleReply(status, text, scrub, job));
      } finally {
        await file.close();
      }
    },
  };
}

function handleReply(status: number, text: string | undefined, scrub: (text: string) => string, job?: DeliveryJob): TelegramReply {
  const reply = parseReply(text);
  if (reply === undefined) {
    // A 404 page that is not the Bot API's: the address is another server's.
    const hint = status === 404 ? "; TELEGRAM_API_ROOT is probably wrong (it is the Bot API's root, such as https://api.telegram.org)" : '';
    throw new DeliveryError('platform_error', `Telegram answered HTTP ${status} without a Bot API reply${hint}`, true);
  }
  if (reply.ok) {
    if (job) tellBotName(job, reply);
    return reply;
  }
  const failure = telegramFailure(status, reply);
  throw new DeliveryError(failure.code, scrub(failure.message), failure.transient, failure.retryAfterMs);
}
