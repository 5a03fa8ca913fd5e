import { newSenderId } from '../core/ids.js';
import type { SenderRecordsTable } from './schema.js';

/** A sender as a note names it: its owner, its platform and the platform's key for it. */
export interface SenderRef {
  accountId: string;
  env: string;
  platform: string;
  senderKey: string;
}

/**
 * The record of a sender nothing is known of yet: `ok`, never sent. A record is made by whichever comes
 * first — a note's outcome, a status the platform reported, a new-chat cap read, a recipient check, a
 * proxy set — each adding its own columns to these.
 */
export function newSenderRecord(ref: SenderRef, kind: string, now: number): SenderRecordsTable {
  return {
    id: newSenderId(now),
    account_id: ref.accountId,
    env: ref.env,
    platform: ref.platform,
    sender_key: ref.senderKey,
    kind,
    label: null,
    status: 'ok',
    reason: null,
    until: null,
    failure_code: null,
    last_sent_at: null,
    sent_day: null,
    sent_today: 0,
    created_at: now,
    updated_at: now,
  };
}
