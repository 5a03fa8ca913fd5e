import type { Kysely, Transaction } from 'kysely';
import { dialectOf } from './dialect.js';
import { isPlanName, MAX_ACTIVE_KEYS, SANDBOX_WHATSAPP_SESSIONS, WHATSAPP_SESSIONS_BY_PLAN } from '../core/plans.js';
import type { Database } from './schema.js';

/** What an account may hold at most (core/plans.ts), by the name the API's `details.limit` gives it. */
export type LimitName = 'api_keys' | 'whatsapp_sessions';

/** A new key or session would take the account over its cap: nothing was created. */
export class LimitReachedError extends Error {
  constructor(
    readonly limit: LimitName,
    readonly max: number,
    message: string,
  ) {
    super(message);
    this.name = 'LimitReachedError';
  }
}

/**
 * Holds the account's row until the transaction ends, so two creations counted at the same moment in
 * two processes cannot both find room for one more. SQLite's transactions take the write lock when
 * they begin (sqlite-durable.ts), which orders them already.
 */
async function lockAccount(trx: Transaction<Database>, accountId: string): Promise<void> {
  if (dialectOf(trx) !== 'postgres') return;
  await trx.selectFrom('accounts').select('id').where('id', '=', accountId).forUpdate().executeTakeFirst();
}

/** Throws LimitReachedError when the account already has MAX_ACTIVE_KEYS active keys in `env`. */
export async function checkKeyRoom(trx: Transaction<Database>, accountId: string, env: string, now: number): Promise<void> {
  await lockAccount(trx, accountId);
  const row = await trx
    .selectFrom('api_keys')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .where('env', '=', env)
    .where('revoked_at', 'is', null)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .executeTakeFirstOrThrow();
  if (Number(row.n) >= MAX_ACTIVE_KEYS) {
    throw new LimitReachedError(
      'api_keys',
      MAX_ACTIVE_KEYS,
      `this account already has ${MAX_ACTIVE_KEYS} active ${env} keys, the most it may have (keys still working after a roll count until they expire); revoke one first`,
    );
  }
}

/**
 * Throws LimitReachedError when the account may have no more linking or linked WhatsApp sessions in
 * `env`: live, as many as its plan allows; sandbox, SANDBOX_WHATSAPP_SESSIONS whatever the plan.
 */
export async function checkWhatsappSessionRoom(trx: Transaction<Database>, accountId: string, env: string): Promise<void> {
  await lockAccount(trx, accountId);
  const account = await trx.selectFrom('accounts').select('plan').where('id', '=', accountId).executeTakeFirst();
  const plan = account && isPlanName(account.plan) ? account.plan : 'starter';
  const max = env === 'live' ? WHATSAPP_SESSIONS_BY_PLAN[plan] : SANDBOX_WHATSAPP_SESSIONS;
  const row = await trx
    .selectFrom('whatsapp_sessions')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .where('env', '=', env)
    .where('status', 'in', ['qr_pending', 'connected'])
    .executeTakeFirstOrThrow();
  if (Number(row.n) >= max) {
    throw new LimitReachedError(
      'whatsapp_sessions',
      max,
      env === 'live'
        ? `this account already has ${max} live WhatsApp sessions linking or linked, the most its ${plan} plan allows; delete one first`
        : `this account already has ${max} sandbox WhatsApp sessions linking or linked, the most the sandbox allows; delete one first`,
    );
  }
}

/** Runs `work` in a transaction (or the one given) after `check`: the check and the insert commit together. */
export async function withinLimit<T>(db: Kysely<Database>, check: (trx: Transaction<Database>) => Promise<void>, work: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  if (db.isTransaction) {
    const trx = db as Transaction<Database>;
    await check(trx);
    return work(trx);
  }
  return db.transaction().execute(async (trx) => {
    await check(trx);
    return work(trx);
  });
}
