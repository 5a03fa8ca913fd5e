import type { DeliveryJob } from '../platform.js';

/**
 * The bot's @username, from the message Telegram says it sent (`result.from`: the bot itself, the same
 * user getMe describes), told to the sender's record as its label. Never the token.
 */
export function tellBotName(job: DeliveryJob, text: string | undefined): void {
  if (!job.onSenderLabel || text === undefined) return;
  let from: { is_bot?: unknown; username?: unknown } | undefined;
  try {
    from = (JSON.parse(text) as { result?: { from?: typeof from } }).result?.from ?? undefined;
  } catch {
    return;
  }
  if (from?.is_bot === true && typeof from.username === 'string' && /^[A-Za-z0-9_]{1,64}$/.test(from.username)) job.onSenderLabel(`@${from.username}`);
}
