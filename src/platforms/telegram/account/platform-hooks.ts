import { findTelegramSession } from '../../../store/telegram-sessions.js';
import { DeliveryError, type AcceptProblem, type DeliveryJob, type Owner, type PlatformAdapter, type PlatformServices, type PlatformSession } from '../../platform.js';
import { createAccountAdapter, type AccountAdapterTuning } from './adapter.js';
import { tellAccountName } from './label.js';

/**
 * What a linked Telegram account (`session: {"session_id": "ts_…"}`) changes in the Telegram platform,
 * beside bots: its sender key, its checks at acceptance, its process affinity, and its adapter.
 */

const accountIdOf = (session: PlatformSession): string | undefined => (typeof session.session_id === 'string' ? session.session_id : undefined);

/** A linked account is named by its session id (not a secret); a bot is not this module's. */
export const accountSenderKey = (session: PlatformSession): string | undefined => accountIdOf(session);

/** Only the process holding the account's connection sends its notes. */
export const accountAffinityKey = (session: PlatformSession): string | null => accountIdOf(session) ?? null;

export async function checkAccountAtAccept(session: PlatformSession, owner: Owner, services: PlatformServices): Promise<AcceptProblem | null> {
  const id = accountIdOf(session);
  if (id === undefined) return null;
  const linked = await findTelegramSession(services.db.kysely, owner, id);
  if (!linked) return { code: 'invalid_parameter', message: `no Telegram session ${id} for this API key's account and environment`, details: { field: 'session.session_id' } };
  // A sandbox session that links by itself is looked at first, so its timed move applies.
  const status = services.telegramSessions ? ((await services.telegramSessions.get(owner, id))?.status ?? linked.status) : linked.status;
  if (status !== 'connected') {
    return { code: 'session_not_connected', message: `Telegram session ${id} is ${status}, not connected`, details: { field: 'session.session_id', status } };
  }
  return null;
}

export async function accountSandboxCheck(job: DeliveryJob, { services }: { services: PlatformServices }): Promise<void> {
  const id = accountIdOf(job.session);
  if (id === undefined) return;
  const row = await findTelegramSession(services.db.kysely, { accountId: job.accountId, env: job.env }, id);
  if (row === undefined) throw new DeliveryError('invalid_session', 'the Telegram session no longer exists', false);
  if (row.status !== 'connected') throw new DeliveryError('session_not_connected', `the Telegram session is ${row.status}, not connected`, false);
  tellAccountName(job, row);
}

const accountTuning = (value: unknown): AccountAdapterTuning => (typeof value === 'object' && value !== null ? (value as AccountAdapterTuning) : {});

/** The Telegram adapter: a linked account's notes through MTProto, a bot's through the Bot API. */
export function createRoutedAdapter(services: PlatformServices, tuning: unknown, bot: PlatformAdapter): PlatformAdapter {
  const account = services.telegramAccounts ? createAccountAdapter({ db: services.db.kysely, accounts: services.telegramAccounts, tuning: accountTuning(tuning) }) : undefined;
  const forAccount = (job: DeliveryJob): PlatformAdapter | undefined => (accountIdOf(job.session) !== undefined ? account : undefined);
  const unavailable = (): never => {
    throw new DeliveryError('platform_error', 'Telegram accounts are not available in this process', true);
  };
  return {
    deliver: (job) => (accountIdOf(job.session) !== undefined ? (forAccount(job) ?? { deliver: unavailable }).deliver(job) : bot.deliver(job)),
    showRecording: (job, ms) => {
      if (accountIdOf(job.session) === undefined) return bot.showRecording ? bot.showRecording(job, ms) : Promise.resolve();
      return account?.showRecording ? account.showRecording(job, ms) : Promise.resolve();
    },
  };
}
