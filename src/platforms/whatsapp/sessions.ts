import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { newWhatsappSessionId } from '../../core/ids.js';
import type { Database } from '../../store/schema.js';
import {
  deleteWhatsappSession,
  findWhatsappSession,
  insertWhatsappSession,
  listWhatsappSessions,
  transitionWhatsappSession,
  type Owner,
  type WhatsappSessionRow,
  type WhatsappSessionStatus,
} from '../../store/whatsapp-sessions.js';
import { WhatsappUnavailableError, type LiveWhatsapp } from './live.js';
import { endLiveSession } from '../../store/whatsapp-live.js';
import { findAffinity } from '../../store/affinity.js';
import { setSenderProxy, type KeptProxy } from '../../store/sender-proxy.js';

/** How long a QR code can be scanned (the reference promises about 45 seconds). */
export const QR_VALIDITY_MS = 45_000;
/** The phone number every sandbox session links to. */
export const SANDBOX_PHONE_NUMBER = '15550000000';

export type SimulatedEvent = 'scan' | 'expire' | 'disconnect';
export const SIMULATED_EVENTS: readonly SimulatedEvent[] = ['scan', 'expire', 'disconnect'];

/** A move the session's current status does not allow. */
export class SessionStateError extends Error {
  constructor(
    message: string,
    readonly status: WhatsappSessionStatus,
  ) {
    super(message);
    this.name = 'SessionStateError';
  }
}

/** Live linking is not possible right now (no socket, or no QR in time). */
export { WhatsappUnavailableError };

/** A new session, linked either by scanning `qrCode` or by typing `pairingCode` on the phone. */
export type CreatedSession =
  | { row: WhatsappSessionRow; /** PNG image of the QR code, as a data URI. */ qrCode: string; pairingCode?: undefined }
  | { row: WhatsappSessionRow; /** What the phone asks for under Linked devices → Link with phone number instead. */ pairingCode: string; qrCode?: undefined };

/** How to link: by QR code (default), or by a pairing code for this phone number (digits with country code). */
export interface LinkRequest {
  phoneNumber?: string;
  /** The session's own proxy, checked and sealed by the caller (docs/proxies.md): kept before its first connection. */
  proxy?: KeptProxy;
}

// The alphabet of WhatsApp pairing codes (Crockford base 32 without 0, O, I, U).
const PAIRING_ALPHABET = '123456789ABCDEFGHJKLMNPQRSTVWXYZ';

/** The sandbox's pairing code for a phone number: the same number always gets the same code. */
export function sandboxPairingCode(phoneNumber: string): string {
  const digest = createHash('sha256').update(`voicenote-sandbox-pairing:${phoneNumber}`).digest();
  return Array.from(digest.subarray(0, 8), (byte) => PAIRING_ALPHABET[byte % 32]).join('');
}

export interface WhatsappSessions {
  create(owner: Owner, link?: LinkRequest): Promise<CreatedSession>;
  get(owner: Owner, id: string): Promise<WhatsappSessionRow | undefined>;
  list(owner: Owner): Promise<WhatsappSessionRow[]>;
  remove(owner: Owner, id: string): Promise<boolean>;
  /** Sandbox only: play what a phone would do. Undefined when the session does not exist. */
  simulate(owner: Owner, id: string, event: SimulatedEvent): Promise<WhatsappSessionRow | undefined>;
}

// The shape of a WhatsApp Web pairing payload: a server ref, then the client's public keys and a secret.
function pairingPayload(): string {
  const b64 = (n: number): string => randomBytes(n).toString('base64');
  return [`2@${randomBytes(36).toString('base64')}`, b64(32), b64(32), b64(32)].join(',');
}

// The QR encoder (and its PNG writer) is loaded when the first QR code is drawn, not at start-up: most
// processes never pair a WhatsApp session.
let qrcode: Promise<typeof import('qrcode')> | undefined;
export const qrDataUri = async (payload: string): Promise<string> => {
  const { toDataURL } = await (qrcode ??= import('qrcode'));
  return toDataURL(payload, { type: 'image/png', errorCorrectionLevel: 'L', margin: 2, scale: 6 });
};

/**
 * WhatsApp sessions: the sandbox lifecycle (connects by itself after `autoScanSeconds`, expires after
 * 45 s unscanned) and, for live keys, linked devices through `live` (without it, live linking answers
 * WhatsappUnavailableError).
 */
