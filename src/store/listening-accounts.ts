import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * Whose listening it is. A listener (a Telegram bot's poller, a LinkedIn li_at's looks) is one per
 * credential, but it belongs to the accounts and environments that asked for it (`listen: true`): only
 * they see its state on their notes and end it. Two accounts sending with one bot share its poller; one of
 * them ending its listening leaves the other's, and the kept credential goes with the last.
 */
export interface ListeningOwner {
  platform: string;
  senderKey: string;
  accountId: string;
  env: string;
}

export async function addListeningAccount(db: Kysely<Database>, owner: ListeningOwner, now: number): Promise<void> {
  await db
    .insertInto('listening_accounts')
    .values({ platform: owner.platform, sender_key: owner.senderKey, account_id: owner.accountId, env: owner.env, since: now })
    .onConflict((oc) => oc.columns(['platform', 'sender_key', 'account_id', 'env']).doNothing())
    .execute();
}

export async function isListeningAccount(db: Kysely<Database>, owner: ListeningOwner): Promise<boolean> {
  const row = await db
    .selectFrom('listening_accounts')
    .select('since')
    .where('platform', '=', owner.platform)
    .where('sender_key', '=', owner.senderKey)
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .executeTakeFirst();
  return row !== undefined;
}

/** The owner no longer listens; true when nobody else does (the listener and its credential can go). */
export async function dropListeningAccount(db: Kysely<Database>, owner: ListeningOwner): Promise<boolean> {
  await db
    .deleteFrom('listening_accounts')
    .where('platform', '=', owner.platform)
    .where('sender_key', '=', owner.senderKey)
    .where('account_id', '=', owner.accountId)
    .where('env', '=', owner.env)
    .execute();
  const other = await db.selectFrom('listening_accounts').select('account_id').where('platform', '=', owner.platform).where('sender_key', '=', owner.senderKey).limit(1).executeTakeFirst();
  return other === undefined;
}

/** The listener itself ended (revoked, signed out, its window over): nobody listens to it any more. */
export async function dropListeningAccounts(db: Kysely<Database>, platform: string, senderKeys: readonly string[]): Promise<void> {
  if (senderKeys.length === 0) return;
  await db.deleteFrom('listening_accounts').where('platform', '=', platform).where('sender_key', 'in', [...senderKeys]).execute();
}
