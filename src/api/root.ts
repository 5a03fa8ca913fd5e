import type { FastifyInstance } from 'fastify';

/** Where a browser pointed at the service's bare address lands: the account dashboard (the API docs are linked from the README, at /docs). */
export const ROOT_REDIRECT = '/dashboard';

/** `GET /` answers 302 to the dashboard instead of a bare 404. */
export function registerRootRedirect(app: FastifyInstance, target: string = ROOT_REDIRECT): void {
  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect(target, 302));
}
