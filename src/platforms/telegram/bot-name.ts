import type { DeliveryJob } from '../platform.js';

/**
 * The bot's @username, from the message Telegram says it sent (`result.from`: the bot itself, the same
 * user getMe describes), told to the sender's record as its label. Never the token. `reply` is the
 * Bot API's reply as parsed already (its `ok` checked).
 */
export function tellBotName(job: DeliveryJob, reply: { result?: unknown }): void {
  if (!job.onSenderLabel) return;
  const result = reply.result;
  const from = result !== null && typeof result === 'object' ? (result as { from?: { is_bot?: unknown; username?: unknown } | null }).from : undefined;
  if (from?.is_bot === true && typeof from.username === 'string' && /^[A-Za-z0-9_]{1,64}$/.test(from.username)) job.onSenderLabel(`@${from.username}`);
}
