import type { Services } from '../services.js';
import { findSuppression } from '../store/suppressions.js';
import { ApiError } from './errors.js';

/** The 422 recipient_suppressed a send to this recipient gets, when they are on the account's list for this platform (or for every platform). */
export async function suppressedError(services: Services, owner: { accountId: string; env: string }, platform: string, recipient: string): Promise<ApiError | undefined> {
  const entry = await findSuppression(services.db.kysely, owner, platform, recipient);
  if (!entry) return undefined;
  return new ApiError(
    'recipient_suppressed',
    `${recipient} is on this account's suppression list${entry.source === 'reply' ? ' (they opted out by reply)' : ''}: nothing is sent to them; DELETE /api/v1/suppressions/${entry.id} takes them off`,
    { field: 'recipient', suppression_id: entry.id, platform: entry.platform, source: entry.source },
  );
}

/** Someone on the account's suppression list is never written to (docs/sending.md, "Opt-outs and suppressions"). */
export async function refuseSuppressed(services: Services, owner: { accountId: string; env: string }, platform: string, recipient: string): Promise<void> {
  const error = await suppressedError(services, owner, platform, recipient);
  if (error) throw error;
}
