import { readFile } from 'node:fs/promises';
import type { FastifyInstance, onRequestHookHandler } from 'fastify';
import { SAMPLE_CONTENT_TYPE, SAMPLE_PATH_PREFIX, sampleFile } from '../audio/samples.js';
import { ApiError, sendError } from './errors.js';

/** `GET /samples/hello.ogg`: the shipped sample voice note, without a key (it is public anyway). */
export function registerSampleRoute(app: FastifyInstance, limit: onRequestHookHandler): void {
  app.get<{ Params: { name: string } }>(`${SAMPLE_PATH_PREFIX}:name`, { schema: { hide: true }, onRequest: limit }, async (request, reply) => {
    const file = sampleFile(request.params.name);
    if (file === null) return sendError(reply, new ApiError('not_found', `no sample ${request.params.name}`));
    const body = await readFile(file);
    return reply.header('Content-Type', SAMPLE_CONTENT_TYPE).header('Cache-Control', 'public, max-age=3600').send(body);
  });
}
