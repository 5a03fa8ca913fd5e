import type { Command } from 'commander';
import { json, out } from './common.js';
import { apiClientOf, callApi, withApiOptions, type ApiOptions } from './api-command.js';
import { sessionOf } from './send.js';

/** GET /messages/{id} as far as `messages show` prints it. */
interface MessageDetail {
  id: string;
  status: string;
  platform: string;
  recipient: string;
  created_at: string;
  delivered_at: string | null;
  send_at: string | null;
  error: { code: string; message: string } | null;
  cancel_reason?: string | null;
  cancel_on_reply?: boolean;
  attempts: Array<{ attempt: number; outcome: string; error: { code: string; message: string } | null; next_attempt_at: string | null }>;
  replies: Array<{ id: string; type: string; text: string | null; received_at: string }>;
}

interface RecipientCheck {
  platform: string;
  recipient: string;
  exists: boolean | null;
  reason: string | null;
}

function describeMessage(m: MessageDetail): string[] {
  const lines = [`${m.id}  ${m.status}  ${m.platform} → ${m.recipient}  created ${m.created_at}`];
  if (m.send_at) lines.push(`scheduled for ${m.send_at}${m.cancel_on_reply ? ', canceled by a reply before then' : ''}`);
  if (m.delivered_at) lines.push(`delivered ${m.delivered_at}`);
  if (m.error) lines.push(`failed: ${m.error.code}: ${m.error.message}`);
  if (m.status === 'canceled') lines.push(`canceled: ${m.cancel_reason === 'replied' ? 'the recipient replied first' : m.cancel_reason === 'requested' ? 'on request' : m.cancel_reason === 'suppressed' ? 'the recipient is on the suppression list' : 'reason not recorded'}`);
  for (const a of m.attempts) {
    lines.push(`attempt ${a.attempt}: ${a.outcome}${a.error ? ` (${a.error.code}: ${a.error.message})` : ''}${a.next_attempt_at ? `, next at ${a.next_attempt_at}` : ''}`);
  }
  lines.push(m.replies.length === 0 ? 'no replies' : `replies (${m.replies.length}):`);
  for (const r of m.replies) lines.push(`  ${r.received_at}  ${r.type}${r.text !== null ? `  ${r.text}` : ''}`);
  return lines;
}

/** `messages show ID` (GET /messages/{id}: the note, its attempts and its replies) and `recipients check` (POST /recipients/check). */
export function registerMessageCommands(program: Command): void {
  const messages = program.command('messages').description("the account's voice notes, through the HTTP API");
  withApiOptions(messages.command('show').argument('<message_id>').description('one note: its status, attempts, why it was canceled, and what the recipient replied')).action(
    async (id: string, options: ApiOptions) => {
      const detail = await callApi<MessageDetail>(apiClientOf(options, 'messages show'), 'GET', `/messages/${encodeURIComponent(id)}`);
      if (options.json) return json(detail);
      for (const line of describeMessage(detail)) out(line);
    },
  );

  const recipients = program.command('recipients').description('recipients, asked of the platform before a send');
  withApiOptions(recipients.command('check').description('whether the recipient exists for this sender (POST /recipients/check); the same session flags as send'))
    .requiredOption('--platform <platform>', 'linkedin, telegram or whatsapp')
    .requiredOption('--recipient <recipient>', 'as send takes it')
    .option('--bot-token <token>', 'telegram: the bot token')
    .option('--li-at <cookie>', 'linkedin: the li_at cookie')
    .option('--csrf-token <token>', 'linkedin: the csrf token (ajax:…)')
    .option('--user-agent <ua>', 'linkedin: the User-Agent of the browser the cookies come from')
    .option('--cookies <header>', "linkedin: that browser's whole Cookie header for linkedin.com")
    .option('--session-id <id>', 'whatsapp: the session (ws_…); telegram: a linked account (ts_…)')
    .action(
      async (options: ApiOptions & { platform: string; recipient: string; botToken?: string; liAt?: string; csrfToken?: string; userAgent?: string; cookies?: string; sessionId?: string }) => {
        const session = sessionOf({
          ...(options.botToken !== undefined ? { bot_token: options.botToken } : {}),
          ...(options.liAt !== undefined ? { li_at: options.liAt } : {}),
          ...(options.csrfToken !== undefined ? { csrf_token: options.csrfToken } : {}),
          ...(options.userAgent !== undefined ? { user_agent: options.userAgent } : {}),
          ...(options.cookies !== undefined ? { cookies: options.cookies } : {}),
          ...(options.sessionId !== undefined ? { session_id: options.sessionId } : {}),
        });
        const answer = await callApi<RecipientCheck>(apiClientOf(options, 'recipients check'), 'POST', '/recipients/check', { platform: options.platform, recipient: options.recipient, session });
        if (options.json) return json(answer);
        const verdict = answer.exists === true ? 'exists' : answer.exists === false ? 'does not exist' : 'unknown: the platform did not say';
        out(`${answer.platform} ${answer.recipient}: ${verdict}${answer.reason ? ` (${answer.reason})` : ''}`);
      },
    );
}
