import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Services } from '../services.js';
import { cancelMessage, type CancelOutcome } from '../store/cancel.js';
import { ApiError, notFound } from './errors.js';
import { checkKeySenderOfMessage } from './key-senders.js';
import { MessageIdParams, MessageStatus, withErrors } from './schemas.js';
import { messageStatusView } from './views.js';

/**
 * Cancels one of the owner's notes that no worker has taken yet (the API's route and the dashboard's
 * button). A canceled note that never reached its platform is given back to the monthly quota: this
 * process's usage count learns it at once, so the usage headers show it on the next request.
 */
export async function cancelNote(services: Services, owner: { accountId: string; env: string }, id: string): Promise<CancelOutcome> {
  const outcome = await cancelMessage(services.db.kysely, owner, id);
  if (outcome.kind === 'canceled' && outcome.sent !== undefined) {
    services.callers.noteReturned({ accountId: owner.accountId, env: owner.env, periodStart: Number(outcome.message.period_start) }, outcome.sent);
  }
  return outcome;
}

export function registerCancelRoute(app: FastifyInstance, services: Services): void {
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/messages/:message_id/cancel',
    {
      config: { scope: 'send' },
      schema: {
        summary: 'Cancel a queued or scheduled voice note',
        description:
          'Only a note no worker has taken yet (queued, scheduled with send_at, or waiting for a retry) can be canceled: it is never sent, ' +
          'its status becomes canceled and, unless an earlier attempt reached the platform (a note waiting for a retry after a timeout may have been delivered), ' +
          'it no longer counts against the monthly quota. Otherwise 409 not_cancelable with details.status. A key limited to senders cancels only their notes (403 sender_not_allowed).',
        tags: ['messages'],
        params: MessageIdParams,
        response: { 200: MessageStatus, ...withErrors(404, 409) },
      },
    },
    async (request) => {
      const caller = request.caller!;
      const id = request.params.message_id;
      await checkKeySenderOfMessage(services, caller, id);
      const outcome = await cancelNote(services, { accountId: caller.accountId, env: caller.env }, id);
      if (outcome.kind === 'not_found') throw notFound(`message ${id}`);
      if (outcome.kind === 'not_cancelable') {
        throw new ApiError('not_cancelable', `message ${id} is ${outcome.status}: only a note no worker has taken yet (queued) can be canceled`, {
          status: outcome.status,
        });
      }
      return messageStatusView(outcome.message);
    },
  );
}