export function createWhatsappSessions(deps: {
  db: Kysely<Database>;
  autoScanSeconds: number;
  now?: () => number;
  live?: LiveWhatsapp;
}): WhatsappSessions {
  const { db } = deps;
  const now = deps.now ?? Date.now;

  // Timed moves are applied when a session is looked at: whichever node looks first writes them,
  // and the compare-and-set keeps the others from writing them twice.
  async function observe(row: WhatsappSessionRow): Promise<WhatsappSessionRow> {
    if (row.status !== 'qr_pending') return row;
    if (row.env !== 'test') return observeLive(row);
    const at = now();
    const connectAt = row.auto_connect_at !== null ? Number(row.auto_connect_at) : null;
    const expiresAt = row.qr_expires_at !== null ? Number(row.qr_expires_at) : Infinity;
    if (connectAt !== null && connectAt < expiresAt && at >= connectAt) {
      const change = { status: 'connected' as const, phone_number: SANDBOX_PHONE_NUMBER, last_connected_at: connectAt, qr_expires_at: null };
      await transitionWhatsappSession(db, row.id, ['qr_pending'], change, at);
    } else if (at >= expiresAt) {
      await transitionWhatsappSession(db, row.id, ['qr_pending'], { status: 'qr_expired' }, at);
    } else {
      return row;
    }
    return (await db.selectFrom('whatsapp_sessions').selectAll().where('id', '=', row.id).executeTakeFirst()) ?? row;
  }

  // A live code's process expires it on time; this catches codes whose process stopped while on screen
  // (the unscanned creds go with it).
  async function observeLive(row: WhatsappSessionRow): Promise<WhatsappSessionRow> {
    const expiresAt = row.qr_expires_at !== null ? Number(row.qr_expires_at) : Infinity;
    const lease = await findAffinity(db, row.id);
    const holderAlive = lease !== undefined && lease.expiresAt > Date.now();
    if (holderAlive || now() < expiresAt) return row;
    await endLiveSession(db, row.id, ['qr_pending'], 'qr_expired', now());
    return (await db.selectFrom('whatsapp_sessions').selectAll().where('id', '=', row.id).executeTakeFirst()) ?? row;
  }

  return {
    async create(owner, link = {}) {
      if (owner.env === 'live') {
        if (!deps.live) throw new WhatsappUnavailableError('live WhatsApp linking is not available in this build');
        const created = await deps.live.create(owner, link);
        if (created.pairingCode !== undefined) return { row: created.row, pairingCode: created.pairingCode };
        return { row: created.row, qrCode: await qrDataUri(created.qr) };
      }
      const createdAt = now();
      const row: WhatsappSessionRow = {
        id: newWhatsappSessionId(createdAt),
        account_id: owner.accountId,
        env: owner.env,
        status: 'qr_pending',
        phone_number: null,
        qr_expires_at: createdAt + QR_VALIDITY_MS,
        auto_connect_at: deps.autoScanSeconds > 0 ? createdAt + deps.autoScanSeconds * 1000 : null,
        auth_state: null,
        created_at: createdAt,
        updated_at: createdAt,
        last_connected_at: null,
      };
      await insertWhatsappSession(db, row);
      // The sandbox keeps it (its syntax checked) so an integration can be written offline.
      if (link.proxy) await setSenderProxy(db, { accountId: owner.accountId, env: owner.env, platform: 'whatsapp', senderKey: row.id }, 'whatsapp_session', link.proxy);
      // A pairing code links the same way as a scan: the sandbox connects it after autoScanSeconds, or on `simulate scan`.
      if (link.phoneNumber !== undefined) return { row, pairingCode: sandboxPairingCode(link.phoneNumber) };
      return { row, qrCode: await qrDataUri(pairingPayload()) };
    },

    async get(owner, id) {
      const row = await findWhatsappSession(db, owner, id);
      return row ? observe(row) : undefined;
    },

    async list(owner) {
      return Promise.all((await listWhatsappSessions(db, owner)).map(observe));
    },

    async remove(owner, id) {
      if (owner.env === 'live' && deps.live) return deps.live.remove(owner, id);
      return deleteWhatsappSession(db, owner, id);
    },

    async simulate(owner, id, event) {
      const found = await findWhatsappSession(db, owner, id);
      if (!found) return undefined;
      const row = await observe(found);
      const status = row.status as WhatsappSessionStatus;
      const at = now();
      let moved = false;
      if (event === 'scan') {
        const change = { status: 'connected' as const, phone_number: SANDBOX_PHONE_NUMBER, last_connected_at: at, qr_expires_at: null, auto_connect_at: null };
        moved = await transitionWhatsappSession(db, id, ['qr_pending'], change, at);
        if (!moved) throw new SessionStateError(`cannot scan: the session is ${status}; only a qr_pending session can be scanned`, status);
      } else if (event === 'expire') {
        moved = await transitionWhatsappSession(db, id, ['qr_pending'], { status: 'qr_expired', auto_connect_at: null }, at);
        if (!moved) throw new SessionStateError(`cannot expire: the session is ${status}; only a qr_pending session can expire`, status);
      } else {
        moved = await transitionWhatsappSession(db, id, ['connected'], { status: 'disconnected' }, at);
        if (!moved) throw new SessionStateError(`cannot disconnect: the session is ${status}; only a connected session can be disconnected`, status);
      }
      return findWhatsappSession(db, owner, id);
    },
  };
}
