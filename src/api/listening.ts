import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { listeningView } from '../message-log/views.js';
import { forgetListener } from '../store/listeners.js';
import { forgetLinkedinListener } from '../store/linkedin-listeners.js';
import { dropListeningAccount } from '../store/listening-accounts.js';
import { findMessage } from '../store/messages.js';
import type { Services } from '../services.js';
import { notFound } from './errors.js';
import { MessageIdParams, withErrors } from './schemas.js';

/**
 * Listening to a note's sender, as the message log shows it, and its end at the account's request:
 * with the last account listening with that credential, the kept credentials erased at once (a
 * Telegram bot's token, a LinkedIn cookie jar) and the listener stopping within seconds.
 */

export const ListeningView = Type.Union(
  [
    Type.Object({
      status: Type.String({ enum: ['listening', 'refused'], description: 'refused: the platform will not let it be listened to (a bot with a webhook)' }),
      reason: Type.Union([Type.String(), Type.Null()], { description: 'Why it is refused; null while listening' }),
      until: Type.String({ format: 'date-time', description: "When this account's listening ends unless a note comes first; the kept credentials are erased then if no other account still listens with them" }),
    }),
    Type.Null(),
  ],
  { description: "Whether this note's sender is listened to for replies (a Telegram bot or a LinkedIn li_at sent with listen: true); null when not" },
);

/** Ends the owner's listening to the sender of one of its notes, erasing what was kept with the last listening account; false when nothing was listened to. */
export async function stopListening(services: Services, account: { accountId: string; env: string }, id: string): Promise<boolean | undefined> {
  const row = await findMessage(services.db.kysely, account, id);
  if (!row) return undefined;
  // Looked up for this account and environment only: a sandbox call never reaches a live listener.
  if (!(await listeningView(services.db.kysely, row))) return false;
  const owner = { platform: row.platform, senderKey: row.sender_key!, ...account };
  // Another account listening with the same credential keeps it (and the poller) until it ends its own.
  if (!(await dropListeningAccount(services.db.kysely, owner))) return true;
  if (row.platform === 'linkedin') await forgetLinkedinListener(services.db.kysely, row.sender_key!);
  else await forgetListener(services.db.kysely, row.sender_key!);
  return true;
}

export function registerListeningRoutes(app: FastifyInstance, services: Services): void {
  app.withTypeProvider<TypeBoxTypeProvider>().delete(
    '/messages/:message_id/listening',
    {
      schema: {
        summary: "Stop listening to this note's sender",
        description:
          "Ends this account's listening to the note's sender in this environment. When no other account or environment listens with the same credential, " +
          "the credentials kept to hear its replies (a Telegram bot's token, a LinkedIn session's cookie jar) are erased and its listener stops; " +
          'otherwise they stay for the others. Replies already recorded stay. 404 when the note is not found or its sender is not listened to.',
        tags: ['messages'],
        params: MessageIdParams,
        response: { 200: Type.Object({ deleted: Type.Boolean() }), ...withErrors(404) },
      },
    },
    async (request) => {
      const caller = request.caller!;
      const stopped = await stopListening(services, { accountId: caller.accountId, env: caller.env }, request.params.message_id);
      if (stopped === undefined) throw notFound(`message ${request.params.message_id}`);
      if (!stopped) throw notFound(`listening to the sender of message ${request.params.message_id}`);
      return { deleted: true };
    },
  );
}
