import type { Kysely } from 'kysely';
import { newAccountId } from '../core/ids.js';
import type { PlanName } from '../core/plans.js';
import { announceAuthChange, markAuthChanged } from './auth-changes.js';
import { hashPasswordSync, verifyPasswordSync, type ScryptParameters } from './password-hash.js';
import type { AccountsTable, Database } from './schema.js';

export type AccountRow = AccountsTable;

/** Parameters and format: src/store/password-hash.ts. */
export const hashPassword = hashPasswordSync;
export const verifyPassword = verifyPasswordSync;

export interface NewAccount {
  name: string;
  email?: string | null;
  plan: PlanName;
  password?: string | null;
  /** What the password is hashed with (PASSWORD_HASH_COST's); default the default cost's. */
  passwordHash?: ScryptParameters;
  isOwner?: boolean;
}

export async function insertAccount(db: Kysely<Database>, input: NewAccount, now = Date.now()): Promise<AccountRow> {
  const row: AccountRow = {
    id: newAccountId(),
    name: input.name,
    email: input.email ?? null,
    plan: input.plan,
    rate_limit: null,
    quota: null,
    password_hash: input.password ? hashPassword(input.password, input.passwordHash) : null,
    is_owner: input.isOwner ? 1 : 0,
    created_at: now,
  };
  await db.insertInto('accounts').values(row).execute();
  return row;
}

export async function findAccount(db: Kysely<Database>, id: string): Promise<AccountRow | undefined> {
  return db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function countAccounts(db: Kysely<Database>): Promise<number> {
  const row = await db.selectFrom('accounts').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function updatePlan(
  db: Kysely<Database>,
  id: string,
  change: { plan: PlanName; rateLimit?: number | null; quota?: number | null },
): Promise<AccountRow | undefined> {
  const values: Partial<AccountRow> = { plan: change.plan };
  if (change.rateLimit !== undefined) values.rate_limit = change.rateLimit;
  if (change.quota !== undefined) values.quota = change.quota;
  await db.transaction().execute(async (trx) => {
    await trx.updateTable('accounts').set(values).where('id', '=', id).execute();
    await markAuthChanged(trx);
  });
  announceAuthChange({ accountId: id });
  return findAccount(db, id);
}

/** Every account, oldest first (ids are time-sortable). */
export async function listAccounts(db: Kysely<Database>): Promise<AccountRow[]> {
  return db.selectFrom('accounts').selectAll().orderBy('id').execute();
}
