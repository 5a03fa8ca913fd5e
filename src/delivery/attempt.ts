import type { Logger } from 'pino';
import { localSampleFor } from '../audio/samples.js';
import type { SecretBox } from '../core/secret-box.js';
import { extendLease } from '../store/messages.js';
import { cancelClaimedSuppressed, findSuppression } from '../store/suppressions.js';
import type { MessageRow } from '../store/messages.js';
import { senderProxyUrl, UnreadableProxy } from '../platforms/proxy/sender-proxy-url.js';
import { proxyFailureOf } from '../platforms/proxy/tunnel.js';
import { DeliveryError, SenderRestricted, type FailureCode, type PlatformSession } from '../platforms/platform.js';
import { AUDIO_CODES, outcomeOf, type Outcome } from './outcome.js';
import { Deferral, type ClaimedRhythms } from './rhythm-gate.js';
import { checkSender, senderChangeOf, senderOf, type ClaimedSenders } from './sender-gate.js';
import type { StorageWatch } from './storage-watch.js';
import { checkSendWindow, readSendWindows, type ClaimedWindows } from './window-gate.js';
import type { AttemptRecord, RecordWrite, WorkerOptions } from './worker-options.js';

/**
 * One attempt at one claimed message: its audio prepared, its lease confirmed before the platform call
 * (which cannot be taken back) and renewed while it runs, the platform's answer turned into an outcome.
 */

export type ResolvedWorkerOptions = Required<Pick<WorkerOptions, 'concurrency' | 'leaseMs' | 'pollMs' | 'clock' | 'accountSharePercent'>> & WorkerOptions;

export interface AttemptDeps {
  options: ResolvedWorkerOptions;
  workerId: string;
  storage: StorageWatch;
}

/** Why an attempt was stopped from outside. */
export class LeaseLost extends Error {
  constructor() {
    super('the lease on this message is gone (another worker holds it, or it was settled)');
    this.name = 'LeaseLost';
  }
}
/** The note's recipient is on its account's suppression list: it is canceled, not attempted. */
export class RecipientSuppressed extends Error {
  constructor() {
    super("the recipient is on the account's suppression list");
    this.name = 'RecipientSuppressed';
  }
}
export class ShuttingDown extends Error {
  constructor() {
    super('the worker is shutting down');
    this.name = 'ShuttingDown';
  }
}

export interface Job {
  message: MessageRow;
  controller: AbortController;
  /** The database's clock at the claim, and this process's clock then: together, the database's time now. */
  dbClaimedAt: number;
  claimedAt: number;
  /** Database time until which the lease is known to hold. */
  leaseUntil: number;
  /** The platform may have been reached: an outcome is no longer "not attempted". */
  reachedPlatform: boolean;
  /** The rhythms of the claim this message came in, read ahead (rhythm-gate.ts). */
  rhythms?: ClaimedRhythms | undefined;
  /** The senders not `ok` among the claim's messages, read ahead (sender-gate.ts). */
  senders?: ClaimedSenders | undefined;
  /** The send windows of the claim's accounts, read ahead (window-gate.ts). */
  windows?: ClaimedWindows | undefined;
  /** What the platform named the sender by in this attempt's answer (a bot's @username), kept on its record. */
  senderLabel?: string;
  /** Told once the audio is ready or has failed (a conversion slot, if it held one, is free). */
  audioSettled?: () => void;
  /** Told once the audio's source is downloaded: what is left of its preparing is the conversion. */
  audioFetched?: () => void;
}

/** The database's time now, from the claim's and this process's elapsed time. */
export function dbNow(job: Job, clock: () => number): number {
  return job.dbClaimedAt + (clock() - job.claimedAt);
}

/** Any error from a step of delivery, as a DeliveryError (unknown errors are transient: a bug must not lose a message). */
export function asDeliveryError(error: unknown): DeliveryError {
  if (error instanceof DeliveryError) return error;
  if (error instanceof Error) {
    const coded = error as Error & { code?: unknown; transient?: unknown };
    if (typeof coded.code === 'string' && AUDIO_CODES.has(coded.code as FailureCode)) {
      return new DeliveryError(coded.code as FailureCode, error.message, coded.transient === true);
    }
    return new DeliveryError('platform_error', `internal error during delivery: ${error.message}`, true);
  }
  return new DeliveryError('platform_error', 'internal error during delivery', true);
}

/** A message's sealed `session`; one sealed under another SECRET_KEY can never be opened, so that is final. */
function openCredentials(secretBox: SecretBox, sealed: string): PlatformSession {
  try {
    return secretBox.openJson<PlatformSession>(sealed);
  } catch {
    throw new DeliveryError('invalid_session', 'the stored credentials cannot be decrypted (was SECRET_KEY changed since the message was accepted?)', false);
  }
}

