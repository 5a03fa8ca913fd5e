import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { PlanName } from '../core/plans.js';
import { countAccounts, insertAccount, type AccountRow, type NewAccount } from '../store/accounts.js';
import { issueKey, type IssuedKey } from '../store/keys.js';
import type { ScryptParameters } from '../store/password-hash.js';
import type { Database } from '../store/schema.js';

export interface CreatedAccount {
  account: AccountRow;
  testKey: IssuedKey;
  liveKey: IssuedKey;
  /** Set when the account was given a generated password (shown once). */
  generatedPassword?: string;
}

/** An account with one sandbox and one live key, in one transaction. */
export async function createAccountWithKeys(
  db: Kysely<Database>,
  input: NewAccount,
): Promise<CreatedAccount> {
  return db.transaction().execute(async (trx) => {
    const account = await insertAccount(trx, input);
    const testKey = await issueKey(trx, account.id, 'test');
    const liveKey = await issueKey(trx, account.id, 'live');
    return { account, testKey, liveKey };
  });
}

/** The owner's dashboard email when OWNER_EMAIL was not set at the first start. */
export const DEFAULT_OWNER_EMAIL = 'owner@localhost';

/**
 * On an empty database, the owner account with generated keys and dashboard password (its email
 * `email`, OWNER_EMAIL at the first start, else owner@localhost); undefined otherwise.
 */
export async function bootstrapOwner(
  db: Kysely<Database>,
  email: string = DEFAULT_OWNER_EMAIL,
  passwordHash?: ScryptParameters,
): Promise<CreatedAccount | undefined> {
  if ((await countAccounts(db)) > 0) return undefined;
  const password = randomBytes(12).toString('base64url');
  try {
    const created = await createAccountWithKeys(db, { name: 'owner', email, plan: 'scale', password, passwordHash, isOwner: true });
    return { ...created, generatedPassword: password };
  } catch (error) {
    // Another process created the owner between our count and our insert (the one-owner index said no).
    if ((await countAccounts(db)) > 0) return undefined;
    throw error;
  }
}
