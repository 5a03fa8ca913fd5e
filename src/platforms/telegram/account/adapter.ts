import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Api } from 'telegram';
import type { Kysely } from 'kysely';
import { packWaveform5bit, telegramBarsFrom64 } from '../../../audio/telegram-waveform.js';
import { findAffinity, heldElsewhere } from '../../../store/affinity.js';
import { savePlatformMessageId } from '../../../store/receipts.js';
import type { Database } from '../../../store/schema.js';
import { clearPeerFloodRest, findPeerFloodRest, forgetPeer, savePeerFloodRest } from '../../../store/telegram-account-state.js';
import { findTelegramSession } from '../../../store/telegram-sessions.js';
import { DeliveryError, SenderRestricted, UNKNOWN_HOLD_RECHECK_MS, type DeliveryJob, type PlatformAdapter } from '../../platform.js';
import { loadTelegram, rpcErrorName, type TelegramAccountClient } from './client.js';
import type { AccountLink } from './context.js';
import { classifyTelegramError, peerFloodRest, PEER_FLOOD_REST_MS } from './errors.js';
import type { LiveTelegramAccounts } from './live.js';
import { resolvePeer, type ResolvedPeer } from './peers.js';
import { tellAccountName } from './label.js';

/** Parts of an upload (upload.saveFilePart takes up to 512 KB a part; files over 10 MB go as big files). */
const PART_BYTES = 512 * 1024;
const BIG_FILE_BYTES = 10 * 1024 * 1024;

export interface AccountAdapterTuning {
  /** Least time between two notes of one account, plus up to `sendJitterMs`. */
  sendGapMs?: number;
  sendJitterMs?: number;
  /** Telegram shows an action for about 6 s: it is sent again this often while the indicator lasts. */
  actionEveryMs?: number;
  /** The first PEER_FLOOD rest (each repeat doubles it). */
  peerFloodRestMs?: number;
}

/** The id Telegram keeps for one of our notes: per account and chat, with the message id it gave. */
export const telegramPlatformMessageId = (sessionId: string, userId: string, messageId: number): string => `tg:${sessionId}:${messageId}@${userId}`;

/** random_id of messages.sendMedia, derived from our message id: a retry is the same message to Telegram, which keeps one. */
const randomIdOf = (messageId: string): bigint => createHash('sha256').update(`voicenote:${messageId}`).digest().readBigInt64BE(0);

/**
 * Live delivery from a linked Telegram account, as Telegram's own apps send a voice note: the file
 * uploaded in parts (upload.saveFilePart), then messages.sendMedia with an uploaded document of type
 * audio/ogg whose DocumentAttributeAudio says voice, its duration and the 100-bar waveform the apps
 * draw; "recording a voice message" (messages.setTyping) before it, "sending a voice message" while it
 * uploads. Telegram's refusals are kept as it words them (errors.ts).
 */
