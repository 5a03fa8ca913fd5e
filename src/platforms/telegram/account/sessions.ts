import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { SecretBox } from '../../../core/secret-box.js';
import { newTelegramSessionId } from '../../../core/ids.js';
import type { Database } from '../../../store/schema.js';
import { setSenderProxy, type KeptProxy } from '../../../store/sender-proxy.js';
import {
  deleteTelegramSession,
  findTelegramSession,
  findTelegramSessionById,
  insertTelegramSession,
  listTelegramSessions,
  transitionTelegramSession,
  type Owner,
  type TelegramSessionRow,
  type TelegramSessionStatus,
} from '../../../store/telegram-sessions.js';
import { qrDataUri } from '../../whatsapp/sessions.js';
import { loginUrl, PasswordTries, TelegramNotConfiguredError, TelegramSessionStateError, TelegramUnavailableError, WrongPasswordError } from './context.js';
import type { LiveTelegramAccounts } from './live.js';

export { TelegramNotConfiguredError, TelegramSessionStateError, TelegramUnavailableError, WrongPasswordError };

/** How long a sandbox QR code can be scanned (live codes are renewed for the link window instead). */
export const SANDBOX_QR_VALIDITY_MS = 45_000;
/** Who every sandbox session links to. */
export const SANDBOX_ACCOUNT = { user_id: '1000000001', username: 'voicenote_sandbox', phone_number: '15550000000' } as const;
/** The one cloud password the sandbox's `require_password` sessions accept. */
export const SANDBOX_PASSWORD = 'sandbox-password';

export type TelegramSimulatedEvent = 'scan' | 'scan_with_password' | 'expire' | 'disconnect';
export const TELEGRAM_SIMULATED_EVENTS: readonly TelegramSimulatedEvent[] = ['scan', 'scan_with_password', 'expire', 'disconnect'];

export interface TelegramSessions {
  /** `proxy`: the account's own, checked and sealed by the caller; kept before its first connection. */
  create(owner: Owner, request?: { proxy?: KeptProxy }): Promise<{ row: TelegramSessionRow; qrCode: string }>;
  get(owner: Owner, id: string): Promise<TelegramSessionRow | undefined>;
  list(owner: Owner): Promise<TelegramSessionRow[]>;
  /** The QR code on screen now for a qr_pending session (the token is renewed while it waits). */
  currentQr(row: TelegramSessionRow): Promise<string | undefined>;
  password(owner: Owner, id: string, password: string): Promise<TelegramSessionRow | undefined>;
  remove(owner: Owner, id: string): Promise<boolean>;
  simulate(owner: Owner, id: string, event: TelegramSimulatedEvent): Promise<TelegramSessionRow | undefined>;
}

/**
 * Telegram account sessions: the sandbox lifecycle (links by itself after `autoScanSeconds`, expires
 * after 45 s unscanned, can be made to ask for a cloud password) and, for live keys, real logins
 * through `live`.
 */