/** Runs the attempt while renewing its lease; undefined when the lease was lost (nothing to write). */
export async function attemptWithLease(deps: AttemptDeps, job: Job, log: Logger): Promise<Outcome | undefined> {
  const { db, leaseMs, clock } = deps.options;
  const { message, controller } = job;
  // A long upload must not look like a dead worker: renew the lease while the job runs. A renewal that
  // matches no row means another worker holds the message now: stop at once.
  const renew = setInterval(() => {
    const before = clock();
    extendLease(db.kysely, message.id, deps.workerId, leaseMs).then(
      (held) => {
        if (held) job.leaseUntil = job.dbClaimedAt + (before - job.claimedAt) + leaseMs;
        else controller.abort(new LeaseLost());
      },
      (err: unknown) => {
        log.warn({ err }, 'could not renew lease');
        // Storage is away: once the lease may have run out, another worker may take the message when
        // storage returns; an attempt that has not reached the platform yet must not start now.
        if (dbNow(job, deps.options.clock) >= job.leaseUntil && !job.reachedPlatform) controller.abort(new LeaseLost());
      },
    );
  }, Math.max(leaseMs / 3, 10));
  const startedAt = Date.now();
  try {
    await attempt(deps, job);
    const record = recordOf(deps, job, { startedAt, endedAt: Date.now(), error: null, retryAt: null });
    return {
      kind: 'settle',
      settlement: { status: 'delivered', at: dbNow(job, deps.options.clock) },
      record,
      sender: reconnected(job),
      ...(job.senderLabel !== undefined ? { senderLabel: job.senderLabel } : {}),
    };
  } catch (thrown) {
    const reason: unknown = controller.signal.aborted ? controller.signal.reason : undefined;
    if (reason instanceof LeaseLost || thrown instanceof LeaseLost) {
      log.warn('lease lost; the attempt was stopped and the message is left to its new holder');
      return undefined;
    }
    if (thrown instanceof RecipientSuppressed) {
      // Canceled in one transaction with its event and its quota back, while this worker still holds it.
      const canceled = await cancelClaimedSuppressed(db.kysely, message.id, deps.workerId);
      log.info({ canceled: canceled !== undefined }, 'not sent: the recipient is on the suppression list');
      return undefined;
    }
    if (reason instanceof ShuttingDown) {
      log.info({ reached_platform: job.reachedPlatform }, 'attempt stopped by shutdown; handing the message back');
      return {
        kind: 'retry',
        delayMs: 0,
        errorCode: 'platform_error',
        errorMessage: 'the attempt was interrupted by a shutdown',
        notAttempted: !job.reachedPlatform,
        reachedPlatform: job.reachedPlatform,
      };
    }
    const refused = asDeliveryError(thrown);
    const now = dbNow(job, deps.options.clock);
    // A sender restricted by the platform (WhatsApp's reachout lock): the note waits for it, never failing for it.
    const error = refused instanceof SenderRestricted ? new Deferral('sender_restricted', refused.message, refused.retryAfterMs ?? 0) : refused;
    const outcome: Outcome = { ...outcomeOf(message, error, now, log), sender: senderChangeOf(message, refused, job.reachedPlatform, now) };
    const endedAt = Date.now();
    // A wait (a sender's cap, the indicator) is not an attempt: the message shows what it waits for instead.
    // (A note refused by a restriction did reach the platform: that is kept, as for a retry.)
    if (error instanceof Deferral) return error === refused ? outcome : { ...outcome, ...(outcome.kind === 'retry' ? { reachedPlatform: job.reachedPlatform } : {}) };
    const record = recordOf(deps, job, { startedAt, endedAt, error, retryAt: outcome.kind === 'retry' ? endedAt + outcome.delayMs : null });
    return { ...outcome, ...(outcome.kind === 'retry' ? { reachedPlatform: job.reachedPlatform } : {}), record };
  } finally {
    clearInterval(renew);
  }
}

/** A note delivered by a sender last known as not connected: it is connected again. */
function reconnected(job: Job) {
  const sender = senderOf(job.message);
  if (!sender || job.message.env !== 'live') return undefined;
  for (const hold of job.senders?.values() ?? []) {
    if (hold.status === 'disconnected' && hold.sender_key === sender.senderKey && hold.account_id === sender.accountId && hold.platform === sender.platform && hold.env === sender.env) {
      return { status: 'ok' as const, reason: null, until: null };
    }
  }
  return undefined;
}

/** Tells the message log; the write of its record (its failures are its own: delivery goes on). */
function recordOf(deps: AttemptDeps, job: Job, attempt: AttemptRecord): RecordWrite | undefined {
  try {
    return deps.options.recorder?.attemptEnded(job.message, attempt);
  } catch (err) {
    deps.options.logger.warn({ err }, 'could not record the attempt');
    return undefined;
  }
}

/**
 * The proxy a live note's connections go through (docs/proxies.md): its sender's own, read now so that a
 * change applies from the next attempt, else OUTBOUND_PROXY, else none. The sandbox connects to nothing.
 */
