import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { findAccount } from '../store/accounts.js';
import { hashPasswordAsync, type ScryptParameters } from '../store/password-hash.js';
import type { Database } from '../store/schema.js';

/** A login needs an email: the account has none and none was given. */
export class NoEmailError extends Error {}

export interface ChangedLogin {
  accountId: string;
  email: string;
  /** Set when no password was given: the new one, to be shown once. */
  generatedPassword?: string;
}

/**
 * A new dashboard login for an account (the way back in for an owner who lost the password): the
 * email when given, and the password given or a generated one. Every sign-in of the account ends, as
 * after a password change on the dashboard. Undefined when there is no such account.
 */
export async function setLogin(
  db: Kysely<Database>,
  accountId: string,
  input: { email?: string; password?: string },
  hashParameters?: ScryptParameters,
): Promise<ChangedLogin | undefined> {
  const generated = input.password === undefined ? randomBytes(12).toString('base64url') : undefined;
  const passwordHash = await hashPasswordAsync(input.password ?? generated!, hashParameters);
  return db.transaction().execute(async (trx) => {
    const account = await findAccount(trx, accountId);
    if (!account) return undefined;
    if (input.email === undefined && account.email === null) throw new NoEmailError(`account ${accountId} has no email: give one with --email`);
    await trx
      .updateTable('accounts')
      .set({ password_hash: passwordHash, ...(input.email !== undefined ? { email: input.email } : {}) })
      .where('id', '=', accountId)
      .execute();
    await trx.deleteFrom('dashboard_sessions').where('account_id', '=', accountId).execute();
    return { accountId, email: input.email ?? account.email!, ...(generated ? { generatedPassword: generated } : {}) };
  });
}
