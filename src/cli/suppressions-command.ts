import { readFile } from 'node:fs/promises';
import { InvalidArgumentError, type Command } from 'commander';
import { CsvError } from '../core/csv.js';
import { readSuppressionCsv, type SuppressionCsvRow } from '../core/suppression-csv.js';
import { CliError, json, out } from './common.js';
import { apiClientOf, callApi, withApiOptions, type ApiOptions } from './api-command.js';
import { describeApiError, type ApiClient } from './http.js';

/** An entry of the suppression list as the API shows it. */
interface Suppression {
  id: string;
  platform: string;
  recipient: string;
  source: string;
  reply_id: string | null;
  note: string | null;
  created_at: string;
}

interface OptOutSettings {
  enabled: boolean;
  keywords: string[];
  built_in_keywords: Record<string, string[]>;
}

/** Entries one POST /suppressions takes at most. */
const PER_CALL = 1_000;
/** JSON bytes of entries per call, under the API's 64 KiB request bodies with room for the envelope. */
const BODY_BUDGET = 60 * 1024;

const line = (s: Suppression): string => `${s.id}  ${s.platform.padEnd(8)} ${s.recipient}  (${s.source}, ${s.created_at})${s.note ? `  ${s.note}` : ''}`;

function parseLimit(value: string): number {
  if (!/^\d{1,3}$/.test(value) || Number(value) < 1 || Number(value) > 100) throw new InvalidArgumentError('must be a whole number from 1 to 100');
  return Number(value);
}

export interface ImportResult {
  rows: number;
  listed: number;
  rejected: Array<{ row: number; error: string }>;
}

/**
 * Lists a file's rows in calls of up to 1,000 (as many as fit in a request body; source `import`). A row the API refuses (its 422 names
 * `recipients[i]`) is reported and left out, and the rest of its call sent again: one bad row never
 * keeps the others off the list.
 */
export async function importSuppressions(client: ApiClient, rows: SuppressionCsvRow[]): Promise<ImportResult> {
  const result: ImportResult = { rows: rows.length, listed: 0, rejected: [] };
  for (let batch of callsOf(rows)) {
    while (batch.length > 0) {
      const recipients = batch.map(entryOf);
      const answer = await client.request<{ data: Suppression[] }>('POST', '/suppressions', { recipients, source: 'import' });
      if (answer.ok) {
        result.listed += batch.length;
        break;
      }
      const field = String((answer.error.details as { field?: unknown } | null)?.field ?? '');
      const index = /^recipients\[(\d+)\]/.exec(field)?.[1];
      if (answer.status !== 422 || index === undefined || batch[Number(index)] === undefined) throw new CliError(describeApiError(answer.status, answer.error));
      const bad = batch[Number(index)]!;
      result.rejected.push({ row: bad.row, error: answer.error.message.replace(`recipients[${index}]`, bad.platform === '*' ? 'recipient' : `${bad.platform} recipient`) });
      batch = batch.filter((r) => r !== bad);
    }
  }
  return result;
}

const entryOf = (r: SuppressionCsvRow) => ({ platform: r.platform, recipient: r.recipient, ...(r.note !== null ? { note: r.note } : {}) });

/** The rows in calls of at most PER_CALL entries and BODY_BUDGET bytes of JSON (requests are capped at 64 KiB). */
function callsOf(rows: SuppressionCsvRow[]): SuppressionCsvRow[][] {
  const calls: SuppressionCsvRow[][] = [];
  let current: SuppressionCsvRow[] = [];
  let bytes = 0;
  for (const row of rows) {
    const size = Buffer.byteLength(JSON.stringify(entryOf(row))) + 1;
    if (current.length > 0 && (current.length >= PER_CALL || bytes + size > BODY_BUDGET)) {
      calls.push(current);
      current = [];
      bytes = 0;
    }
    current.push(row);
    bytes += size;
  }
  if (current.length > 0) calls.push(current);
  return calls;
}