export function createAccountAdapter(deps: { db: Kysely<Database>; accounts: LiveTelegramAccounts; tuning?: AccountAdapterTuning }): PlatformAdapter {
  const { db, accounts } = deps;
  const gapMs = deps.tuning?.sendGapMs ?? 3_000;
  const jitterMs = deps.tuning?.sendJitterMs ?? 2_000;
  const actionEveryMs = deps.tuning?.actionEveryMs ?? 5_000;
  const peerFloodFirstMs = deps.tuning?.peerFloodRestMs ?? PEER_FLOOD_REST_MS;
  // One note at a time per account, spaced: bursts are what Telegram's anti-spam rests accounts for.
  const queues = new Map<string, Promise<unknown>>();
  function paced<T>(sessionId: string, work: () => Promise<T>): Promise<T> {
    const previous = queues.get(sessionId) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(work);
    const settled = next.then(
      () => sleep(gapMs + Math.random() * jitterMs),
      () => undefined,
    );
    queues.set(sessionId, settled);
    void settled.then(() => queues.get(sessionId) === settled && queues.delete(sessionId));
    return next;
  }

  const sessionIdOf = (job: DeliveryJob): string => job.session.session_id as string;
  // Accounts Telegram froze: until when their notes are held without asking Telegram again (this process's memory).
  const frozenUntil = new Map<string, number>();
  const frozenMessage = (name: string): string =>
    `Telegram said ${name}: the account is frozen (it may send nothing until its owner appeals in the Telegram app); its notes are held and looked at again every 15 minutes`;

  async function held(job: DeliveryJob): Promise<AccountLink> {
    const id = sessionIdOf(job);
    const row = await findTelegramSession(db, { accountId: job.accountId, env: job.env }, id);
    if (!row) throw new DeliveryError('invalid_session', `the Telegram session ${id} no longer exists`, false);
    if (row.status !== 'connected') throw new DeliveryError('session_not_connected', `the Telegram session is ${row.status}, not connected`, false);
    tellAccountName(job, row);
    const restingUntil = row.resting_until !== null ? Number(row.resting_until) : 0;
    if (restingUntil > Date.now()) {
      throw new DeliveryError('platform_rate_limited', 'Telegram rests this account (PEER_FLOOD); the note waits until the rest is over', true, restingUntil - Date.now(), { waits: true });
    }
    if ((frozenUntil.get(id) ?? 0) > Date.now()) throw new SenderRestricted(frozenMessage('FROZEN_METHOD_INVALID'), null, (frozenUntil.get(id) ?? 0) - Date.now());
    frozenUntil.delete(id);
    const link = await accounts.acquire(id);
    if (link) return link;
    // Its proxy does not carry its connection: the note waits, and fails proxy_unreachable if it never does (docs/proxies.md).
    const proxyFailure = accounts.proxyFailure(id);
    if (proxyFailure) throw new DeliveryError('proxy_unreachable', proxyFailure, true);
    if (heldElsewhere(await findAffinity(db, id), accounts.holderId, Date.now())) {
      throw new DeliveryError('session_not_connected', 'the Telegram session is held by another process; will retry', true, 250 + Math.round(Math.random() * 500), { notAttempted: true });
    }
    throw new DeliveryError('session_not_connected', 'the Telegram session is not connected right now; will retry', true);
  }

  /** Runs a Telegram call; its refusal becomes what it means for the note and the account. */
  async function call<T>(job: DeliveryJob, doing: string, work: () => Promise<T>, target?: ResolvedPeer): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof DeliveryError) throw error;
      const id = sessionIdOf(job);
      if (target?.kept && rpcErrorName(error) === 'PEER_ID_INVALID') {
        // The kept user id and access hash no longer hold: the next attempt looks the recipient up again.
        await forgetPeer(db, id, job.recipient);
        throw new DeliveryError('platform_error', `Telegram refused ${doing}: PEER_ID_INVALID for the recipient kept from an earlier note; it is looked up again`, true);
      }
      const refusal = classifyTelegramError(error, doing);
      // Both rest the account (its sender shows `resting` until then: delivery/sender-gate.ts) and its notes
      // wait, with no retry window used up: the library sleeps through none of them (FLOOD_SLEEP_THRESHOLD).
      if (refusal.kind === 'flood_wait') {
        throw new DeliveryError('platform_rate_limited', `Telegram said FLOOD_WAIT_${refusal.seconds}: the account rests ${refusal.seconds} s; the note waits`, true, refusal.seconds * 1000, { waits: true });
      }
      if (refusal.kind === 'peer_flood') {
        const restMs = peerFloodRest(await findPeerFloodRest(db, id), peerFloodFirstMs);
        await savePeerFloodRest(db, id, restMs);
        await db.updateTable('telegram_sessions').set({ resting_until: Date.now() + restMs }).where('id', '=', id).execute();
        const hours = Math.round((restMs / 3_600_000) * 10) / 10;
        throw new DeliveryError('platform_rate_limited', `Telegram said PEER_FLOOD (too many messages to people who are not contacts): the account rests ${hours} h, twice as long as its last rest if it had one; the note waits`, true, restMs, { waits: true });
      }
      if (refusal.kind === 'frozen') {
        // Held here without a call to Telegram (no upload again) until the restriction is looked at again.
        frozenUntil.set(id, Date.now() + UNKNOWN_HOLD_RECHECK_MS);
        throw new SenderRestricted(frozenMessage(refusal.name), null, UNKNOWN_HOLD_RECHECK_MS);
      }
      if (refusal.kind === 'revoked') {
        await accounts.revoked(id, refusal.name);
        throw new DeliveryError('session_expired', `Telegram said ${refusal.name}: the account's authorization is gone; link it again`, false);
      }
      throw refusal.error;
    }
  }

  async function setTyping(client: TelegramAccountClient, peer: Api.InputPeerUser, action: Api.TypeSendMessageAction): Promise<void> {
    const { Api } = await loadTelegram();
    await client.invoke(new Api.messages.SetTyping({ peer, action }));
  }

  async function upload(client: TelegramAccountClient, bytes: Buffer, fileId: bigint, onPart: (part: number, parts: number) => Promise<void>) {
    const { Api } = await loadTelegram();
    const parts = Math.max(1, Math.ceil(bytes.length / PART_BYTES));
    const big = bytes.length > BIG_FILE_BYTES;
    for (let part = 0; part < parts; part++) {
      await onPart(part, parts);
      const chunk = bytes.subarray(part * PART_BYTES, (part + 1) * PART_BYTES);
      const saved = big
        ? await client.invoke(new Api.upload.SaveBigFilePart({ fileId: fileId as never, filePart: part, fileTotalParts: parts, bytes: chunk }))
        : await client.invoke(new Api.upload.SaveFilePart({ fileId: fileId as never, filePart: part, bytes: chunk }));
      if (!saved) throw new DeliveryError('platform_error', `Telegram did not keep part ${part} of the upload`, true);
    }
    const name = 'voice.ogg';
    return big ? new Api.InputFileBig({ id: fileId as never, parts, name }) : new Api.InputFile({ id: fileId as never, parts, name, md5Checksum: '' });
  }

  return {
    async showRecording(job: DeliveryJob, ms: number): Promise<void> {
      const { Api } = await loadTelegram();
      const link = await held(job);
      // Resolved once and kept (peers.ts): the send after the indicator makes no look-up of its own.
      const target = await call(job, 'the recipient lookup', () => resolvePeer(db, sessionIdOf(job), link.client, job.recipient));
      const show = () => setTyping(link.client, target.peer, new Api.SendMessageRecordAudioAction());
      await call(job, 'the recording indicator', show, target);
      // Telegram shows an action for a few seconds: repeated until the indicator's time is up (never holding the worker).
      const until = Date.now() + ms;
      const again = (): void => {
        if (Date.now() + actionEveryMs / 2 >= until) return void target.forget().catch(() => undefined);
        setTimeout(() => void show().then(again, () => undefined), actionEveryMs).unref();
      };
      again();
    },

    async deliver(job: DeliveryJob): Promise<void> {
      const { Api } = await loadTelegram();
      const link = await held(job);
      const id = sessionIdOf(job);
      const bytes = await readFile(job.audio.path);
      await paced(id, async () => {
        const target: ResolvedPeer = await call(job, 'the recipient lookup', () => resolvePeer(db, id, link.client, job.recipient));
        try {
          const randomId = randomIdOf(job.messageId);
          const file = await call(job, 'the upload', () =>
            upload(link.client, bytes, randomId, async (part, parts) => {
              job.signal.throwIfAborted();
              // "sending a voice message…" while it uploads, with its progress, as the apps show it.
              if (job.recordingIndicator || part === 0) {
                await setTyping(link.client, target.peer, new Api.SendMessageUploadAudioAction({ progress: Math.floor((part * 100) / parts) })).catch(() => undefined);
              }
            }),
          );
          const waveform = packWaveform5bit(job.audio.telegramWaveform ?? telegramBarsFrom64(job.audio.waveform));
          const media = new Api.InputMediaUploadedDocument({
            file,
            mimeType: 'audio/ogg',
            attributes: [new Api.DocumentAttributeAudio({ voice: true, duration: Math.max(1, Math.round(job.audio.durationSeconds)), waveform })],
          });
          // The send cannot be taken back once started: an attempt aborted before it never starts it.
          job.signal.throwIfAborted();
          const updates = await call(
            job,
            'the voice note',
            () =>
              link.client.invoke(new Api.messages.SendMedia({ peer: target.peer, media, message: job.caption ?? '', randomId: randomId as never })).catch((error: unknown) => {
                // Telegram keeps one message per random_id: an earlier attempt's send was taken (its answer lost).
                if (rpcErrorName(error) === 'RANDOM_ID_DUPLICATE') return undefined;
                throw error;
              }),
            target,
          );
          // The answer's updates take a pts of the account's (Telegram does not push them): the feed counts them.
          if (updates !== undefined) link.feed?.receive(updates);
          const sentId = updates !== undefined ? messageIdOf(updates, randomId) : undefined;
          if (sentId !== undefined) await savePlatformMessageId(db, job.messageId, telegramPlatformMessageId(id, target.userId, sentId));
          // A note went out: a later PEER_FLOOD is a first one again, not a repeat.
          await clearPeerFloodRest(db, id).catch(() => undefined);
        } finally {
          await target.forget().catch(() => undefined);
        }
      });
    },
  };
}

/** The id Telegram gave the message whose random_id we chose (updateMessageID in the answer). */
function messageIdOf(updates: unknown, randomId: bigint): number | undefined {
  const list = (updates as { updates?: unknown[] }).updates ?? [];
  for (const update of list) {
    const u = update as { className?: string; id?: number; randomId?: { toString(): string } };
    if (u.className === 'UpdateMessageID' && String(u.randomId) === String(randomId)) return u.id;
  }
  const short = updates as { className?: string; id?: number };
  return short.className === 'UpdateShortSentMessage' ? short.id : undefined;
}
