import type { Kysely } from 'kysely';
import type { Database, SenderRecordsTable } from './schema.js';
import { newSenderRecord, type SenderRef } from './sender-record.js';
import { findSenderByRef, setSenderStatus, type Owner } from './senders.js';

/**
 * A sender's own proxy (docs/proxies.md), kept on its record: the URL sealed by the caller (this module
 * never sees it in clear) and its shown form. Read by the worker before each delivery, so a change
 * applies from the sender's next connection.
 */

export interface KeptProxy {
  /** The URL with its credentials, sealed. */
  sealed: string;
  /** scheme://host:port. */
  shown: string;
}

/** Sets (or with null clears) the proxy of a sender, making its record when it has none yet. */
export async function setSenderProxy(db: Kysely<Database>, ref: SenderRef, kind: string, proxy: KeptProxy | null, now = Date.now()): Promise<void> {
  await db
    .insertInto('sender_records')
    .values({ ...newSenderRecord(ref, kind, now), proxy_sealed: proxy?.sealed ?? null, proxy_shown: proxy?.shown ?? null })
    .onConflict((oc) =>
      oc.columns(['sender_key', 'platform', 'account_id', 'env']).doUpdateSet({ proxy_sealed: proxy?.sealed ?? null, proxy_shown: proxy?.shown ?? null, updated_at: now }),
    )
    .execute();
}

/** The sealed proxy URL of a sender, or null when it has none (or no record yet). */
export async function findSenderProxy(db: Kysely<Database>, ref: SenderRef): Promise<string | null> {
  const row = await findSenderByRef(db, ref);
  return row?.proxy_sealed ?? null;
}

/** One sender's record by its id, within its owner's account and environment. */
export async function findSenderRecord(db: Kysely<Database>, owner: Owner, id: string): Promise<SenderRecordsTable | undefined> {
  return db.selectFrom('sender_records').selectAll().where('id', '=', id).where('account_id', '=', owner.accountId).where('env', '=', owner.env).executeTakeFirst();
}

/**
 * The sealed proxy of a live sender known only by its platform key (a listener serves a bot or a
 * li_at for whichever account asked): the most recently set one among its accounts' records.
 */
export async function findLiveProxyByKey(db: Kysely<Database>, platform: string, senderKey: string): Promise<string | null> {
  const row = await db
    .selectFrom('sender_records')
    .select('proxy_sealed')
    .where('sender_key', '=', senderKey)
    .where('platform', '=', platform)
    .where('env', '=', 'live')
    .where('proxy_sealed', 'is not', null)
    .orderBy('updated_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row?.proxy_sealed ?? null;
}

/**
 * A listener's news of a live sender's proxy (docs/proxies.md, "Fail closed"), for every live record of
 * its platform key: a proxy that did not carry the connection makes an `ok` sender `disconnected` with
 * reason `proxy_unreachable`, as a delivery's failure does; one that carried it again makes a sender cut
 * off by it `ok`. Other statuses (expired, resting, restricted) are not the proxy's to change.
 */
export async function followLiveSenderProxy(db: Kysely<Database>, platform: string, senderKey: string, carried: boolean): Promise<void> {
  const rows = await db
    .selectFrom('sender_records')
    .select(['account_id', 'env', 'status', 'reason'])
    .where('platform', '=', platform)
    .where('sender_key', '=', senderKey)
    .where('env', '=', 'live')
    .execute();
  for (const row of rows) {
    const cutOff = row.status === 'disconnected' && row.reason === 'proxy_unreachable';
    if (carried ? !cutOff : row.status !== 'ok') continue;
    const ref = { accountId: row.account_id, env: row.env, platform, senderKey };
    await setSenderStatus(db, ref, carried ? { status: 'ok', reason: null, until: null } : { status: 'disconnected', reason: 'proxy_unreachable', until: null }, { onlyIfKnown: true });
  }
}

/**
 * A WhatsApp session or Telegram account was deleted with its credentials: its proxy's go too (the
 * sender's record stays, as the history of what it sent). A record made only to keep the proxy (it never
 * sent: a linking that failed or was never used) goes whole: it would list a sender that never was.
 */
export async function forgetSessionProxy(db: Kysely<Database>, platform: string, sessionId: string, now = Date.now()): Promise<void> {
  await db
    .deleteFrom('sender_records')
    .where('platform', '=', platform)
    .where('sender_key', '=', sessionId)
    .where('last_sent_at', 'is', null)
    .where('failure_code', 'is', null)
    .where('proxy_sealed', 'is not', null)
    .execute();
  await db
    .updateTable('sender_records')
    .set({ proxy_sealed: null, proxy_shown: null, updated_at: now })
    .where('platform', '=', platform)
    .where('sender_key', '=', sessionId)
    .where('proxy_sealed', 'is not', null)
    .execute();
}