async function proxyOf(deps: AttemptDeps, message: MessageRow): Promise<string | null> {
  const ref = senderOf(message);
  if (message.env !== 'live' || !ref) return message.env === 'live' ? (deps.options.outboundProxy ?? null) : null;
  try {
    return await senderProxyUrl(
      { db: deps.options.db.kysely, secretBox: deps.options.secretBox, outboundProxy: deps.options.outboundProxy, allowPrivate: deps.options.allowPrivateProxies ?? false },
      ref,
    );
  } catch (error) {
    if (error instanceof UnreadableProxy) throw new DeliveryError('proxy_unreachable', error.message, false);
    // Its address now falls under the private-address rule: the note waits as for a proxy that does not answer.
    const failure = proxyFailureOf(error);
    if (failure) throw new DeliveryError('proxy_unreachable', failure.message, true);
    throw error;
  }
}

async function attempt(deps: AttemptDeps, job: Job): Promise<void> {
  const { secretBox, audio, adapterFor, db, leaseMs } = deps.options;
  const { message, controller } = job;
  const signal = controller.signal;
  const target = deps.options.audioTargetFor(message.platform);
  if (!target) throw new DeliveryError('platform_error', `unknown platform ${message.platform}`, false);
  if (message.credentials === null) throw new DeliveryError('invalid_session', 'the session credentials are gone', false);
  const session = openCredentials(secretBox, message.credentials);
  // The sender's status first: an expired one's notes fail, a resting one's wait, without fetching the audio.
  await checkSender({ db: db.kysely, logger: deps.options.logger }, message, job.senders, dbNow(job, deps.options.clock));
  // Outside its send window the note waits for the opening, before its audio is fetched.
  checkSendWindow(message, job.windows ?? (await readSendWindows(db.kysely, [message])), (deps.options.windowClock ?? Date.now)());
  // A sandbox send of the service's own sample on a private address reads the shipped copy.
  const sample = message.env === 'live' ? null : localSampleFor(message.audio_url);
  const voice = await audio
    .prepare({
      url: message.audio_url,
      target,
      ...(sample !== null ? { localSource: sample } : {}),
      ...(message.duration !== null ? { durationHint: Number(message.duration) } : {}),
      signal,
      onFetched: () => job.audioFetched?.(),
    })
    .finally(() => job.audioSettled?.());
  try {
    await deps.options.recorder?.audioPrepared(message, voice).catch((err: unknown) => deps.options.logger.warn({ err }, 'could not record the audio'));
    // The lease is a promise: it must hold when the platform call, which cannot be taken back, starts.
    // Only its running out lets another worker take the message (nothing else writes over a lease),
    // and the worker knows on the database's clock until when it holds: while more than half of it is
    // left, confirming it would cost a write per message for nothing. Otherwise (a slow download or
    // conversion, or storage known to be away) it is renewed here, and a lost one stops the attempt.
    signal.throwIfAborted();
    if (deps.storage.down || job.leaseUntil - dbNow(job, deps.options.clock) < leaseMs / 2) {
      const before = deps.options.clock();
      let held: boolean;
      try {
        held = await extendLease(db.kysely, message.id, deps.workerId, leaseMs);
      } catch {
        throw new DeliveryError('platform_error', 'storage did not answer before the platform call; not attempted', true, undefined, { notAttempted: true });
      }
      if (!held) throw new LeaseLost();
      job.leaseUntil = job.dbClaimedAt + (before - job.claimedAt) + leaseMs;
      signal.throwIfAborted();
    }
    // The recipient may have been listed (an opt-out, the API) since the note was claimed: never sent then.
    if (await findSuppression(db.kysely, { accountId: message.account_id, env: message.env }, message.platform, message.recipient)) throw new RecipientSuppressed();
    signal.throwIfAborted();
    const proxy = await proxyOf(deps, message).catch((error: unknown) => {
      // A proxy refused by the private-address rule is its sender's, as one that does not answer: the sender says so.
      if (error instanceof DeliveryError && error.code === 'proxy_unreachable' && error.transient) job.reachedPlatform = true;
      throw error;
    });
    job.reachedPlatform = true;
    const adapter = adapterFor(message.env === 'live' ? 'live' : 'test', message.platform);
    const deliveryJob = {
      messageId: message.id,
      accountId: message.account_id,
      env: message.env === 'live' ? ('live' as const) : ('test' as const),
      platform: message.platform,
      recipient: message.recipient,
      session,
      caption: message.caption,
      audio: voice,
      attempt: message.attempts,
      signal,
      proxy,
      onSenderLabel: (label: string) => {
        job.senderLabel = label;
      },
    };
    if (deps.options.gate) await deps.options.gate.deliver({ message, workerId: deps.workerId, job: deliveryJob, adapter, ...(job.rhythms ? { rhythms: job.rhythms } : {}) });
    else await adapter.deliver(deliveryJob);
  } finally {
    voice.release();
  }
}
