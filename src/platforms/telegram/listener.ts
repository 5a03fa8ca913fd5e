import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { SecretBox } from '../../core/secret-box.js';
import type { OnHeard } from '../../inbound/recorder.js';
import { claimAffinity, releaseAffinity } from '../../store/affinity.js';
import { endExpiredListening, findListener, forgetListener, listeningBots, refuseListening, saveUpdateOffset, setChatBlocked } from '../../store/listeners.js';
import type { Database } from '../../store/schema.js';
import { Agent, request } from '../../core/http-client.js';
import { ProxyDispatchers } from '../proxy/dispatchers.js';
import { senderProxyUrl } from '../proxy/sender-proxy-url.js';
import { proxyFailureOf } from '../proxy/tunnel.js';
import { followLiveSenderProxy } from '../../store/sender-proxy.js';
import { readUpdate, type TelegramUpdate } from './updates.js';
import type { PlatformServices } from '../platform.js';

/**
 * Listens to the Telegram bots that asked for it (`listen: true`): a bot's updates come only through
 * `getUpdates` or its own webhook, and Telegram serves one consumer at a time (a second getUpdates ends
 * the first with 409), so each bot has ONE poller across all processes, under a lease as WhatsApp
 * sessions are held (affinity_leases, key `telegram-listen:<sender key>`). Every process with a worker
 * runs this; each looks for bots nobody polls and takes them.
 *
 * A bot with a webhook answers getUpdates 409 ("can't use getUpdates method while webhook is active"):
 * its webhook is the user's and is never deleted here; the bot is marked as not listenable with that
 * reason; so is a bot another program keeps polling (409 "terminated by other getUpdates request" a few
 * times in a row). 401: the token was revoked, so it is erased. 429: the poller waits the retry_after
 * Telegram gives. The token is erased too when the window ends (30 days after the bot's last note).
 */

export const ALLOWED_UPDATES = ['message', 'my_chat_member'] as const;

export interface TelegramListenerOptions {
  db: Kysely<Database>;
  secretBox: SecretBox;
  logger: Logger;
  apiRoot: string;
  onHeard: OnHeard;
  /** How often to look for bots to listen to (default 10 s). */
  scanMs?: number;
  /** getUpdates' long-poll `timeout`, seconds (default 25). */
  pollSeconds?: number;
  /** The lease of a bot's poller (default 60 s; renewed at each poll, which lasts at most pollSeconds). */
  leaseMs?: number;
  /** OUTBOUND_PROXY: the proxy of bots without one of their own (docs/proxies.md). */
  outboundProxy?: string;
  /** ALLOW_PRIVATE_URLS: a bot's proxy at a private address is used; otherwise it is checked again before each poll. */
  allowPrivateProxies?: boolean;
}

export interface TelegramListener {
  /** Bots polled by this process now. */
  polling(): string[];
  stop(): Promise<void>;
}

const leaseKey = (senderKey: string): string => `telegram-listen:${senderKey}`;

/** 409 "terminated by other getUpdates request" this many times in a row: another program polls the bot. */
export const MAX_POLL_CONFLICTS = 3;

