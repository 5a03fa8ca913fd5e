import { newWhatsappSessionId } from '../../../core/ids.js';
import { claimSession, deleteSessionAndAuth, findSessionById } from '../../../store/whatsapp-live.js';
import { findWhatsappSession, insertWhatsappSession, type Owner, type WhatsappSessionRow } from '../../../store/whatsapp-sessions.js';
import { setSenderProxy, type KeptProxy } from '../../../store/sender-proxy.js';
import { newAuthCreds, openAuthValue, sealAuthValue } from '../auth-state.js';
import type { AuthCreds, KeyData, WhatsappSocket } from '../socket.js';
import type { Connections } from './connection.js';
import { endQuietly, type LiveContext, type LiveCreated, WhatsappUnavailableError, withTimeout } from './context.js';

/**
 * Linking and unlinking a device: a new session shows a QR code to scan, or asks WhatsApp for a pairing
 * code for a phone number; deleting a session logs the device out (here, or with a short-lived socket
 * when nobody holds it) and erases its credentials.
 */
export function createLinking(ctx: LiveContext, connections: Connections) {
  const { db, secretBox, socketFactory, tuning, links, holderId, now, state } = ctx;
  const log = (id: string) => ctx.log(id);
  const { newLink, isPaired, connect, voidSession, closeLocally, dropLink } = connections;

  async function create(owner: Owner, request: { phoneNumber?: string; proxy?: KeptProxy } = {}): Promise<LiveCreated> {
    if (state.stopped) throw new WhatsappUnavailableError('the service is shutting down');
    const createdAt = now();
    const creds = await newAuthCreds();
    const row: WhatsappSessionRow = {
      id: newWhatsappSessionId(createdAt),
      account_id: owner.accountId,
      env: owner.env,
      status: 'qr_pending',
      phone_number: null,
      // A deadline other processes can read if this one dies while the code is on screen.
      qr_expires_at: createdAt + tuning.qrWaitMs + tuning.qrValidityMs,
      auto_connect_at: null,
      auth_state: await sealAuthValue(secretBox, creds),
      created_at: createdAt,
      updated_at: createdAt,
      last_connected_at: null,
    };
    await insertWhatsappSession(db, row);
    // Its proxy (checked by the caller) is kept before the first connection, which goes through it.
    if (request.proxy) await setSenderProxy(db, { accountId: owner.accountId, env: owner.env, platform: 'whatsapp', senderKey: row.id }, 'whatsapp_session', request.proxy);
    // A new id: nobody else can hold it yet.
    await claimSession(db, row.id, holderId, Date.now(), tuning.leaseMs);
    const link = newLink(row.id, creds);
    const firstQr = new Promise<string>((resolve, reject) => {
      link.firstQr = { resolve, reject };
    });
    const noQr = setTimeout(() => {
      link.firstQr?.reject(new WhatsappUnavailableError(`WhatsApp sent no QR code within ${Math.round(tuning.qrWaitMs / 1000)} s`));
      link.firstQr = undefined;
    }, tuning.qrWaitMs);
    try {
      await connect(link);
      // The first QR means the socket is ready to be linked; a pairing code is asked for from then on.
      const qr = await firstQr;
      let pairingCode: string | undefined;
      if (request.phoneNumber !== undefined) {
        const socket = link.socket;
        if (!socket) throw new WhatsappUnavailableError('WhatsApp closed the connection before a pairing code could be asked for');
        // Until the code is entered, the creds carry the phone's jid without being linked (Baileys sets `me` at once).
        link.awaitingCode = true;
        pairingCode = await socket.requestPairingCode(request.phoneNumber);
      }
      link.qrTimer = setTimeout(() => {
        if (!isPaired(link)) void voidSession(link, 'qr_expired', pairingCode ? 'nobody entered the pairing code in time' : 'nobody scanned the QR code in time');
      }, tuning.qrValidityMs);
      link.qrTimer.unref();
      return pairingCode !== undefined ? { row, pairingCode } : { row, qr };
    } catch (error) {
      const socket = closeLocally(link);
      endQuietly(socket);
      await link.auth.flush();
      await deleteSessionAndAuth(db, row.id).catch((err: unknown) => log(row.id).error({ err }, 'could not remove a failed WhatsApp session'));
      throw error instanceof WhatsappUnavailableError ? error : new WhatsappUnavailableError(`could not reach WhatsApp: ${(error as Error).message}`);
    } finally {
      clearTimeout(noQr);
    }
  }

  async function remove(owner: Owner, id: string): Promise<boolean> {
    if (!(await findWhatsappSession(db, owner, id))) return false;
    const row = await findSessionById(db, id);
    if (!row) return false;
    const link = links.get(id);
    let detachedLogout: { creds: AuthCreds } | undefined;
    if (link) {
      // Between two connections there is no socket to log out with: use a short-lived one.
      if (!link.socket && isPaired(link)) detachedLogout = { creds: link.auth.creds };
      await dropLink(link, { logout: true, release: false });
    } else if (row.auth_state !== null && (row.holder === null || Number(row.holder_expires_at) < Date.now())) {
      // Nobody holds it: unlink the device from here, after the stored credentials are gone.
      detachedLogout = { creds: await openAuthValue<AuthCreds>(secretBox, row.auth_state).catch(() => ({}) as AuthCreds) };
    }
    // The short-lived socket goes through the session's proxy, read before its record goes (docs/proxies.md).
    let proxyUrl: string | null | undefined = null;
    if (detachedLogout && typeof detachedLogout.creds.me?.id === 'string' && ctx.proxies) {
      proxyUrl = await ctx.proxies.next(id).then(
        (proxy) => proxy.url,
        () => undefined,
      );
      if (proxyUrl === undefined) log(id).warn('the session\'s proxy did not answer: the deleted device is not logged out from here (never directly)');
    }
    // Held by another live process: it sees the row gone at its next lease renewal and logs out then.
    const removed = await deleteSessionAndAuth(db, id);
    if (detachedLogout && typeof detachedLogout.creds.me?.id === 'string' && proxyUrl !== undefined) void logoutDetached(id, detachedLogout.creds, proxyUrl);
    return removed;
  }

  /** Unlinks a device whose session nobody holds: connect with its creds, log out, forget. */
  async function logoutDetached(id: string, creds: AuthCreds, proxyUrl: string | null): Promise<void> {
    const memory = new Map<string, unknown>();
    const keys = {
      async get(type: string, ids: string[]) {
        const out: Record<string, unknown> = {};
        for (const keyId of ids) if (memory.has(`${type}/${keyId}`)) out[keyId] = memory.get(`${type}/${keyId}`);
        return out;
      },
      async set(data: KeyData) {
        for (const [type, values] of Object.entries(data)) {
          for (const [keyId, value] of Object.entries(values ?? {})) {
            if (value === null || value === undefined) memory.delete(`${type}/${keyId}`);
            else memory.set(`${type}/${keyId}`, value);
          }
        }
      },
    };
    let socket: WhatsappSocket | undefined;
    try {
      // Connected only to log out: it answers no resend request.
      socket = await socketFactory({ sessionId: id, auth: { creds, keys }, logger: log(id), qrTimeoutMs: tuning.qrValidityMs, getMessage: async () => undefined, proxyUrl });
      const opened = new Promise<boolean>((resolve) => {
        socket!.ev.on('connection.update', (update) => {
          if (update.connection === 'open') resolve(true);
          else if (update.connection === 'close') resolve(false);
        });
      });
      if (await withTimeout(opened, tuning.logoutTimeoutMs)) await withTimeout(socket.logout(), tuning.logoutTimeoutMs);
    } catch (err) {
      log(id).warn({ err }, 'could not log out a deleted WhatsApp session');
    } finally {
      endQuietly(socket);
    }
  }

  return { create, remove };
}
