import { MiB, OGG_OPUS_VOICE } from '../../audio/targets.js';
import type { PlatformDefinition } from '../platform.js';
import { createTelegramAdapter } from './adapter.js';
import { checkTelegramRecipient, checkTelegramSession, MAX_CAPTION_LENGTH } from './rules.js';

/** Telegram through the official Bot API, with the bot token of each send. */
export const telegram: PlatformDefinition = {
  name: 'telegram',
  // OGG/Opus shows as a voice note; bots may send voice files up to 50 MB; no length limit of its own.
  audio: { ...OGG_OPUS_VOICE, maxBytes: 50 * MiB, maxDurationSeconds: null },
  maxCaptionLength: MAX_CAPTION_LENGTH,
  checkRecipient: checkTelegramRecipient,
  checkSession: checkTelegramSession,
  createLiveAdapter: ({ services }) => createTelegramAdapter({ apiRoot: services.config.telegramApiRoot }),
};
