import { hash } from 'node:crypto';
import { MiB, OGG_OPUS_VOICE } from '../../audio/targets.js';
import { TELEGRAM_ACCOUNT_RHYTHM } from '../../core/rhythm.js';
import { createMemorySlotPacer, createRedisSlotPacer, type SlotPacer } from '../pacing.js';
import type { PlatformDefinition, PlatformServices } from '../platform.js';
import { isChatBlocked } from '../../store/listeners.js';
import { savePlatformMessageId } from '../../store/receipts.js';
import { botPlatformMessageId } from './updates.js';
import { createTelegramAdapter } from './adapter.js';
import { askTelegramAboutChat } from './recipient-check.js';
import { checkTelegramRecipient, checkTelegramSession, MAX_CAPTION_LENGTH } from './rules.js';
import { accountAffinityKey, accountSenderKey, checkAccountAtAccept, createRoutedAdapter, accountSandboxCheck } from './account/platform-hooks.js';

/** Tuning for benchmarks: `{ pace: false }` sends without flood-limit pacing; tests: how often `record_voice` repeats. */
export type TelegramTuning = { pace?: boolean; chatActionEveryMs?: number };
const chatActionEvery = (value: unknown): number | undefined =>
  typeof value === 'object' && value !== null && typeof (value as TelegramTuning).chatActionEveryMs === 'number' ? (value as TelegramTuning).chatActionEveryMs : undefined;
const isUnpaced = (value: unknown): boolean => typeof value === 'object' && value !== null && (value as TelegramTuning).pace === false;

/** The bot's sender key: a hash of its token (never the token). */
export const botKey = (token: string): string => hash('sha256', token, 'base64url').slice(0, 22);

/**
 * The slots recipient checks take their bot's turn in: Redis' when configured, shared with every
 * process's sends (the same keys); otherwise this process's own (one per services).
 */
const checkPacers = new WeakMap<object, SlotPacer>();
function checkPacerOf(services: PlatformServices): SlotPacer {
  let pacer = checkPacers.get(services);
  if (!pacer) {
    pacer = services.redis
      ? createRedisSlotPacer({
          redis: services.redis,
          keyPrefix: services.redisKeyPrefix ?? 'voicenote',
          onFallback: (err) => services.logger.warn({ err }, 'Redis did not answer; Telegram recipient checks are paced per process until it does'),
        })
      : createMemorySlotPacer();
    checkPacers.set(services, pacer);
  }
  return pacer;
}

/** Telegram through the official Bot API, with the bot token of each send. */
export const telegram: PlatformDefinition = {
  name: 'telegram',
  // OGG/Opus shows as a voice note; bots may send voice files up to 50 MB; no length limit of its own.
  audio: { ...OGG_OPUS_VOICE, maxBytes: 50 * MiB, maxDurationSeconds: null },
  maxCaptionLength: MAX_CAPTION_LENGTH,
  sessionFields: ['bot_token', 'session_id'],
  checkRecipient: checkTelegramRecipient,
  checkSession: checkTelegramSession,
  // sendChatAction with record_voice.
  recordingIndicator: true,
  // The bot, by a hash of its token (never the token); a linked account by its session id (not a secret).
  senderKey: (session) => accountSenderKey(session) ?? botKey(String(session.bot_token)),
  senderKind: (senderKey) => (senderKey.startsWith('ts_') ? 'telegram_account' : 'telegram_bot'),
  recipientExists: async ({ session, recipient, proxy }, services) =>
    session.session_id !== undefined
      ? { exists: null, reason: 'a linked Telegram account is not asked before a send; its send says whether the recipient exists' }
      : askTelegramAboutChat(services.config.telegramApiRoot, String(session.bot_token), recipient, checkPacerOf(services), proxy),
  // A linked account must exist and be connected; only the process holding its connection sends through it.
  checkAtAccept: checkAccountAtAccept,
  // Bots have no cap (the Bot API's flood limits pace them); a person's account has WhatsApp-like caution.
  senderRhythm: (session) => (accountSenderKey(session) !== undefined ? TELEGRAM_ACCOUNT_RHYTHM : undefined),
  affinityKey: accountAffinityKey,
  sandboxCheck: accountSandboxCheck,
  createLiveAdapter: ({ services, tuning }) => {
    // A process with a worker holds linked Telegram accounts, taking over those nobody holds.
    services.telegramAccounts?.serveDeliveries();
    return createRoutedAdapter(services, tuning.telegramAccount, createTelegramAdapter({
      apiRoot: services.config.telegramApiRoot,
      // A chat that blocked a listened bot (my_chat_member "kicked"): its notes fail at once.
      isBlocked: (token, chatId) => isChatBlocked(services.db.kysely, { platform: 'telegram', senderKey: botKey(token), recipient: chatId }),
      // Kept on the note, so a reply quoting it (reply_to_message) is recorded on it.
      onSent: (job, token, sent) => savePlatformMessageId(services.db.kysely, job.messageId, botPlatformMessageId(botKey(token), sent.chatId, sent.messageId)),
      ...(chatActionEvery(tuning.telegram) !== undefined ? { chatActionEveryMs: chatActionEvery(tuning.telegram)! } : {}),
      // Benchmarks of the service itself against the fake Bot API may turn pacing off (never from the environment).
      ...(isUnpaced(tuning.telegram) ? { pacer: { reserve: async () => 0 } } : {}),
      // Shared by every process when Redis is configured: the flood limits are per bot and chat, not per process.
      ...(services.redis && !isUnpaced(tuning.telegram)
        ? {
            pacer: createRedisSlotPacer({
              redis: services.redis,
              keyPrefix: services.redisKeyPrefix ?? 'voicenote',
              onFallback: (err) => services.logger.warn({ err }, 'Redis did not answer; Telegram sends are paced per process until it does'),
            }),
          }
        : {}),
    }));
  },
};
