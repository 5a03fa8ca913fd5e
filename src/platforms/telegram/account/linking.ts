import type { Api } from 'telegram';
import { newTelegramSessionId } from '../../../core/ids.js';
import { releaseAffinity } from '../../../store/affinity.js';
import {
  claimTelegramSession,
  deleteTelegramSession,
  findTelegramSession,
  findTelegramSessionById,
  insertTelegramSession,
  transitionTelegramSession,
  type Owner,
  type TelegramSessionRow,
} from '../../../store/telegram-sessions.js';
import { setSenderProxy, type KeptProxy } from '../../../store/sender-proxy.js';
import { FLOOD_SLEEP_THRESHOLD, loadTelegram, rpcErrorName } from './client.js';
import {
  closeLink,
  loginUrl,
  proxyOptionFor,
  PasswordTries,
  TelegramSessionStateError,
  TelegramNotConfiguredError,
  TelegramUnavailableError,
  withTimeout,
  WrongPasswordError,
  type AccountContext,
  type AccountLink,
} from './context.js';

/**
 * Linking a Telegram account by QR code, as Telegram Desktop does (auth.exportLoginToken): the token
 * shown as `tg://login?token=…` and exported again when it expires while the code waits; the scan
 * arrives as updateLoginToken, after which exporting once more gives the authorization (or moves to
 * the account's data centre with auth.importLoginToken). An account with a cloud password answers
 * SESSION_PASSWORD_NEEDED: the session waits in `password_needed` for auth.checkPassword (SRP).
 */
