import type { FastifyInstance } from 'fastify';
import { ping } from '../store/db.js';
import type { Services } from '../services.js';
import { diskFull, isDiskFull } from '../store/disk-full.js';
import { ApiError, sendError, storageFull, storageUnavailable } from './errors.js';

/** Probes for orchestrators: alive (the process answers) and ready (storage answers too). */
export function registerHealthRoutes(app: FastifyInstance, services: Services, isDraining: () => boolean): void {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (request, reply) => {
    if (isDraining()) return sendError(reply, new ApiError('service_unavailable', 'shutting down', null, { 'Retry-After': '5' }));
    try {
      await ping(services.db);
    } catch (err) {
      if (isDiskFull(err)) return sendError(reply, storageFull());
      request.log.warn({ err }, 'storage is not reachable');
      return sendError(reply, storageUnavailable());
    }
    // Reads still answer on a full disk; writes do not: not ready, and saying why.
    if (await diskFull(services.db.dialect === 'sqlite' ? services.config.dataDir : undefined)) return sendError(reply, storageFull());
    return { status: 'ready' };
  });
}
