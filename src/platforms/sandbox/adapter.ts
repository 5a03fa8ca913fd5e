import { setTimeout as sleep } from 'node:timers/promises';
import { DeliveryError, type DeliveryJob, type PlatformAdapter } from '../platform.js';

/**
 * The sandbox (`sk_test_` keys): everything before the platform call is real; the call itself is
 * simulated, with outcomes chosen by recipient (docs/sandbox.md, "The sandbox").
 */
export const SANDBOX_RECIPIENTS = {
  sessionExpired: '10000000001',
  recipientNotFound: '10000000002',
  platformError: '10000000003',
  twoTransientErrors: '10000000004',
} as const;

/** Sandbox recipients ending in 7 do not exist on any platform (POST /recipients/check says so; a send fails recipient_not_found). */
export const sandboxRecipientExists = (recipient: string): boolean => !recipient.endsWith('7');

// "failed after retries": this many attempts fail transiently before the last one fails for good,
// so the outcome arrives in seconds instead of after the full hour of backoff.
const SANDBOX_FAILING_ATTEMPTS = 3;

export interface SandboxOptions {
  latencyMs: number;
  /** A platform's own checks before the simulated call (a linked session must still be connected, say). */
  checkFor(platform: string): ((job: DeliveryJob) => Promise<void>) | undefined;
}

export function createSandboxAdapter(options: SandboxOptions): PlatformAdapter {
  return {
    /**
     * Nothing reaches a recipient, but the rest is as live: the worker writes on the message when the
     * indicator showed and for how long, and the note waits in the queue for that time before it goes.
     */
    async showRecording(): Promise<void> {},

    async deliver(job: DeliveryJob): Promise<void> {
      if (options.latencyMs > 0) await sleep(options.latencyMs, undefined, { signal: job.signal });
      job.signal.throwIfAborted();
      await options.checkFor(job.platform)?.(job);
      if (!sandboxRecipientExists(job.recipient)) throw new DeliveryError('recipient_not_found', 'sandbox: the recipient does not exist on the platform (recipients ending in 7)', false);
      switch (job.recipient) {
        case SANDBOX_RECIPIENTS.sessionExpired:
          throw new DeliveryError('session_expired', 'sandbox: the platform session has expired; re-authenticate and send a new session', false);
        case SANDBOX_RECIPIENTS.recipientNotFound:
          throw new DeliveryError('recipient_not_found', 'sandbox: the recipient does not exist on the platform', false);
        case SANDBOX_RECIPIENTS.platformError:
          throw new DeliveryError(
            'platform_error',
            `sandbox: the platform answered with a server error (attempt ${job.attempt})`,
            job.attempt < SANDBOX_FAILING_ATTEMPTS,
          );
        case SANDBOX_RECIPIENTS.twoTransientErrors:
          if (job.attempt <= 2) throw new DeliveryError('platform_error', `sandbox: transient platform error (attempt ${job.attempt})`, true);
          return;
        default:
          return;
      }
    },
  };
}

/** Stands in for a live platform whose adapter this build does not have, so a live send fails honestly. */
export function createUnavailableAdapter(platform: string): PlatformAdapter {
  return {
    async deliver(): Promise<void> {
      throw new DeliveryError('platform_error', `live delivery to ${platform} is not available in this build`, false);
    },
  };
}
