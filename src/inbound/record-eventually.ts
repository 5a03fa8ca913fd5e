import type { Logger } from 'pino';
import type { Heard } from './heard.js';

/** The waits between tries of a message that could not be recorded: doubling from 1 s up to a minute. */
const FIRST_RETRY_MS = 1_000;
const LONGEST_RETRY_MS = 60_000;

export interface EventualRecorder<T = Heard> {
  /** Hands a message on; a failure is tried again later, in this process, until it is recorded. Never rejects. */
  (heard: T): Promise<void>;
  /** Messages still waiting for a try (the process stops: they are logged as not recorded). */
  pending(): number;
  stop(): void;
}

/**
 * For listeners a message is pushed to once (a WhatsApp socket, a linked Telegram account, the sandbox's
 * answering recipients): they cannot ask for it again, so a message that could not be recorded (storage
 * down) is kept here and tried again at growing intervals until it is. Pulling listeners (a Telegram bot's
 * getUpdates, a LinkedIn look) instead leave it unconfirmed and fetch it again. Receipts pushed once (a
 * LinkedIn seen event) go the same way, with their own recording function.
 */
export function recordEventually<T = Heard>(
  onHeard: (item: T) => Promise<void>,
  logger: Logger,
  retry = { firstMs: FIRST_RETRY_MS, longestMs: LONGEST_RETRY_MS },
): EventualRecorder<T> {
  const write = onHeard;
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;

  function tryLater(heard: T, waitMs: number): void {
    if (stopped) return;
    const timer = setTimeout(() => {
      timers.delete(timer);
      write(heard).catch(() => tryLater(heard, Math.min(waitMs * 2, retry.longestMs)));
    }, waitMs);
    timer.unref();
    timers.add(timer);
  }

  const record = (async (heard: T) => {
    // The recorder logs the failure itself.
    await write(heard).catch(() => tryLater(heard, retry.firstMs));
  }) as EventualRecorder<T>;
  record.pending = () => timers.size;
  record.stop = () => {
    stopped = true;
    if (timers.size > 0) logger.warn({ messages: timers.size }, 'stopping with heard messages not yet recorded (storage was down): they are lost');
    for (const timer of timers) clearTimeout(timer);
    timers.clear();
  };
  return record;
}
