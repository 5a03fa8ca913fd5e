import { isAudioError } from '../audio/errors.js';
import { probeAudio } from '../audio/dry-probe.js';
import { localSampleFor } from '../audio/samples.js';
import type { PlatformDefinition, PlatformSession } from '../platforms/platform.js';
import { sandboxRecipientExists } from '../platforms/sandbox/adapter.js';
import type { Services } from '../services.js';
import { findRecipientCheck } from '../store/recipient-checks.js';
import { findSender, findSenderByRef, type SenderRow } from '../store/senders.js';
import { readSent } from '../store/usage.js';
import { usageScope, type Caller } from './caller.js';
import { quotaExceeded } from './quota.js';
import { isFresh, keptAnswer } from './kept-recipient-checks.js';
import type { Static } from '@sinclair/typebox';
import type { DryRunResult, SendBody } from './schemas.js';
import { iso } from './views.js';
import { sendWindowWait } from './send-window.js';
import { suppressedError } from './suppression-check.js';

/**
 * `"dry_run": true` on POST /send (docs/sending.md, "Dry runs"): the body is validated as for a real send
 * (a bad one gets the same 4xx), then each check below runs and says what the real send would meet.
 * Nothing is stored, nothing is counted against the quota (the request still spends the rate limit),
 * and only a log line is written.
 *
 * A check is one entry of DRY_RUN_CHECKS: a new rule of the send path (a suppression list, send
 * windows) adds its own entry, with its id, and nothing else changes.
 */

/** pass: no objection; wait: the note would be accepted but wait (a daily cap, a resting sender); fail: it would not go; skip: not checked. */
export type CheckResult = 'pass' | 'wait' | 'fail' | 'skip';

export interface CheckOutcome {
  result: CheckResult;
  /** In words: what was found, or why it was skipped. */
  detail?: string;
  /** On fail: the error the real send would answer or the note would fail with (its code and message). */
  error?: { code: string; message: string };
  /** What the check measured (the audio's size and length, the quota left, today's count). */
  facts?: Record<string, unknown>;
}

export interface DryRunContext {
  services: Services;
  caller: Caller;
  platform: PlatformDefinition;
  session: PlatformSession;
  body: SendBody;
  /** The sender's record when the account has sent from it before (its id, status, today's count). */
  sender: SenderRow | undefined;
  senderKey: string | null;
  now: number;
  /** When the note was asked to go (send_at), or null for at once. */
  sendAt: number | null;
}

export interface DryRunCheck {
  /** Named in the answer and in docs/sending.md ("Dry runs"). */
  id: string;
  run(context: DryRunContext): Promise<CheckOutcome>;
}

const pass = (detail?: string, facts?: Record<string, unknown>): CheckOutcome => ({ result: 'pass', ...(detail ? { detail } : {}), ...(facts ? { facts } : {}) });

/** Everything the route checks before it would store the note (fields, platform rules, a connected session): it got this far. */
const validation: DryRunCheck = {
  id: 'validation',
  run: async () => pass('the body is valid for this platform'),
};

/** The sender's health, as the worker reads it before a platform call (delivery/sender-gate.ts). */
const sender: DryRunCheck = {
  id: 'sender',
  run: async ({ sender: record, now }) => {
    if (!record) return pass('a sender this account has not sent from yet', { sender_id: null, status: null });
    const facts = { sender_id: record.id, status: record.status };
    const until = record.until == null ? null : Number(record.until);
    switch (record.status) {
      case 'expired':
        return {
          result: 'fail',
          detail: 'the sender has expired: its notes fail without trying the platform',
          error: { code: record.failure_code ?? 'session_expired', message: record.reason ?? 'the sender has expired' },
          facts,
        };
      case 'resting':
      case 'restricted':
        if (until !== null && until <= now) return pass(`the sender's ${record.status} period has ended`, facts);
        return { result: 'wait', detail: `the sender is ${record.status}${until !== null ? ` until ${iso(until)}` : ''}: the note would wait`, facts };
      default:
        return pass(`the sender is ${record.status}`, facts);
    }
  },
};

/** The monthly quota, read as the accept would count it (nothing is counted). */
const quota: DryRunCheck = {
  id: 'quota',
  run: async ({ services, caller, now }) => {
    const scope = usageScope(caller, now);
    const sent = await readSent(services.db.kysely, scope);
    const remaining = Math.max(0, caller.limits.monthlyQuota - sent);
    const facts = { monthly_quota: caller.limits.monthlyQuota, remaining };
    if (remaining > 0) return pass(`${remaining} of ${caller.limits.monthlyQuota} notes left this period`, facts);
    const error = quotaExceeded(caller.limits.monthlyQuota, scope.periodEnd);
    return { result: 'fail', error: { code: error.code, message: error.message }, facts };
  },
};

