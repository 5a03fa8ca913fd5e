import type { Command } from 'commander';
import type { ApiCall } from '../api/mcp/tools.js';
import { packageVersion } from '../package-info.js';
import { CliError, defaultApiUrl, messageOf } from './common.js';
import { ApiClient } from './http.js';

/**
 * `voicenote mcp`: the MCP server on stdin/stdout for desktop clients (docs/mcp.md). It holds no
 * storage of its own: every tool is a request to a running service's HTTP API, with the key in
 * VOICENOTE_API_KEY (or VOICENOTE_KEY, as the other commands take it) at VOICENOTE_URL. stdout carries
 * only the protocol; anything else goes to stderr.
 */
export function registerMcpCommand(program: Command): void {
  program
    .command('mcp')
    .description('run the MCP server on stdio (for desktop AI clients); it calls the service at VOICENOTE_URL with VOICENOTE_API_KEY')
    .option('--url <base>', "the service's address (http://HOST:PORT); default $VOICENOTE_URL, else http://127.0.0.1:$PORT")
    .action(async (options: { url?: string }) => {
      const key = process.env.VOICENOTE_API_KEY?.trim() || process.env.VOICENOTE_KEY?.trim() || undefined;
      if (key === undefined) throw new CliError('mcp needs an API key in VOICENOTE_API_KEY (sk_test_… or sk_live_…)');
      const client = new ApiClient(options.url ?? defaultApiUrl(), key);
      const callApi = async (call: ApiCall) => {
        const answer = await client.request<unknown>(call.method, call.path, call.body, call.headers);
        return { status: answer.status, body: answer.ok ? answer.body : { error: answer.error } };
      };
      // Loaded here, not with the CLI: the SDK and the API's schemas would slow every other command's start.
      const [{ StdioServerTransport }, { createMcpServer }] = await Promise.all([import('@modelcontextprotocol/sdk/server/stdio.js'), import('../api/mcp/server.js')]);
      const server = createMcpServer({
        version: packageVersion(),
        callApi,
        onFault: (error) => process.stderr.write(`voicenote mcp: ${messageOf(error)}\n`),
      });
      const transport = new StdioServerTransport();
      // The client closing its end is the end of the session.
      process.stdin.on('end', () => process.exit(0));
      await server.connect(transport);
    });
}
