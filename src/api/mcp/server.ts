import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { TOOLS, type ApiCaller, type Tool } from './tools.js';

/**
 * An MCP server over voicenote's tools. The SDK's low-level Server takes each tool's input schema as
 * JSON Schema, so the API's own schemas are handed over as they are (the high-level McpServer would
 * want them rewritten in zod). Both transports build one: `voicenote mcp` (stdio, the API over HTTP) and
 * POST /mcp (the service's own routes, with the caller's key).
 */

interface ErrorBody {
  code: string;
  message: string;
  details?: unknown;
}

const text = (value: unknown): string => JSON.stringify(value, null, 2);

/** The API's answer as a tool result: its body on success; its error envelope's code and message (never a stack) as a tool error. */
function resultOf(status: number, body: unknown): CallToolResult {
  if (status >= 200 && status < 300) {
    const structured = body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
    return { content: [{ type: 'text', text: text(body ?? null) }], ...(structured ? { structuredContent: structured } : {}) };
  }
  const envelope = (body as { error?: ErrorBody } | null | undefined)?.error;
  const error: ErrorBody =
    envelope && typeof envelope.code === 'string' ? { code: envelope.code, message: envelope.message, details: envelope.details ?? null } : { code: 'internal_error', message: `the API answered ${status}` };
  return { isError: true, content: [{ type: 'text', text: `${error.code}: ${error.message}` }], structuredContent: { error } };
}

const toolError = (code: string, message: string): CallToolResult => ({ isError: true, content: [{ type: 'text', text: `${code}: ${message}` }], structuredContent: { error: { code, message, details: null } } });

function missingRequired(tool: Tool, args: Record<string, unknown>): string | undefined {
  return tool.inputSchema.required?.find((name) => args[name] === undefined || args[name] === null || args[name] === '');
}

export interface McpServerOptions {
  version: string;
  callApi: ApiCaller;
  /** Told of a failure that is not the API's answer (the service unreachable): logged, never shown to the model. */
  onFault?: (error: unknown) => void;
}

export function createMcpServer(options: McpServerOptions): Server {
  const server = new Server({ name: 'voicenote', version: options.version }, { capabilities: { tools: {} } });
  const byName = new Map(TOOLS.map((tool) => [tool.name, tool]));

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: TOOLS.map((tool) => ({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema })),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const tool = byName.get(request.params.name);
    if (!tool) return toolError('not_found', `no tool ${request.params.name}; the tools are ${TOOLS.map((t) => t.name).join(', ')}`);
    const args = request.params.arguments ?? {};
    // A path parameter left out would change which route is called: said here, as the API says a missing field.
    const missing = missingRequired(tool, args);
    if (missing !== undefined) return toolError('invalid_request', `${missing} is required`);
    try {
      const answer = await options.callApi(tool.call(args));
      return resultOf(answer.status, answer.body);
    } catch (error) {
      options.onFault?.(error);
      return toolError('service_unavailable', 'the voicenote service could not be reached; retry shortly');
    }
  });
  return server;
}