export function startTelegramListener(options: TelegramListenerOptions): TelegramListener {
  const { db, logger } = options;
  const scanMs = options.scanMs ?? 10_000;
  const pollSeconds = options.pollSeconds ?? 25;
  const leaseMs = options.leaseMs ?? Math.max(60_000, pollSeconds * 2_000 + 10_000);
  const holder = `tgl_${randomUUID()}`;
  const stopping = new AbortController();
  const pollers = new Map<string, Promise<void>>();
  const log = logger.child({ component: 'telegram-listener' });
  // A bot's long poll goes through its own proxy, as its sends do (docs/proxies.md); never direct instead.
  const dispatchers = new ProxyDispatchers(new Agent({ bodyTimeout: (pollSeconds + 15) * 1000, headersTimeout: (pollSeconds + 15) * 1000 }), {
    headersTimeout: (pollSeconds + 15) * 1000,
    bodyTimeout: (pollSeconds + 15) * 1000,
  });

  async function scan(): Promise<void> {
    const now = Date.now();
    const ended = await endExpiredListening(db, now);
    if (ended > 0) log.info({ bots: ended }, 'stopped listening to bots without a note for 30 days; their tokens are erased');
    for (const bot of await listeningBots(db, now)) {
      if (pollers.has(bot.sender_key) || stopping.signal.aborted) continue;
      if (!(await claimAffinity(db, leaseKey(bot.sender_key), holder, Date.now(), leaseMs))) continue;
      const running = poll(bot.sender_key)
        .catch((err: unknown) => log.warn({ err, bot: bot.sender_key }, 'bot listening stopped'))
        .finally(async () => {
          pollers.delete(bot.sender_key);
          await releaseAffinity(db, leaseKey(bot.sender_key), holder).catch(() => undefined);
        });
      pollers.set(bot.sender_key, running);
    }
  }

  /** One bot's long poll, while this process holds its lease and the bot is still to be listened to. */
  async function poll(senderKey: string): Promise<void> {
    let failures = 0;
    let conflicts = 0;
    /** Waits as long as asked, else longer after each failure in a row (1 s doubling up to a minute); a stop ends the wait. */
    const backOff = async (waitMs?: number) => {
      failures++;
      await sleep(waitMs ?? Math.min(60_000, 1_000 * 2 ** failures), undefined, { signal: stopping.signal }).catch(() => undefined);
    };
    while (!stopping.signal.aborted) {
      const bot = await findListener(db, senderKey);
      if (!bot || bot.status !== 'listening' || Number(bot.listen_until) <= Date.now()) return;
      if (!(await claimAffinity(db, leaseKey(senderKey), holder, Date.now(), leaseMs))) return;
      const token = options.secretBox.open(bot.token);
      const body = { timeout: pollSeconds, allowed_updates: ALLOWED_UPDATES, ...(bot.update_offset !== null ? { offset: Number(bot.update_offset) } : {}) };
      let status: number;
      let answer: { ok?: boolean; result?: TelegramUpdate[]; description?: string; parameters?: { retry_after?: unknown } };
      let proxy: string | null = null;
      try {
        proxy = await senderProxyUrl(
          { db, secretBox: options.secretBox, outboundProxy: options.outboundProxy, allowPrivate: options.allowPrivateProxies ?? false },
          { platform: 'telegram', senderKey },
        );
        const response = await request(`${options.apiRoot}/bot${token}/getUpdates`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
          dispatcher: dispatchers.for(proxy),
          signal: AbortSignal.any([stopping.signal, AbortSignal.timeout((pollSeconds + 15) * 1000)]),
        });
        status = response.statusCode;
        answer = (await response.body.json().catch(() => ({}))) as typeof answer;
      } catch (error) {
        if (stopping.signal.aborted) return;
        // Its proxy did not carry the poll (never tried directly instead): the bot shows `disconnected`
        // (`proxy_unreachable`) until a poll goes through it again (docs/proxies.md, "Fail closed").
        const failure = proxyFailureOf(error);
        if (failure) {
          log.warn({ bot: senderKey, why: failure.message }, "the bot's proxy did not carry its long poll; nothing is read directly");
          await followLiveSenderProxy(db, 'telegram', senderKey, false).catch(() => undefined);
        }
        await backOff();
        continue;
      }
      // Telegram answered through its proxy: a bot its proxy had cut off is `ok` again.
      if (proxy !== null && failures > 0) await followLiveSenderProxy(db, 'telegram', senderKey, true).catch(() => undefined);
      if (status === 409 && /webhook/i.test(answer.description ?? '')) {
        const reason = 'the bot has a webhook set, so Telegram refuses getUpdates (409 Conflict); its webhook is left alone: use a bot dedicated to voicenote to have its replies heard';
        await refuseListening(db, senderKey, reason, Date.now());
        log.warn({ bot: senderKey }, reason);
        return;
      }
      if (status === 401) {
        await forgetListener(db, senderKey);
        log.warn({ bot: senderKey }, 'the bot token was refused (401): listening ended and the token erased');
        return;
      }
      // 409 "terminated by other getUpdates request": another program polls this bot, and each poll steals
      // the other's updates; after a few in a row, polling stops and the listening state says why.
      conflicts = status === 409 ? conflicts + 1 : 0;
      if (conflicts >= MAX_POLL_CONFLICTS) {
        const reason = `another program polls this bot with getUpdates (409 Conflict: terminated by other getUpdates request, ${conflicts} times in a row), and two pollers steal each other's replies; stop the other one or use a bot dedicated to voicenote, then send a note with listen: true to listen again`;
        await refuseListening(db, senderKey, reason, Date.now());
        log.warn({ bot: senderKey }, reason);
        return;
      }
      if (status !== 200 || !answer.ok || !Array.isArray(answer.result)) {
        // 429: as long as Telegram says (parameters.retry_after); 5xx and the rest: a growing wait.
        const retryAfter = status === 429 && typeof answer.parameters?.retry_after === 'number' ? answer.parameters.retry_after * 1000 : undefined;
        await backOff(retryAfter);
        continue;
      }
      try {
        await handle(senderKey, answer.result);
      } catch (err) {
        // Not recorded (storage down): the offset stays unconfirmed, so the next poll brings them again.
        log.warn({ err, bot: senderKey }, 'could not record what the bot heard; asking for it again later');
        await backOff();
        continue;
      }
      failures = 0;
    }
  }

  async function handle(senderKey: string, updates: TelegramUpdate[]): Promise<void> {
    if (updates.length === 0) return;
    for (const update of updates) {
      const read = readUpdate(update, senderKey);
      if (read?.kind === 'reply') await options.onHeard(read.heard);
      else if (read?.kind === 'membership') await setChatBlocked(db, { platform: 'telegram', senderKey, recipient: read.chat }, read.blocked, Date.now());
    }
    // Confirmed only once all are recorded: a process that dies or a storage outage before this gets them
    // again (the recorder keeps each once).
    const next = Math.max(...updates.map((u) => u.update_id)) + 1;
    await saveUpdateOffset(db, senderKey, next, Date.now());
  }

  let scanning: Promise<void> | undefined;
  const timer = setInterval(() => {
    scanning ??= scan()
      .catch((err: unknown) => log.warn({ err }, 'could not look for bots to listen to'))
      .finally(() => (scanning = undefined));
  }, scanMs);
  timer.unref();

  return {
    polling: () => [...pollers.keys()],
    async stop() {
      clearInterval(timer);
      stopping.abort();
      await scanning;
      await Promise.allSettled([...pollers.values()]);
    },
  };
}

/** The listener of a process, from its services and the tests' tuning (`platformTuning.telegram`). */
export function startTelegramListening(
  services: PlatformServices & { secretBox: SecretBox; onHeard: OnHeard },
  tuning: { listenScanMs?: number; listenPollSeconds?: number },
): TelegramListener {
  const { config } = services;
  return startTelegramListener({
    db: services.db.kysely,
    secretBox: services.secretBox,
    logger: services.logger,
    apiRoot: config.telegramApiRoot,
    onHeard: services.onHeard,
    ...(config.outboundProxy !== undefined ? { outboundProxy: config.outboundProxy } : {}),
    allowPrivateProxies: config.audioAllowPrivateUrls,
    ...(tuning.listenScanMs !== undefined ? { scanMs: tuning.listenScanMs } : {}),
    ...(tuning.listenPollSeconds !== undefined ? { pollSeconds: tuning.listenPollSeconds } : {}),
  });
}
