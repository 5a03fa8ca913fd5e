import type { Api } from 'telegram';
import type { Kysely } from 'kysely';
import type { Database } from '../../../store/schema.js';
import { findPeer, savePeer } from '../../../store/telegram-account-state.js';
import { DeliveryError } from '../../platform.js';
import { loadTelegram, rpcErrorName, type TelegramAccountClient } from './client.js';

/** The chat a note goes to, and how to tidy up after it (a phone number imported as a contact is removed again). */
export interface ResolvedPeer {
  peer: Api.InputPeerUser;
  userId: string;
  /** Read from what this session resolved before (no call to Telegram). */
  kept: boolean;
  forget(): Promise<void>;
}

const nothing = async (): Promise<void> => undefined;
const asPeer = async (userId: string, accessHash: string): Promise<Api.InputPeerUser> => {
  const { Api } = await loadTelegram();
  return new Api.InputPeerUser({ userId: BigInt(userId) as never, accessHash: BigInt(accessHash) as never });
};

/**
 * The recipient of a note from a Telegram account, resolved once per session and kept (user id and the
 * access hash, which is this account's own for that user): look-ups such as contacts.resolveUsername
 * draw flood waits of hours when made often, so later notes to the same recipient make none.
 */
export async function resolvePeer(db: Kysely<Database>, sessionId: string, client: TelegramAccountClient, recipient: string): Promise<ResolvedPeer> {
  const kept = await findPeer(db, sessionId, recipient);
  if (kept) return { peer: await asPeer(kept.userId, kept.accessHash), userId: kept.userId, kept: true, forget: nothing };
  const found = await lookUp(client, recipient);
  await savePeer(db, sessionId, recipient, { userId: found.userId, accessHash: found.accessHash });
  return { peer: await asPeer(found.userId, found.accessHash), userId: found.userId, kept: false, forget: found.forget };
}

interface LookedUp {
  userId: string;
  accessHash: string;
  forget(): Promise<void>;
}

const userOf = (user: Api.User | undefined): { userId: string; accessHash: string } | undefined =>
  user && user.accessHash !== undefined ? { userId: String(user.id), accessHash: String(user.accessHash) } : undefined;

/**
 * Asks Telegram who the recipient is: `@username` (contacts.resolveUsername); digits as a phone number
 * with country code (contacts.resolvePhone, as Telegram Desktop resolves numbers); digits that are the
 * id of a user among the account's recent chats (messages.getDialogs); last, a number as a contact
 * imported for the send and removed again after it (importing strangers is what Telegram's anti-spam
 * watches, so it is the last resort and never kept).
 */
async function lookUp(client: TelegramAccountClient, recipient: string): Promise<LookedUp> {
  const { Api } = await loadTelegram();
  const isUser = (u: Api.TypeUser): u is Api.User => u instanceof Api.User;
  if (recipient.startsWith('@')) {
    const found = await client.invoke(new Api.contacts.ResolveUsername({ username: recipient.slice(1) }));
    const user = userOf(found.users.find(isUser));
    if (!user) throw new DeliveryError('recipient_not_found', `${recipient} is not a Telegram user`, false);
    return { ...user, forget: nothing };
  }
  if (!/^[0-9]{1,20}$/.test(recipient)) throw new DeliveryError('recipient_not_found', `${recipient} is not a Telegram username, user id or phone number`, false);
  const phoneLike = /^[0-9]{7,15}$/.test(recipient);

  if (phoneLike) {
    try {
      const found = await client.invoke(new Api.contacts.ResolvePhone({ phone: recipient }));
      const user = userOf(found.users.find(isUser));
      if (user) return { ...user, forget: nothing };
    } catch (error) {
      // Not a number anyone can be found by: it may be a user id.
      if (rpcErrorName(error) !== 'PHONE_NOT_OCCUPIED') throw error;
    }
  }

  const dialogs = await client.invoke(new Api.messages.GetDialogs({ offsetPeer: new Api.InputPeerEmpty(), limit: 100, hash: 0 as never, offsetDate: 0, offsetId: 0 }));
  const known = userOf('users' in dialogs ? dialogs.users.find((u): u is Api.User => isUser(u) && String(u.id) === recipient) : undefined);
  if (known) return { ...known, forget: nothing };

  if (!phoneLike) throw new DeliveryError('recipient_not_found', `${recipient} is not a user this Telegram account has talked to`, false);
  const imported = await client.invoke(
    new Api.contacts.ImportContacts({ contacts: [new Api.InputPhoneContact({ clientId: 1 as never, phone: `+${recipient}`, firstName: recipient, lastName: '' })] }),
  );
  const user = imported.users.find(isUser);
  const found = userOf(user);
  if (!user || !found) {
    throw new DeliveryError('recipient_not_found', `${recipient} is neither a Telegram account's phone number (or it hides it from strangers) nor a user this account has talked to`, false);
  }
  return {
    ...found,
    forget: async () => {
      await client.invoke(new Api.contacts.DeleteContacts({ id: [new Api.InputUser({ userId: user.id, accessHash: user.accessHash! })] }));
    },
  };
}
