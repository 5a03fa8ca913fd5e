import type { Kysely } from 'kysely';
import { dropListeningAccounts } from './listening-accounts.js';
import type { Database, TelegramListenersTable } from './schema.js';
import { TurnBatch, type ItemResult } from './turn-batch.js';

export type TelegramListenerRow = TelegramListenersTable;

/** How long a bot is listened to after its last note. */
export const TELEGRAM_LISTEN_DAYS = 30;
const DAY_MS = 86_400_000;

/**
 * A send asked to listen to its bot: keep the token (sealed by the caller) until 30 days from now, and
 * listen again if it was refused before (the webhook may be gone).
 */
export async function listenToTelegramBot(db: Kysely<Database>, senderKey: string, sealedToken: string, now: number): Promise<void> {
  const until = now + TELEGRAM_LISTEN_DAYS * DAY_MS;
  await db
    .insertInto('telegram_listeners')
    .values({ sender_key: senderKey, token: sealedToken, status: 'listening', reason: null, listen_until: until, update_offset: null, updated_at: now })
    .onConflict((oc) => oc.column('sender_key').doUpdateSet({ token: sealedToken, status: 'listening', reason: null, listen_until: until, updated_at: now }))
    .execute();
}

/** Bots to listen to now. */
export async function listeningBots(db: Kysely<Database>, now: number): Promise<TelegramListenerRow[]> {
  return db.selectFrom('telegram_listeners').selectAll().where('status', '=', 'listening').where('listen_until', '>', now).execute();
}

export async function findListener(db: Kysely<Database>, senderKey: string): Promise<TelegramListenerRow | undefined> {
  return db.selectFrom('telegram_listeners').selectAll().where('sender_key', '=', senderKey).executeTakeFirst();
}

/**
 * Windows that ended: their tokens are erased (the rows go). Returns how many. A bot's window first
 * moves to 30 days after its latest note (a note without `listen` keeps a listened bot listened to), read
 * here rather than written by every send.
 */
export async function endExpiredListening(db: Kysely<Database>, now: number): Promise<number> {
  const due = await db.selectFrom('telegram_listeners').select(['sender_key', 'listen_until']).where('listen_until', '<=', now + DAY_MS).execute();
  for (const bot of due) {
    const latest = await db
      .selectFrom('messages')
      .select((eb) => eb.fn.max('created_at').as('at'))
      .where('sender_key', '=', bot.sender_key)
      .where('platform', '=', 'telegram')
      .executeTakeFirst();
    const until = Number(latest?.at ?? 0) + TELEGRAM_LISTEN_DAYS * DAY_MS;
    if (until > Number(bot.listen_until)) await db.updateTable('telegram_listeners').set({ listen_until: until }).where('sender_key', '=', bot.sender_key).execute();
  }
  const ended = await db.deleteFrom('telegram_listeners').where('listen_until', '<=', now).returning('sender_key').execute();
  await dropListeningAccounts(db, 'telegram', ended.map((bot) => bot.sender_key));
  return ended.length;
}

/** Erases a bot's kept token (it was revoked, or the listening was deleted). */
export async function forgetListener(db: Kysely<Database>, senderKey: string): Promise<void> {
  await db.deleteFrom('telegram_listeners').where('sender_key', '=', senderKey).execute();
  await dropListeningAccounts(db, 'telegram', [senderKey]);
}

export async function saveUpdateOffset(db: Kysely<Database>, senderKey: string, offset: number, now: number): Promise<void> {
  await db.updateTable('telegram_listeners').set({ update_offset: offset, updated_at: now }).where('sender_key', '=', senderKey).execute();
}

/** The bot cannot be listened to (a webhook is set): why, kept until a new `listen` send tries again. */
export async function refuseListening(db: Kysely<Database>, senderKey: string, reason: string, now: number): Promise<void> {
  await db.updateTable('telegram_listeners').set({ status: 'conflict', reason, updated_at: now }).where('sender_key', '=', senderKey).execute();
}

/** The chat blocked the sender (true) or let it back in (false). */
export async function setChatBlocked(db: Kysely<Database>, chat: { platform: string; senderKey: string; recipient: string }, blocked: boolean, now: number): Promise<void> {
  if (!blocked) {
    await db.deleteFrom('blocked_chats').where('platform', '=', chat.platform).where('sender_key', '=', chat.senderKey).where('recipient', '=', chat.recipient).execute();
    return;
  }
  await db
    .insertInto('blocked_chats')
    .values({ platform: chat.platform, sender_key: chat.senderKey, recipient: chat.recipient, blocked_at: now })
    .onConflict((oc) => oc.columns(['platform', 'sender_key', 'recipient']).doUpdateSet({ blocked_at: now }))
    .execute();
}

interface Chat {
  platform: string;
  senderKey: string;
  recipient: string;
}

/** Most chats one look-up asks about; the rest go in the next. */
const MAX_CHATS_PER_LOOKUP = 200;
const blockedChatLookups = new WeakMap<Kysely<Database>, TurnBatch<Chat, boolean>>();

/**
 * Whether the chat blocked the sender. Asked before every Telegram note, so the notes that ask in the
 * same turn of the event loop (a claim's notes start together) share one query. On PostgreSQL each
 * question was a round trip of its own: the worker's longest wait in total over a bench run (3,000 notes,
 * 3.9 ms each, queued for the pool's connections).
 */
export function isChatBlocked(db: Kysely<Database>, chat: Chat): Promise<boolean> {
  let lookups = blockedChatLookups.get(db);
  if (!lookups) {
    lookups = new TurnBatch((chats: Chat[]) => findBlocked(db, chats), { maxItems: MAX_CHATS_PER_LOOKUP });
    blockedChatLookups.set(db, lookups);
  }
  return lookups.add(chat);
}

/** For each chat, whether it is blocked: one query per platform among them. */
async function findBlocked(db: Kysely<Database>, chats: Chat[]): Promise<Array<ItemResult<boolean>>> {
  const blocked = new Set<string>();
  const key = (platform: string, senderKey: string, recipient: string) => JSON.stringify([platform, senderKey, recipient]);
  for (const platform of new Set(chats.map((c) => c.platform))) {
    const ofPlatform = chats.filter((c) => c.platform === platform);
    // Both lists over-select (a sender of one chat with the recipient of another): the exact pairs are picked below.
    const rows = await db
      .selectFrom('blocked_chats')
      .select(['sender_key', 'recipient'])
      .where('platform', '=', platform)
      .where('sender_key', 'in', [...new Set(ofPlatform.map((c) => c.senderKey))])
      .where('recipient', 'in', [...new Set(ofPlatform.map((c) => c.recipient))])
      .execute();
    for (const row of rows) blocked.add(key(platform, row.sender_key, row.recipient));
  }
  return chats.map((c) => ({ ok: true, value: blocked.has(key(c.platform, c.senderKey, c.recipient)) }));
}
