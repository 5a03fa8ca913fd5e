import type { FastifyInstance } from 'fastify';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { packageVersion } from '../../package-info.js';
import type { Services } from '../../services.js';
import { authenticate } from '../auth.js';
import { ApiError } from '../errors.js';
import { createMcpServer } from './server.js';
import type { ApiCall } from './tools.js';

/**
 * POST /mcp (docs/mcp.md): the MCP server over Streamable HTTP, stateless (each request its own server
 * and transport, answered as JSON), on when MCP_ENABLED=true. The request passes the API's key gate
 * (401 without a key, the read bucket, the five limit headers); each tool call is then one request of
 * the API made with the same key, so it is authorised, rate-limited and counted exactly as that request.
 */
export function registerMcpRoute(app: FastifyInstance, services: Services, apiPrefix: string): void {
  const version = packageVersion();
  app.register(async (mcp) => {
    mcp.addHook('onRequest', authenticate(services));
    // Any key may talk MCP: what a tool may do is decided by the API request it makes.
    mcp.post('/mcp', { config: { scope: 'read' }, schema: { hide: true } }, async (request, reply) => {
      const authorization = request.headers.authorization!;
      const callApi = async (call: ApiCall) => {
        const answer = await app.inject({
          method: call.method,
          url: `${apiPrefix}${call.path}`,
          remoteAddress: request.ip,
          headers: {
            authorization,
            'x-request-id': request.id,
            ...(call.body === undefined ? {} : { 'content-type': 'application/json' }),
            ...call.headers,
          },
          ...(call.body === undefined ? {} : { payload: JSON.stringify(call.body) }),
        });
        let body: unknown;
        try {
          body = answer.body === '' ? null : JSON.parse(answer.body);
        } catch {
          body = null;
        }
        return { status: answer.statusCode, body };
      };
      const server = createMcpServer({ version, callApi, onFault: (err) => request.log.warn({ err }, 'an MCP tool call failed') });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      // The SDK writes the answer itself: the limit headers the key gate set go on it first.
      const headers = reply.getHeaders();
      reply.hijack();
      for (const [name, value] of Object.entries(headers)) if (value !== undefined) reply.raw.setHeader(name, value as string);
      reply.raw.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    });
    // Stateless: no stream to open with GET, no session to end with DELETE.
    for (const method of ['GET', 'DELETE'] as const) {
      mcp.route({
        method,
        url: '/mcp',
        config: { scope: 'read' },
        schema: { hide: true },
        handler: async (_request, reply) => {
          reply.header('Allow', 'POST');
          throw new ApiError('method_not_allowed', 'POST /mcp only: this MCP server is stateless (no SSE stream, no session to end)');
        },
      });
    }
  });
}
