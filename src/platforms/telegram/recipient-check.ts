import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from '../../core/http-client.js';
import { ProxyDispatchers } from '../proxy/dispatchers.js';
import { proxyFailureOf } from '../proxy/tunnel.js';
import { takeSlot, type SlotPacer } from '../pacing.js';
import type { RecipientCheck } from '../platform.js';
import { scrubToken } from './token-scrub.js';
import { telegramPaceRules } from './adapter.js';

const CHECK_TIMEOUT_MS = 10_000;
/** The longest a check waits for its bot's turn among its sends and other checks. */
const TURN_WAIT_MS = 10_000;

/** Waits for the bot's next slot (its flood limit, shared with its sends); false when it is not within TURN_WAIT_MS. */
async function botTurn(pacer: SlotPacer, token: string, chatId: string): Promise<boolean> {
  const [botRule] = telegramPaceRules(token, chatId);
  const deadline = Date.now() + TURN_WAIT_MS;
  for (;;) {
    const left = deadline - Date.now();
    if (left < 0) return false;
    const slot = await takeSlot(pacer, [botRule!], left);
    if (slot.kind === 'go') return true;
    if (slot.kind === 'later') await sleep(Math.min(slot.retryAfterMs, left + 1));
  }
}

// The checks' connections through bots' proxies, one Agent per proxy (the direct ones use undici's global dispatcher).
const checkDispatchers = new ProxyDispatchers(new Agent(), { connectTimeoutMs: CHECK_TIMEOUT_MS });

/**
 * Does a bot reach this chat? The Bot API's `getChat`: a bot knows a user only once the user has
 * started it (or a group or channel it was added to), so "chat not found" means this bot cannot write
 * there. The token goes in the path only, never in an answer. With a `pacer`, asked in the bot's turn.
 */
export async function askTelegramAboutChat(apiRoot: string, token: string, chatId: string, pacer?: SlotPacer, proxy?: string | null): Promise<RecipientCheck> {
  // Paced as the bot's sends are (its flood limit): many checks at once come one slot apart.
  if (pacer && !(await botTurn(pacer, token, chatId))) return { exists: null, reason: "Telegram was not asked: the bot's turn did not come within 10 s" };
  let status: number;
  let reply: { ok?: unknown; description?: unknown; parameters?: { retry_after?: unknown } } | undefined;
  try {
    const response = await request(`${apiRoot}/bot${token}/getChat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ chat_id: chatId }),
      // Through the bot's proxy, as its sends (docs/proxies.md); a proxy that fails is never skipped.
      ...(proxy ? { dispatcher: checkDispatchers.for(proxy) } : {}),
      signal: AbortSignal.timeout(CHECK_TIMEOUT_MS),
    });
    status = response.statusCode;
    const text = await response.body.text();
    try {
      reply = JSON.parse(text) as typeof reply;
    } catch {
      reply = undefined;
    }
  } catch (error) {
    const failure = proxyFailureOf(error);
    return { exists: null, reason: failure ? `Telegram could not be reached: ${failure.message}` : 'Telegram could not be reached' };
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