export function createAccountLinking(
  ctx: AccountContext,
  hooks: {
    ensureRenewing(): void;
    /** An update on a linked (open) connection. */
    received(link: AccountLink, update: unknown): void;
    /** The account was just authorized on this connection: start following its updates (and hand it on). */
    opened(link: AccountLink): Promise<void>;
  },
) {
  const { db, secretBox, tuning, links, holderId } = ctx;
  const log = (id: string) => ctx.logger.child({ session_id: id });
  const passwordTries = new PasswordTries();

  function credentials(): { apiId: number; apiHash: string } {
    if (!ctx.credentials) throw new TelegramNotConfiguredError();
    return ctx.credentials;
  }

  async function exportToken(link: AccountLink): Promise<Api.auth.TypeLoginToken> {
    const { Api } = await loadTelegram();
    return link.client.invoke(new Api.auth.ExportLoginToken({ ...credentials(), exceptIds: [] }));
  }

  /** Exports a login token, shows it (sealed, for GET and the dashboard) and plans its renewal. */
  async function showToken(link: AccountLink): Promise<string | undefined> {
    const { Api } = await loadTelegram();
    const result = await exportToken(link);
    if (!(result instanceof Api.auth.LoginToken)) {
      await finishScan(link, result);
      return undefined;
    }
    const url = loginUrl(result.token);
    await db.updateTable('telegram_sessions').set({ qr_payload: secretBox.seal(url) }).where('id', '=', link.id).where('status', '=', 'qr_pending').execute();
    // Renew when Telegram says the token expires, as the official apps do: `expires` is on Telegram's clock,
    // which ours may be ahead of or behind (the library learns the offset from the server's message ids).
    const delay = Math.max(tuning.minRenewMs, result.expires * 1000 - link.client.serverNow());
    clearTimeout(link.renewTimer);
    link.renewTimer = setTimeout(() => void renewToken(link), delay);
    link.renewTimer.unref();
    return url;
  }

  async function renewToken(link: AccountLink): Promise<void> {
    if (link.phase !== 'linking' || links.get(link.id) !== link) return;
    const row = await findTelegramSessionById(db, link.id);
    if (!row || row.status !== 'qr_pending') return;
    if (row.qr_expires_at !== null && ctx.now() >= Number(row.qr_expires_at)) return expire(link, ['qr_pending']);
    await showToken(link).catch((err: unknown) => log(link.id).warn({ error: rpcErrorName(err) ?? String(err) }, 'could not renew the Telegram login token'));
  }

  /** The code was not scanned (or the password not given) in time: the session is qr_expired. */
  async function expire(link: AccountLink, from: Array<'qr_pending' | 'password_needed'>): Promise<void> {
    passwordTries.forget(link.id);
    links.delete(link.id);
    closeLink(link);
    await transitionTelegramSession(db, link.id, from, { status: 'qr_expired', qr_payload: null, qr_expires_at: null }, ctx.now());
    await releaseAffinity(db, link.id, holderId);
  }

  /** After exportLoginToken answered something other than a token: follow it to the authorization. */
  async function finishScan(link: AccountLink, result: Api.auth.TypeLoginToken): Promise<void> {
    const { Api } = await loadTelegram();
    if (result instanceof Api.auth.LoginTokenMigrateTo) {
      await link.client.switchDc(result.dcId);
      result = await link.client.invoke(new Api.auth.ImportLoginToken({ token: result.token }));
    }
    if (result instanceof Api.auth.LoginTokenSuccess && result.authorization instanceof Api.auth.Authorization) {
      await authorized(link, result.authorization.user);
    }
  }

  /** updateLoginToken: the code was scanned. */
  function scanned(link: AccountLink): void {
    if (link.phase !== 'linking' || link.completing) return;
    link.completing = (async () => {
      try {
        await finishScan(link, await exportToken(link));
      } catch (err) {
        if (rpcErrorName(err) === 'SESSION_PASSWORD_NEEDED') await passwordNeeded(link);
        else log(link.id).warn({ error: rpcErrorName(err) ?? String(err) }, 'the Telegram login did not complete');
      } finally {
        link.completing = undefined;
      }
    })();
  }

  async function passwordNeeded(link: AccountLink): Promise<void> {
    clearTimeout(link.renewTimer);
    link.phase = 'password';
    const until = ctx.now() + tuning.linkWindowMs;
    await transitionTelegramSession(db, link.id, ['qr_pending'], { status: 'password_needed', qr_payload: null, qr_expires_at: until }, ctx.now());
    link.renewTimer = setTimeout(() => void (link.phase === 'password' ? expire(link, ['password_needed']) : undefined), tuning.linkWindowMs);
    link.renewTimer.unref();
  }

  /** Telegram authorized the account: keep its key (sealed) and who it is. */
  async function authorized(link: AccountLink, user: Api.TypeUser): Promise<void> {
    clearTimeout(link.renewTimer);
    passwordTries.forget(link.id);
    const person = user as Partial<Api.User>;
    const change = {
      status: 'connected' as const,
      auth_key: secretBox.seal(link.client.exportSession()),
      user_id: String(user.id),
      username: person.username ?? null,
      phone_number: person.phone ?? null,
      qr_payload: null,
      qr_expires_at: null,
      auto_connect_at: null,
      last_connected_at: ctx.now(),
    };
    const moved = await transitionTelegramSession(db, link.id, ['qr_pending', 'password_needed'], change, ctx.now());
    if (moved) {
      link.phase = 'open';
      log(link.id).info('Telegram account linked');
      await hooks.opened(link);
      return;
    }
    // Deleted while it was being scanned: do not leave an authorization behind at Telegram.
    links.delete(link.id);
    await logOut(link).catch(() => undefined);
    closeLink(link);
  }

  async function logOut(link: AccountLink): Promise<void> {
    const { Api } = await loadTelegram();
    await withTimeout(link.client.invoke(new Api.auth.LogOut()), tuning.logoutTimeoutMs);
  }

  return {
    credentials,
    logOut,
    scanned,

    /** A row in qr_pending, a connection, and the first login URL to draw. */
    async create(owner: Owner, request: { proxy?: KeptProxy } = {}): Promise<{ row: TelegramSessionRow; qr: string }> {
      const creds = credentials();
      const createdAt = ctx.now();
      const row: TelegramSessionRow = {
        id: newTelegramSessionId(createdAt),
        account_id: owner.accountId,
        env: owner.env,
        status: 'qr_pending',
        user_id: null,
        username: null,
        phone_number: null,
        auth_key: null,
        qr_payload: null,
        qr_expires_at: createdAt + tuning.linkWindowMs,
        auto_connect_at: null,
        resting_until: null,
        created_at: createdAt,
        updated_at: createdAt,
        last_connected_at: null,
      };
      await insertTelegramSession(db, row);
      // Its proxy (checked by the caller) is kept before the first connection, which goes through it.
      if (request.proxy) await setSenderProxy(db, { accountId: owner.accountId, env: owner.env, platform: 'telegram', senderKey: row.id }, 'telegram_account', request.proxy);
      await claimTelegramSession(db, row.id, holderId, Date.now(), tuning.leaseMs);
      let proxy: Awaited<ReturnType<typeof proxyOptionFor>>;
      try {
        proxy = await proxyOptionFor(ctx, row.id);
      } catch (error) {
        await deleteTelegramSession(db, owner, row.id);
        throw new TelegramUnavailableError(error instanceof Error ? error.message : "the account's proxy did not carry the connection");
      }
      const link: AccountLink = { id: row.id, client: ctx.clientFactory({ ...creds, floodSleepThreshold: FLOOD_SLEEP_THRESHOLD, ...proxy }), phase: 'linking', renewTimer: undefined, completing: undefined };
      links.set(row.id, link);
      link.client.onUpdate((update) => {
        if (link.phase === 'open') return hooks.received(link, update);
        const inner = (update as { className?: string; update?: { className?: string } }).className === 'UpdateShort' ? (update as { update: unknown }).update : update;
        if ((inner as { className?: string }).className === 'UpdateLoginToken') scanned(link);
      });
      try {
        const url = await withTimeout(
          (async () => {
            await link.client.connect();
            return showToken(link);
          })(),
          tuning.qrWaitMs,
        );
        if (url === undefined) throw new TelegramUnavailableError('Telegram gave no login token in time');
        hooks.ensureRenewing();
        return { row: (await findTelegramSessionById(db, row.id)) ?? row, qr: url };
      } catch (error) {
        links.delete(row.id);
        closeLink(link);
        await deleteTelegramSession(db, owner, row.id);
        if (error instanceof TelegramUnavailableError) throw error;
        throw new TelegramUnavailableError(`Telegram could not start the login: ${rpcErrorName(error) ?? (error instanceof Error ? error.message : String(error))}`);
      }
    },

    /** The cloud password of a password_needed session, checked by SRP; never kept, never logged. */
    async password(owner: Owner, id: string, password: string): Promise<TelegramSessionRow | undefined> {
      const row = await findTelegramSession(db, owner, id);
      if (!row) return undefined;
      if (row.status !== 'password_needed') throw new TelegramSessionStateError(`the session is ${row.status}; only a password_needed session takes a password`, row.status);
      const link = links.get(id);
      if (!link || link.phase !== 'password') throw new TelegramUnavailableError('this login is held by another process or was interrupted; try again, or start a new session');
      // A try is taken before the check: parallel tries count too, and no more than the last reach Telegram.
      if (!passwordTries.take(id)) throw new WrongPasswordError(0);
      const { Api } = await loadTelegram();
      const { computeCheck } = await import('telegram/Password.js');
      try {
        const info = await link.client.invoke(new Api.account.GetPassword());
        const check = await computeCheck(info, password);
        const result = await link.client.invoke(new Api.auth.CheckPassword({ password: check }));
        if (result instanceof Api.auth.Authorization) await authorized(link, result.user);
      } catch (err) {
        if (rpcErrorName(err) !== 'PASSWORD_HASH_INVALID') throw new TelegramUnavailableError(`Telegram did not accept the password check: ${rpcErrorName(err) ?? 'no answer'}`);
        const left = passwordTries.left(id);
        // The last wrong try ends the linking, as an unanswered code does.
        if (left === 0) await expire(link, ['password_needed']);
        throw new WrongPasswordError(left);
      }
      return findTelegramSession(db, owner, id);
    },
  };
}
