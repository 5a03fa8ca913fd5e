import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { KeyEnv } from '../core/ids.js';
import type { AccountsTable, DashboardSessionsTable, Database } from './schema.js';

export type DashboardSessionRow = DashboardSessionsTable;

/** Only this digest of a dashboard cookie's token is ever stored. */
export const hashSessionToken = (token: string): string => createHash('sha256').update(token).digest('hex');

export async function insertDashboardSession(
  db: Kysely<Database>,
  input: { token: string; accountId: string; env: KeyEnv; now: number; ttlMs: number },
): Promise<DashboardSessionRow> {
  const row: DashboardSessionRow = {
    token_hash: hashSessionToken(input.token),
    account_id: input.accountId,
    env: input.env,
    created_at: input.now,
    expires_at: input.now + input.ttlMs,
  };
  await db.insertInto('dashboard_sessions').values(row).execute();
  return row;
}

/** The unexpired sign-in of a cookie token, with its account. */
export async function findDashboardSession(
  db: Kysely<Database>,
  token: string,
  now: number,
): Promise<{ session: DashboardSessionRow; account: AccountsTable } | undefined> {
  const session = await db
    .selectFrom('dashboard_sessions')
    .selectAll()
    .where('token_hash', '=', hashSessionToken(token))
    .where('expires_at', '>', now)
    .executeTakeFirst();
  if (!session) return undefined;
  const account = await db.selectFrom('accounts').selectAll().where('id', '=', session.account_id).executeTakeFirst();
  return account ? { session, account } : undefined;
}

export async function setDashboardSessionEnv(db: Kysely<Database>, token: string, env: KeyEnv): Promise<void> {
  await db.updateTable('dashboard_sessions').set({ env }).where('token_hash', '=', hashSessionToken(token)).execute();
}

export async function deleteDashboardSession(db: Kysely<Database>, token: string): Promise<void> {
  await db.deleteFrom('dashboard_sessions').where('token_hash', '=', hashSessionToken(token)).execute();
}

/** Signs the account out everywhere but the sign-in given (after a password change). */
export async function deleteOtherDashboardSessions(db: Kysely<Database>, accountId: string, keepToken: string): Promise<void> {
  await db.deleteFrom('dashboard_sessions').where('account_id', '=', accountId).where('token_hash', '!=', hashSessionToken(keepToken)).execute();
}

export async function purgeExpiredDashboardSessions(db: Kysely<Database>, now: number): Promise<void> {
  await db.deleteFrom('dashboard_sessions').where('expires_at', '<=', now).execute();
}

/** Accounts that sign in with this email (compared without case); usually one. */
export async function accountsByEmail(db: Kysely<Database>, email: string): Promise<AccountsTable[]> {
  return db
    .selectFrom('accounts')
    .selectAll()
    .where((eb) => eb(eb.fn('lower', ['email']), '=', email.trim().toLowerCase()))
    .where('password_hash', 'is not', null)
    .orderBy('created_at')
    .execute();
}

export async function setPasswordHash(db: Kysely<Database>, accountId: string, passwordHash: string): Promise<void> {
  await db.updateTable('accounts').set({ password_hash: passwordHash }).where('id', '=', accountId).execute();
}
