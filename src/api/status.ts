import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Services } from '../services.js';
import { notFound } from './errors.js';
import { MessageIdParams, MessageStatus, withErrors } from './schemas.js';
import { waitView } from '../message-log/views.js';
import { messageStatusView } from './views.js';

export function registerStatusRoute(app: FastifyInstance, services: Services): void {
  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/status/:message_id',
    {
      schema: {
        summary: 'Look up a message',
        tags: ['messages'],
        params: MessageIdParams,
        response: { 200: MessageStatus, ...withErrors(404) },
      },
    },
    async (request) => {
      const caller = request.caller!;
      const row = await services.db.hotPath.findMessageStatus({ accountId: caller.accountId, env: caller.env }, request.params.message_id);
      if (!row) throw notFound(`message ${request.params.message_id}`);
      return { ...messageStatusView(row), ...waitView(row) };
    },
  );
}