export function createTelegramSessions(deps: { db: Kysely<Database>; secretBox: SecretBox; autoScanSeconds: number; live: LiveTelegramAccounts; now?: () => number }): TelegramSessions {
  const { db } = deps;
  const now = deps.now ?? Date.now;
  const passwordTries = new PasswordTries();
  const connected = (at: number) => ({ status: 'connected' as const, ...SANDBOX_ACCOUNT, last_connected_at: at, qr_expires_at: null, qr_payload: null, auto_connect_at: null });

  // Timed sandbox moves are applied when a session is looked at (compare-and-set: whoever looks first).
  async function observe(row: TelegramSessionRow): Promise<TelegramSessionRow> {
    if (row.env !== 'test' || row.status !== 'qr_pending') return row;
    const at = now();
    const connectAt = row.auto_connect_at !== null ? Number(row.auto_connect_at) : null;
    const expiresAt = row.qr_expires_at !== null ? Number(row.qr_expires_at) : Infinity;
    if (connectAt !== null && connectAt < expiresAt && at >= connectAt) await transitionTelegramSession(db, row.id, ['qr_pending'], connected(connectAt), at);
    else if (at >= expiresAt) await transitionTelegramSession(db, row.id, ['qr_pending'], { status: 'qr_expired', qr_payload: null }, at);
    else return row;
    return (await findTelegramSessionById(db, row.id)) ?? row;
  }

  return {
    async create(owner, request = {}) {
      if (owner.env === 'live') {
        const created = await deps.live.create(owner, request);
        return { row: created.row, qrCode: await qrDataUri(created.qr) };
      }
      const createdAt = now();
      const url = loginUrl(randomBytes(32));
      const row: TelegramSessionRow = {
        id: newTelegramSessionId(createdAt),
        account_id: owner.accountId,
        env: owner.env,
        status: 'qr_pending',
        user_id: null,
        username: null,
        phone_number: null,
        auth_key: null,
        qr_payload: deps.secretBox.seal(url),
        qr_expires_at: createdAt + SANDBOX_QR_VALIDITY_MS,
        auto_connect_at: deps.autoScanSeconds > 0 ? createdAt + deps.autoScanSeconds * 1000 : null,
        resting_until: null,
        created_at: createdAt,
        updated_at: createdAt,
        last_connected_at: null,
      };
      await insertTelegramSession(db, row);
      // The sandbox keeps it (its syntax checked) so an integration can be written offline.
      if (request.proxy) await setSenderProxy(db, { accountId: owner.accountId, env: owner.env, platform: 'telegram', senderKey: row.id }, 'telegram_account', request.proxy);
      return { row, qrCode: await qrDataUri(url) };
    },

    async get(owner, id) {
      const row = await findTelegramSession(db, owner, id);
      return row ? observe(row) : undefined;
    },

    async list(owner) {
      return Promise.all((await listTelegramSessions(db, owner)).map(observe));
    },

    async currentQr(row) {
      if (row.status !== 'qr_pending' || row.qr_payload === null) return undefined;
      return qrDataUri(deps.secretBox.open(row.qr_payload));
    },

    async password(owner, id, password) {
      if (owner.env === 'live') return deps.live.password(owner, id, password);
      const row = await findTelegramSession(db, owner, id);
      if (!row) return undefined;
      if (row.status !== 'password_needed') {
        passwordTries.forget(id);
        throw new TelegramSessionStateError(`the session is ${row.status}; only a password_needed session takes a password`, row.status);
      }
      const tried = passwordTries.take(id);
      if (!tried || password !== SANDBOX_PASSWORD) {
        if (passwordTries.left(id) > 0) throw new WrongPasswordError(passwordTries.left(id));
        // The last wrong try ends the linking, as an unanswered code does.
        passwordTries.forget(id);
        await transitionTelegramSession(db, id, ['password_needed'], { status: 'qr_expired', qr_payload: null, auto_connect_at: null, qr_expires_at: null }, now());
        throw new WrongPasswordError(0);
      }
      passwordTries.forget(id);
      await transitionTelegramSession(db, id, ['password_needed'], connected(now()), now());
      return findTelegramSession(db, owner, id);
    },

    async remove(owner, id) {
      if (owner.env === 'live') return deps.live.remove(owner, id);
      passwordTries.forget(id);
      return deleteTelegramSession(db, owner, id);
    },

    async simulate(owner, id, event) {
      const found = await findTelegramSession(db, owner, id);
      if (!found) return undefined;
      const row = await observe(found);
      const status = row.status as TelegramSessionStatus;
      const at = now();
      const moves: Record<TelegramSimulatedEvent, [TelegramSessionStatus[], Parameters<typeof transitionTelegramSession>[3], string]> = {
        scan: [['qr_pending'], connected(at), 'only a qr_pending session can be scanned'],
        scan_with_password: [['qr_pending'], { status: 'password_needed', qr_payload: null, auto_connect_at: null, qr_expires_at: null }, 'only a qr_pending session can be scanned'],
        expire: [['qr_pending', 'password_needed'], { status: 'qr_expired', qr_payload: null, auto_connect_at: null }, 'only a qr_pending or password_needed session can expire'],
        disconnect: [['connected'], { status: 'disconnected' }, 'only a connected session can be disconnected'],
      };
      const [from, change, rule] = moves[event];
      if (!(await transitionTelegramSession(db, id, from, change, at))) throw new TelegramSessionStateError(`cannot ${event.replace(/_/g, ' ')}: the session is ${status}; ${rule}`, status);
      return findTelegramSession(db, owner, id);
    },
  };
}
