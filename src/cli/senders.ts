import type { Command } from 'commander';
import { CliError, json, out } from './common.js';
import { describeApiError, type SenderListItem } from './http.js';
import { apiClientOf, withApiOptions, type ApiOptions } from './api-command.js';

/** One line per sender: who, its status (and why, until when), today's count against its cap. */
function describe(s: SenderListItem): string {
  const today = s.daily_cap === null ? `${s.sent_today} today` : `${s.sent_today}/${s.daily_cap} today`;
  const status = s.status === 'ok' ? 'ok' : `${s.status}${s.until ? ` until ${s.until}` : ''}${s.reason ? `: ${s.reason}` : ''}`;
  return `${s.id}  ${s.platform.padEnd(8)} ${(s.label ?? s.kind).padEnd(40)} ${today.padEnd(12)} ${status}${s.proxy ? `  via ${s.proxy}` : ''}`;
}

/** `senders list`: the senders of the key's account and environment, with their health, through the HTTP API. */
export function registerSenderCommands(program: Command): void {
  const senders = program.command('senders').description("the account's senders (WhatsApp sessions, bots, LinkedIn cookies) and their health");
  withApiOptions(
    senders.command('list').description('every sender the key\'s account and environment used: status, why, until when, today\'s count against the cap'),
    'print one JSON object: {"data": [senders]}',
  )
    .action(async (options: ApiOptions) => {
      const client = apiClientOf(options, 'senders list');
      const all: SenderListItem[] = [];
      for (let after: string | undefined; ; ) {
        const page = await client.senders(after);
        if (!page.ok) throw new CliError(describeApiError(page.status, page.error));
        all.push(...page.body.data);
        if (!page.body.has_more || page.body.data.length === 0) break;
        after = page.body.data.at(-1)!.id;
      }
      if (options.json) json({ data: all });
      else if (all.length === 0) out('no senders yet: one appears once a note of it is delivered or fails');
      else for (const s of all) out(describe(s));
    });

  withApiOptions(
    senders
      .command('proxy')
      .description("set a sender's proxy (http://, https://, socks5://, socks5h://, with user:password@), or clear it with none; checked first, used from its next connection")
      .argument('<sender_id>', 'snd_… (from senders list)')
      .argument('<proxy>', 'the proxy URL, or none'),
    'print the sender as GET /senders/{id} shows it',
  ).action(async (id: string, proxy: string, options: ApiOptions) => {
    const client = apiClientOf(options, 'senders proxy');
    const answer = await client.setSenderProxy(id, proxy === 'none' ? null : proxy);
    if (!answer.ok) throw new CliError(describeApiError(answer.status, answer.error));
    if (options.json) json(answer.body);
    else out(answer.body.proxy ? `${answer.body.id}: through ${answer.body.proxy}` : `${answer.body.id}: no proxy of its own`);
  });
}