/** The sender's daily cap and warm-up (live senders): over it, the note would wait for the next UTC day. */
const dailyRhythm: DryRunCheck = {
  id: 'daily_rhythm',
  run: async ({ services, caller, sender: record }) => {
    if (caller.env === 'test') return { result: 'skip', detail: 'sandbox senders have no daily cap' };
    if (!record) return pass('a new sender: its first day allows at least one note');
    const view = await findSender(services.db.kysely, { accountId: caller.accountId, env: caller.env }, record.id, services.rhythmDefaults);
    if (!view || view.daily_cap === null) return pass('no daily cap applies', { sent_today: view?.sent_today ?? 0, daily_cap: null });
    const facts = { sent_today: view.sent_today, daily_cap: view.daily_cap };
    if (view.sent_today < view.daily_cap) return pass(`${view.sent_today} of ${view.daily_cap} sent today (UTC)`, facts);
    return { result: 'wait', detail: `today's cap of ${view.daily_cap} is reached: the note would wait for the next UTC day`, facts };
  },
};

/** Whether the recipient exists, only where that costs no platform call: the sandbox's rule, or an answer kept from an earlier check. */
const recipient: DryRunCheck = {
  id: 'recipient',
  run: async ({ services, caller, body, senderKey, now }) => {
    const notFound = (message: string): CheckOutcome => ({ result: 'fail', error: { code: 'recipient_not_found', message } });
    if (caller.env === 'test') {
      return sandboxRecipientExists(body.recipient) ? pass('the sandbox recipient exists') : notFound('sandbox: recipients ending in 7 do not exist');
    }
    const kept = senderKey === null ? undefined : await findRecipientCheck(services.db.kysely, senderKey, body.recipient);
    if (!kept || !isFresh(kept, now)) return { result: 'skip', detail: 'no kept answer: the platform is not asked in a dry run (POST /recipients/check asks it)' };
    const answer = keptAnswer(body.recipient, kept);
    return answer.exists ? pass('found when the platform was last asked') : notFound(answer.reason ?? `${body.recipient} was not found`);
  },
};

/** The audio fetched and probed as the worker would: the same errors for a broken URL, a file too large or too long. */
const audio: DryRunCheck = {
  id: 'audio',
  run: async ({ services, caller, platform, body }) => {
    try {
      const probed = await probeAudio({
        url: body.audio_url,
        target: platform.audio,
        dataDir: services.config.dataDir,
        allowPrivate: services.config.audioAllowPrivateUrls,
        durationHint: body.duration ?? null,
        localSource: caller.env === 'live' ? null : localSampleFor(body.audio_url),
      });
      return pass(`${probed.container}${probed.codec ? ` (${probed.codec})` : ''}, ${probed.size_bytes} bytes`, { ...probed });
    } catch (error) {
      if (!isAudioError(error)) throw error;
      return { result: 'fail', error: { code: error.code, message: error.message } };
    }
  },
};

/** In the order the answer lists them. */
/** The account's suppression list: a listed recipient is refused as the real send would refuse it. */
const suppression: DryRunCheck = {
  id: 'suppression',
  run: async ({ services, caller, platform, body }) => {
    const error = await suppressedError(services, { accountId: caller.accountId, env: caller.env }, platform.name, body.recipient);
    if (!error) return pass('the recipient is not on the suppression list');
    return { result: 'fail', error: { code: error.code, message: error.message }, facts: error.details as Record<string, unknown> };
  },
};

/** The account's send window on this platform (and the recipient's zone): outside it, the note would wait for the opening. */
const sendWindow: DryRunCheck = {
  id: 'send_window',
  run: async ({ services, caller, platform, body, sendAt, now }) => {
    const recipientTimeZone = body.recipient_time_zone ?? null;
    const opening = await sendWindowWait(services, { accountId: caller.accountId, platform: platform.name, recipientTimeZone, notBefore: sendAt ?? now, now });
    if (opening === undefined) return pass('no send window holds the note');
    return { result: 'wait', detail: `outside the ${platform.name} send window: the note would wait until ${iso(opening)}`, facts: { next_attempt_at: iso(opening) } };
  },
};

export const DRY_RUN_CHECKS: readonly DryRunCheck[] = [validation, sender, quota, dailyRhythm, suppression, sendWindow, recipient, audio];

export type DryRunAnswer = Static<typeof DryRunResult>;

/** Runs every check (one failing does not hide the others) and says what the real send would be. */
export async function dryRun(
  context: Omit<DryRunContext, 'sender' | 'senderKey' | 'sendAt'>,
  sendAt: number | null,
  checks: readonly DryRunCheck[] = DRY_RUN_CHECKS,
): Promise<DryRunAnswer> {
  const { services, caller, platform, session, body } = context;
  const senderKey = platform.senderKey?.(session) ?? null;
  const record = senderKey === null ? undefined : await findSenderByRef(services.db.kysely, { accountId: caller.accountId, env: caller.env, platform: platform.name, senderKey });
  const full: DryRunContext = { ...context, sender: record, senderKey, sendAt };
  const results = await Promise.all(checks.map(async (check) => ({ id: check.id, ...(await check.run(full)) })));
  return {
    dry_run: true,
    would_send: results.every((r) => r.result !== 'fail'),
    message: {
      platform: platform.name,
      recipient: body.recipient,
      audio_url: body.audio_url,
      sender_id: record?.id ?? null,
      env: caller.env,
      duration: body.duration ?? null,
      caption: body.caption ?? null,
      send_at: sendAt === null ? null : iso(sendAt),
      cancel_on_reply: body.cancel_on_reply === true,
      recording_indicator: body.recording_indicator === true,
      recipient_time_zone: body.recipient_time_zone ?? null,
    },
    checks: results,
  };
}
