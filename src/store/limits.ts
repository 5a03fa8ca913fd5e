import type { Kysely, Transaction } from 'kysely';
import { dialectOf } from './dialect.js';
import { isPlanName, MAX_ACTIVE_KEYS, SANDBOX_TELEGRAM_SESSIONS, SANDBOX_WHATSAPP_SESSIONS, TELEGRAM_SESSIONS_BY_PLAN, WHATSAPP_SESSIONS_BY_PLAN, type PlanName } from '../core/plans.js';
import type { Database } from './schema.js';

/** What an account may hold at most (core/plans.ts), by the name the API's `details.limit` gives it. */
export type LimitName = 'api_keys' | SessionLimit;
export type SessionLimit = 'whatsapp_sessions' | 'telegram_sessions';

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

/** Each kind of session: its table, the statuses that count (linking or linked), its caps and its name in messages. */
const SESSION_CAPS: Record<SessionLimit, { table: 'whatsapp_sessions' | 'telegram_sessions'; counted: string[]; byPlan: Record<PlanName, number>; sandbox: number; name: string }> = {
  whatsapp_sessions: { table: 'whatsapp_sessions', counted: ['qr_pending', 'connected'], byPlan: WHATSAPP_SESSIONS_BY_PLAN, sandbox: SANDBOX_WHATSAPP_SESSIONS, name: 'WhatsApp sessions' },
  telegram_sessions: { table: 'telegram_sessions', counted: ['qr_pending', 'password_needed', 'connected'], byPlan: TELEGRAM_SESSIONS_BY_PLAN, sandbox: SANDBOX_TELEGRAM_SESSIONS, name: 'Telegram account sessions' },
};

/**
 * Throws LimitReachedError when the account may have no more linking or linked sessions of the kind
 * in `env`: live, as many as its plan allows; sandbox, the sandbox's cap whatever the plan.
 */
export async function checkSessionRoom(trx: Transaction<Database>, limit: SessionLimit, accountId: string, env: string): Promise<void> {
  const cap = SESSION_CAPS[limit];
  await lockAccount(trx, accountId);
  const account = await trx.selectFrom('accounts').select('plan').where('id', '=', accountId).executeTakeFirst();
  const plan = account && isPlanName(account.plan) ? account.plan : 'starter';
  const max = env === 'live' ? cap.byPlan[plan] : cap.sandbox;
  const row = await trx
    .selectFrom(cap.table)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .where('env', '=', env)
    .where('status', 'in', cap.counted)
    .executeTakeFirstOrThrow();
  if (Number(row.n) >= max) {
    throw new LimitReachedError(
      limit,
      max,
      env === 'live'
        ? `this account already has ${max} live ${cap.name} linking or linked, the most its ${plan} plan allows; delete one first`
        : `this account already has ${max} sandbox ${cap.name} linking or linked, the most the sandbox allows; delete one first`,
    );
  }
}

/**
 * Runs `work` in a transaction (or the one given) after `check`: the check and the insert commit
 * together. Outside a transaction given, one account's creations take turns in this process before
 * they take a connection (accountTurn).
 */
export async function withinLimit<T>(
  db: Kysely<Database>,
  accountId: string,
  check: (trx: Transaction<Database>) => Promise<void>,
  work: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  if (db.isTransaction) {
    const trx = db as Transaction<Database>;
    await check(trx);
    return work(trx);
  }
  return accountTurn(accountId, () =>
    db.transaction().execute(async (trx) => {
      await check(trx);
      return work(trx);
    }),
  );
}

/** Per account, the end of the last creation waiting its turn in this process. */
const accountTurns = new Map<string, Promise<void>>();

/**
 * Runs `work` once the account's earlier creations in this process have ended. The cap's check holds the
 * account's row (PostgreSQL) until its transaction ends: a flood of one account's creations would
 * otherwise hold every pool connection, each waiting on that lock, and every other account's requests
 * would find none (503). Taking turns, one account holds at most one connection per process for them;
 * the row lock still orders the processes.
 */
async function accountTurn<T>(accountId: string, work: () => Promise<T>): Promise<T> {
  const before = accountTurns.get(accountId);
  let done!: () => void;
  const mine = new Promise<void>((resolve) => (done = resolve));
  const tail = before ? before.then(() => mine) : mine;
  accountTurns.set(accountId, tail);
  try {
    if (before) await before;
    return await work();
  } finally {
    done();
    if (accountTurns.get(accountId) === tail) accountTurns.delete(accountId);
  }
}
