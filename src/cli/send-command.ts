import fs from 'node:fs';
import { Command, Option } from 'commander';
import { ApiClient } from './http.js';
import { csvSummary, dryRunVerdict, sendCsv, sendOne, type SendFields } from './send.js';
import { CliError, out, json, parseSeconds, defaultApiUrl, messageOf } from './common.js';
import { KEY_HELP, URL_HELP } from './api-command.js';

/** `send`: one voice note, or one per row of a CSV file, through the HTTP API. */
export function registerSendCommand(program: Command): void {
  program
    .command('send')
    .description('send one voice note (or one per row of --csv FILE) through the HTTP API')
    .option('--key <key>', KEY_HELP)
    .option('--url <base>', URL_HELP)
    .option('--csv <file>', 'one send per row: platform, recipient, audio_url [, caption, duration, send_at, recipient_time_zone, cancel_on_reply, recording_indicator, listen, dry_run, bot_token, li_at, csrf_token, user_agent, cookies, session_id, proxy]')
    .option('--platform <platform>', 'linkedin, telegram or whatsapp')
    .option('--recipient <recipient>', 'who receives it')
    .option('--audio <url>', 'http(s) URL of the audio')
    .option('--bot-token <token>', 'telegram: the bot token')
    .option('--li-at <cookie>', 'linkedin: the li_at cookie')
    .option('--csrf-token <token>', 'linkedin: the csrf token (ajax:…)')
    .option('--user-agent <ua>', "linkedin: the User-Agent of the browser the cookies come from")
    .option('--cookies <header>', "linkedin: that browser's whole Cookie header for linkedin.com")
    .option('--session-id <id>', 'whatsapp: the session (ws_…); telegram: a linked account (ts_…) instead of --bot-token')
    .option('--proxy <url>', "telegram bot, linkedin: the sender's own proxy (http://, https://, socks5://, socks5h://), kept for its later sends")
    .option('--caption <text>', 'telegram: a caption')
    .addOption(new Option('--duration <seconds>', 'duration in seconds (detected when omitted)').argParser(parseSeconds))
    .option('--send-at <time>', 'schedule the send: ISO 8601 with Z or an offset, at most 30 days ahead (2026-12-01T09:00:00Z)')
    .option('--recipient-time-zone <zone>', "the recipient's IANA time zone: the account's send window applies there too (America/New_York)")
    .option('--cancel-on-reply', 'with --send-at: a reply from the recipient before then cancels the note')
    .option('--recording-indicator', 'telegram, whatsapp: show "recording…" to the recipient before the note')
    .option('--listen', 'telegram bot, linkedin: listen to the sender for replies (WhatsApp sessions are always heard)')
    .option('--idempotency-key <key>', 'send once even if the command is run again (single sends; --csv derives its own)')
    .option('--dry-run', 'only check: every check of the send (every row with --csv) and its answer, nothing stored, sent or counted')
    .option('--wait', 'follow the message until it is delivered or failed')
    .option('--json', 'print one JSON object')
    .action(
      async (options: {
        key?: string;
        url?: string;
        csv?: string;
        platform?: string;
        recipient?: string;
        audio?: string;
        botToken?: string;
        liAt?: string;
        csrfToken?: string;
        userAgent?: string;
        cookies?: string;
        sessionId?: string;
        proxy?: string;
        caption?: string;
        duration?: number;
        sendAt?: string;
        recipientTimeZone?: string;
        cancelOnReply?: boolean;
        recordingIndicator?: boolean;
        listen?: boolean;
        idempotencyKey?: string;
        wait?: boolean;
        dryRun?: boolean;
        json?: boolean;
      }) => {
        // The README's quick start exports VOICENOTE_KEY: a key on the command line wins over it.
        const key = options.key ?? (process.env.VOICENOTE_KEY?.trim() || undefined);
        if (key === undefined) throw new CliError('send needs --key KEY (or VOICENOTE_KEY in the environment)');
        const client = new ApiClient(options.url ?? defaultApiUrl(), key);
        if (options.csv !== undefined) {
          const single = ['platform', 'recipient', 'audio', 'botToken', 'liAt', 'csrfToken', 'sessionId', 'proxy', 'caption', 'duration', 'sendAt', 'recipientTimeZone', 'cancelOnReply', 'recordingIndicator', 'listen', 'wait'] as const;
          const mixed = single.filter((name) => options[name] !== undefined);
          if (mixed.length > 0) throw new CliError(`--csv takes every field from the file; drop --${mixed[0]!.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
          let text: string;
          try {
            text = fs.readFileSync(options.csv, 'utf8');
          } catch (error) {
            throw new CliError(`cannot read ${options.csv}: ${messageOf(error)}`);
          }
          const result = await sendCsv(client, text, { dryRun: options.dryRun === true });
          if (options.json) json(result);
          else {
            for (const row of result.rows) {
              if ('error' in row) out(`row ${row.row}: ${row.error.code}: ${row.error.message}`);
              else if ('dry_run' in row) out(`row ${row.row}: ${dryRunVerdict(row)}`);
            }
            out(csvSummary(result));
          }
          if (result.rejected > 0) throw new CliError(`${result.rejected} of ${result.rows.length} rows rejected`);
          return;
        }
        if (options.dryRun && options.wait) throw new CliError('--wait follows a sent note; --dry-run sends none: drop one of them');
        const missing = (['platform', 'recipient', 'audio'] as const).filter((name) => options[name] === undefined);
        if (missing.length > 0) throw new CliError(`send needs --${missing.join(', --')} (or --csv FILE)`);
        const fields: SendFields = {
          platform: options.platform!,
          recipient: options.recipient!,
          audio_url: options.audio!,
          ...(options.caption !== undefined ? { caption: options.caption } : {}),
          ...(options.duration !== undefined ? { duration: String(options.duration) } : {}),
          ...(options.sendAt !== undefined ? { send_at: options.sendAt } : {}),
          ...(options.recipientTimeZone !== undefined ? { recipient_time_zone: options.recipientTimeZone } : {}),
          ...(options.cancelOnReply === true ? { cancel_on_reply: 'true' } : {}),
          ...(options.recordingIndicator === true ? { recording_indicator: 'true' } : {}),
          ...(options.listen === true ? { listen: 'true' } : {}),
          ...(options.dryRun === true ? { dry_run: 'true' } : {}),
          ...(options.botToken !== undefined ? { bot_token: options.botToken } : {}),
          ...(options.liAt !== undefined ? { li_at: options.liAt } : {}),
          ...(options.csrfToken !== undefined ? { csrf_token: options.csrfToken } : {}),
          ...(options.userAgent !== undefined ? { user_agent: options.userAgent } : {}),
          ...(options.cookies !== undefined ? { cookies: options.cookies } : {}),
          ...(options.sessionId !== undefined ? { session_id: options.sessionId } : {}),
          ...(options.proxy !== undefined ? { proxy: options.proxy } : {}),
        };
        await sendOne(client, { fields, wait: options.wait === true, json: options.json === true, ...(options.idempotencyKey ? { idempotencyKey: options.idempotencyKey } : {}) }, out);
      },
    );
}