/** `voicenote suppressions add|list|remove|import` and `voicenote opt-outs show|set`, through the HTTP API. */
export function registerSuppressionCommands(program: Command): void {
  const suppressions = program.command('suppressions').description('recipients never written to again (the suppression list), through the HTTP API');

  withApiOptions(suppressions.command('add').argument('<recipient...>').description('list recipients: sends to them are refused and their waiting notes canceled'))
    .option('--platform <platform>', 'linkedin, telegram, whatsapp, or * for every platform', '*')
    .option('--note <text>', 'why (kept with each entry)')
    .action(async (recipients: string[], options: ApiOptions & { platform: string; note?: string }) => {
      const body = { recipients: recipients.map((recipient) => ({ platform: options.platform, recipient, ...(options.note !== undefined ? { note: options.note } : {}) })) };
      const answer = await callApi<{ data: Suppression[] }>(apiClientOf(options, 'suppressions add'), 'POST', '/suppressions', body);
      if (options.json) return json(answer);
      for (const s of answer.data) out(`listed ${line(s)}`);
    });

  withApiOptions(suppressions.command('list').description('the list, newest first'))
    .option('--platform <platform>', 'only this platform (* : entries for every platform)')
    .option('--source <source>', 'only entries listed this way: api, reply, import or dashboard')
    .option('--recipient <recipient>', 'only this recipient, in any form of it')
    .option('--limit <n>', 'entries per page (1–100, default 20)', parseLimit)
    .option('--starting-after <id>', 'the page after this entry')
    .action(async (options: ApiOptions & { platform?: string; source?: string; recipient?: string; limit?: number; startingAfter?: string }) => {
      const query = new URLSearchParams();
      if (options.platform !== undefined) query.set('platform', options.platform);
      if (options.source !== undefined) query.set('source', options.source);
      if (options.recipient !== undefined) query.set('recipient', options.recipient);
      if (options.limit !== undefined) query.set('limit', String(options.limit));
      if (options.startingAfter !== undefined) query.set('starting_after', options.startingAfter);
      const page = await callApi<{ data: Suppression[]; has_more: boolean }>(apiClientOf(options, 'suppressions list'), 'GET', `/suppressions${query.size > 0 ? `?${query}` : ''}`);
      if (options.json) return json(page);
      if (page.data.length === 0) out('no suppressed recipients');
      for (const s of page.data) out(line(s));
      if (page.has_more) out(`more: --starting-after ${page.data.at(-1)!.id}`);
    });

  withApiOptions(suppressions.command('remove').argument('<id>').description('take a recipient off the list (sup_…): sends to them are accepted again')).action(async (id: string, options: ApiOptions) => {
    await callApi(apiClientOf(options, 'suppressions remove'), 'DELETE', `/suppressions/${encodeURIComponent(id)}`);
    if (options.json) return json({ id, deleted: true });
    out(`removed ${id}`);
  });

  withApiOptions(suppressions.command('import').argument('<file>').description('list every row of a CSV file (columns recipient, and optionally platform and note)'))
    .option('--platform <platform>', 'the platform of rows without one (default * : every platform)', '*')
    .action(async (file: string, options: ApiOptions & { platform: string }) => {
      let rows: SuppressionCsvRow[];
      try {
        rows = readSuppressionCsv(await readFile(file, 'utf8'), options.platform);
      } catch (error) {
        if (error instanceof CsvError) throw new CliError(`CSV: ${error.message}`);
        throw new CliError(`cannot read ${file}: ${(error as Error).message}`);
      }
      const result = await importSuppressions(apiClientOf(options, 'suppressions import'), rows);
      // A rejected row fails the run (as `send --csv` does), with or without --json.
      if (result.rejected.length > 0) process.exitCode = 1;
      if (options.json) return json(result);
      for (const r of result.rejected) out(`row ${r.row}: rejected: ${r.error}`);
      out(`${result.listed} listed, ${result.rejected.length} rejected, of ${result.rows} rows`);
    });

  const optOuts = program.command('opt-outs').description('replies that opt recipients out (STOP, baja, abmelden…), through the HTTP API');
  const describe = (s: OptOutSettings): string[] => [
    `opt-outs by reply: ${s.enabled ? 'on' : 'off'}`,
    `own keywords: ${s.keywords.length === 0 ? 'none' : s.keywords.join(', ')}`,
    ...Object.entries(s.built_in_keywords).map(([language, words]) => `built-in (${language}): ${words.join(', ')}`),
  ];
  withApiOptions(optOuts.command('show').description('whether replies opt recipients out, and the keywords')).action(async (options: ApiOptions) => {
    const settings = await callApi<OptOutSettings>(apiClientOf(options, 'opt-outs show'), 'GET', '/opt_out_settings');
    if (options.json) return json(settings);
    for (const text of describe(settings)) out(text);
  });
  withApiOptions(optOuts.command('set').description("turn opt-outs by reply on or off, or set the account's own keywords"))
    .option('--on', 'a reply that is a keyword opts its sender out (the default)')
    .option('--off', 'replies never opt anyone out')
    .option('--keywords <list>', 'the account\'s own keywords, comma-separated ("" clears them)')
    .action(async (options: ApiOptions & { on?: boolean; off?: boolean; keywords?: string }) => {
      if (options.on && options.off) throw new CliError('opt-outs set takes --on or --off, not both');
      const body = {
        ...(options.on ? { enabled: true } : options.off ? { enabled: false } : {}),
        ...(options.keywords !== undefined ? { keywords: options.keywords.split(',').map((k) => k.trim()).filter((k) => k !== '') } : {}),
      };
      if (Object.keys(body).length === 0) throw new CliError('opt-outs set needs --on, --off or --keywords');
      const settings = await callApi<OptOutSettings>(apiClientOf(options, 'opt-outs set'), 'PATCH', '/opt_out_settings', body);
      if (options.json) return json(settings);
      for (const text of describe(settings).slice(0, 2)) out(text);
    });
}
