import { request } from '../../core/http-client.js';
import type { RecipientCheck } from '../platform.js';
import { scrubToken } from './token-scrub.js';

const CHECK_TIMEOUT_MS = 10_000;

/**
 * Does a bot reach this chat? The Bot API's `getChat`: a bot knows a user only once the user has
 * started it (or a group or channel it was added to), so "chat not found" means this bot cannot write
 * there. The token goes in the path only, never in an answer.
 */
export async function askTelegramAboutChat(apiRoot: string, token: string, chatId: string): Promise<RecipientCheck> {
  let status: number;
  let reply: { ok?: unknown; description?: unknown; parameters?: { retry_after?: unknown } } | undefined;
  try {
    const response = await request(`${apiRoot}/bot${token}/getChat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ chat_id: chatId }),
      signal: AbortSignal.timeout(CHECK_TIMEOUT_MS),
    });
    status = response.statusCode;
    const text = await response.body.text();
    try {
      reply = JSON.parse(text) as typeof reply;
    } catch {
      reply = undefined;
    }
  } catch {
    return { exists: null, reason: 'Telegram could not be reached' };
  }
  if (status === 200 && reply?.ok === true) return { exists: true, reason: null };
  const description = typeof reply?.description === 'string' ? reply.description : `HTTP ${status}`;
  if (status === 400 && /chat not found/i.test(description)) {
    return { exists: false, reason: 'the bot does not know this chat: a bot reaches only users who started it, and groups or channels it was added to' };
  }
  if (status === 401) return { exists: null, reason: 'Telegram did not say: the bot token is wrong or has been revoked' };
  if (status === 429) return { exists: null, reason: 'Telegram did not say: the bot is asked to wait (flood control)' };
  return { exists: null, reason: `Telegram did not say (${status}: ${scrubToken(description, token)})` };
}
