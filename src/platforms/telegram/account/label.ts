import { telegramAccountLabel } from '../../../core/telegram-session-views.js';
import type { DeliveryJob } from '../../platform.js';

/** The linked account's @username (else its +phone) as its sender's label on the senders page, as a bot's @username is (bot-name.ts). */
export function tellAccountName(job: DeliveryJob, row: { username: string | null; phone_number: string | null }): void {
  const label = telegramAccountLabel(row);
  if (label !== null) job.onSenderLabel?.(label);
}
