import type { Command } from 'commander';
import { CliError, defaultApiUrl } from './common.js';
import { ApiClient, describeApiError } from './http.js';

/** What every command that calls the HTTP API takes. */
export interface ApiOptions {
  key?: string;
  url?: string;
  json?: boolean;
}

export const KEY_HELP = 'API key (sk_test_… or sk_live_…); default: the VOICENOTE_KEY environment variable';
export const URL_HELP = "the service's address (http://HOST:PORT, /api/v1 added) or its API base; default $VOICENOTE_URL, else http://127.0.0.1:$PORT/api/v1";

/** --key, --url and --json, as every API command has them. */
export function withApiOptions(command: Command, jsonHelp = 'print the API answer as JSON'): Command {
  return command.option('--key <key>', KEY_HELP).option('--url <base>', URL_HELP).option('--json', jsonHelp);
}

/** The client of a command: a key on the command line wins over VOICENOTE_KEY. */
export function apiClientOf(options: ApiOptions, command: string): ApiClient {
  const key = options.key ?? (process.env.VOICENOTE_KEY?.trim() || undefined);
  if (key === undefined) throw new CliError(`${command} needs --key KEY (or VOICENOTE_KEY in the environment)`);
  return new ApiClient(options.url ?? defaultApiUrl(), key);
}

/** One call whose error is the command's failure ("404 not_found: …"). */
export async function callApi<T>(client: ApiClient, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const answer = await client.request<T>(method, path, body);
  if (!answer.ok) throw new CliError(describeApiError(answer.status, answer.error));
  return answer.body;
}
