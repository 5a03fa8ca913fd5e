import type { MessageRow } from '../store/messages.js';
import type { OnHeard } from './recorder.js';

/** Sandbox recipients ending in 6 answer every delivered voice note this long after its delivery, with this text. */
export const SANDBOX_REPLY_AFTER_MS = 4_000;
export const SANDBOX_REPLY_TEXT = 'Thanks, got it!';

export const sandboxReplies = (message: Pick<MessageRow, 'env' | 'recipient' | 'sender_key'>): boolean =>
  message.env === 'test' && message.recipient.endsWith('6') && typeof message.sender_key === 'string';

/**
 * The sandbox's recipients that answer: a reply is "heard" a few seconds after each note delivered to
 * one, and goes through the same recorder as a platform's (so voice_note.replied, the message log and
 * cancel_on_reply can be tried without a phone). Kept in this process's memory: a reply still waiting
 * when the process stops is not heard.
 */
export class SandboxReplier {
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly onHeard: OnHeard,
    private readonly afterMs = SANDBOX_REPLY_AFTER_MS,
  ) {}

  /** A note was delivered: its recipient answers later when it is one that does. */
  delivered(message: MessageRow): void {
    if (!sandboxReplies(message)) return;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      void this.onHeard({
        kind: 'reply',
        platform: message.platform,
        senderKey: message.sender_key!,
        from: message.recipient,
        accountId: message.account_id,
        env: message.env,
        reply: { platformId: `sandbox-${message.id}`, type: 'text', text: SANDBOX_REPLY_TEXT, at: Date.now() },
      });
    }, this.afterMs);
    timer.unref();
    this.#timers.add(timer);
  }

  stop(): void {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }
}
