import type { MessageRow } from '../store/messages.js';
import type { HeardReply } from './heard.js';
import type { OnHeard } from './recorder.js';

/** Sandbox recipients ending in 6 or 5 answer every delivered voice note this long after its delivery. */
export const SANDBOX_REPLY_AFTER_MS = 4_000;
/** What a recipient ending in 6 answers. */
export const SANDBOX_REPLY_TEXT = 'Thanks, got it!';
/** What a recipient ending in 5 answers: an opt-out (the suppression list, recipient.opted_out). */
export const SANDBOX_OPT_OUT_TEXT = 'STOP';
/** How often answers that have come due are handed on (their time is the replier's clock). */
const SWEEP_MS = 100;

/** The text a sandbox recipient answers a delivered note with; undefined for one that does not answer. */
export function sandboxAnswer(message: Pick<MessageRow, 'env' | 'recipient' | 'sender_key'>): string | undefined {
  if (message.env !== 'test' || typeof message.sender_key !== 'string') return undefined;
  if (message.recipient.endsWith('6')) return SANDBOX_REPLY_TEXT;
  if (message.recipient.endsWith('5')) return SANDBOX_OPT_OUT_TEXT;
  return undefined;
}

export const sandboxReplies = (message: Pick<MessageRow, 'env' | 'recipient' | 'sender_key'>): boolean => sandboxAnswer(message) !== undefined;

/**
 * The sandbox's recipients that answer: a reply is "heard" a few seconds after each note delivered to
 * one, and goes through the same recorder as a platform's (so voice_note.replied, the message log,
 * cancel_on_reply and opt-outs can be tried without a phone). The seconds are on the replier's clock
 * (tests give theirs): answers due by it are handed on at the next sweep. Kept in this process's memory:
 * a reply still waiting when the process stops is not heard.
 */
export class SandboxReplier {
  #pending: Array<{ dueAt: number; heard: HeardReply }> = [];
  #sweep: NodeJS.Timeout | undefined;

  constructor(
    private readonly onHeard: OnHeard,
    private readonly options: { afterMs?: number; now?: () => number } = {},
  ) {}

  /** A note was delivered: its recipient answers later when it is one that does. */
  delivered(message: MessageRow): void {
    const text = sandboxAnswer(message);
    if (text === undefined) return;
    const heard: HeardReply = {
      kind: 'reply',
      platform: message.platform,
      senderKey: message.sender_key!,
      from: message.recipient,
      accountId: message.account_id,
      env: message.env,
      reply: { platformId: `sandbox-${message.id}`, type: 'text', text, at: 0 },
    };
    this.#pending.push({ dueAt: this.#now() + (this.options.afterMs ?? SANDBOX_REPLY_AFTER_MS), heard });
    if (!this.#sweep) {
      this.#sweep = setInterval(() => this.#handOnDue(), SWEEP_MS);
      this.#sweep.unref();
    }
  }

  #now(): number {
    return this.options.now?.() ?? Date.now();
  }

  #handOnDue(): void {
    const now = this.#now();
    const due = this.#pending.filter((p) => p.dueAt <= now);
    if (due.length === 0) return;
    this.#pending = this.#pending.filter((p) => p.dueAt > now);
    if (this.#pending.length === 0) this.stopSweeping();
    for (const { heard } of due) void this.onHeard({ ...heard, reply: { ...heard.reply, at: now } });
  }

  private stopSweeping(): void {
    clearInterval(this.#sweep);
    this.#sweep = undefined;
  }

  stop(): void {
    this.stopSweeping();
    this.#pending = [];
  }
}
