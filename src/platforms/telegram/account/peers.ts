import type { Api } from 'telegram';
import { DeliveryError } from '../../platform.js';
import { loadTelegram, type TelegramAccountClient } from './client.js';

/** The chat a note goes to, and how to tidy up after it (a phone number imported as a contact is removed again). */
export interface ResolvedPeer {
  peer: Api.InputPeerUser;
  userId: string;
  forget(): Promise<void>;
}

const nothing = async (): Promise<void> => undefined;
const asPeer = async (user: Api.User): Promise<Api.InputPeerUser> => {
  const { Api } = await loadTelegram();
  return new Api.InputPeerUser({ userId: user.id, accessHash: user.accessHash! });
};

/**
 * The recipient of a note from a Telegram account: `@username` (contacts.resolveUsername); digits that
 * are the id of a user among the account's recent chats (messages.getDialogs); otherwise digits as a
 * phone number with country code (contacts.importContacts, and the contact removed again after the send:
 * importing strangers is what Telegram's anti-spam watches, so it is done once per note, never kept).
 */
export async function resolvePeer(client: TelegramAccountClient, recipient: string): Promise<ResolvedPeer> {
  const { Api } = await loadTelegram();
  if (recipient.startsWith('@')) {
    const found = await client.invoke(new Api.contacts.ResolveUsername({ username: recipient.slice(1) }));
    const user = found.users.find((u): u is Api.User => u instanceof Api.User);
    if (!user || user.accessHash === undefined) throw new DeliveryError('recipient_not_found', `${recipient} is not a Telegram user`, false);
    return { peer: await asPeer(user), userId: String(user.id), forget: nothing };
  }
  if (!/^[0-9]{1,20}$/.test(recipient)) throw new DeliveryError('recipient_not_found', `${recipient} is not a Telegram username, user id or phone number`, false);

  const dialogs = await client.invoke(new Api.messages.GetDialogs({ offsetPeer: new Api.InputPeerEmpty(), limit: 100, hash: 0 as never, offsetDate: 0, offsetId: 0 }));
  const known = 'users' in dialogs ? dialogs.users.find((u): u is Api.User => u instanceof Api.User && String(u.id) === recipient) : undefined;
  if (known && known.accessHash !== undefined) return { peer: await asPeer(known), userId: recipient, forget: nothing };

  if (!/^[0-9]{7,15}$/.test(recipient)) throw new DeliveryError('recipient_not_found', `${recipient} is not a user this Telegram account has talked to`, false);
  const imported = await client.invoke(
    new Api.contacts.ImportContacts({ contacts: [new Api.InputPhoneContact({ clientId: 1 as never, phone: `+${recipient}`, firstName: recipient, lastName: '' })] }),
  );
  const user = imported.users.find((u): u is Api.User => u instanceof Api.User);
  if (!user || user.accessHash === undefined) {
    throw new DeliveryError('recipient_not_found', `${recipient} is neither a Telegram account's phone number (or it hides it from strangers) nor a user this account has talked to`, false);
  }
  const peer = await asPeer(user);
  return {
    peer,
    userId: String(user.id),
    forget: async () => {
      await client.invoke(new Api.contacts.DeleteContacts({ id: [new Api.InputUser({ userId: user.id, accessHash: user.accessHash! })] }));
    },
  };
}
