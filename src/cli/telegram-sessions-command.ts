import { writeFile } from 'node:fs/promises';
import { Command } from 'commander';
import { ApiClient, describeApiError } from './http.js';
import { CliError, defaultApiUrl, json, out } from './common.js';

interface TelegramSessionView {
  session_id?: string;
  id?: string;
  status: string;
  username: string | null;
  phone_number: string | null;
  qr_code?: string;
}

interface Common {
  key?: string;
  url?: string;
  json?: boolean;
}

function clientOf(options: Common, command: string): ApiClient {
  // A key on the command line wins over VOICENOTE_KEY, as for `send`.
  const key = options.key ?? (process.env.VOICENOTE_KEY?.trim() || undefined);
  if (key === undefined) throw new CliError(`telegram-sessions ${command} needs --key KEY (or VOICENOTE_KEY in the environment)`);
  return new ApiClient(options.url ?? defaultApiUrl(), key);
}

async function call<T>(client: ApiClient, method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const answer = await client.request<T>(method, path, body);
  if (!answer.ok) throw new CliError(describeApiError(answer.status, answer.error));
  return answer.body;
}

const line = (s: TelegramSessionView): string =>
  [s.session_id ?? s.id, s.status, s.username ? `@${s.username}` : '-', s.phone_number ?? '-'].join('\t');

/**
 * The default QR file: named after the session, in the working folder. The id is the server's word (a
 * wrong or hostile --url may answer `../…` or `/…`): only its letters, digits, `_` and `-` make the
 * name, so the file stays in the working folder, and it is created new (never over a file already there).
 */
export function defaultQrFile(sessionId: string | undefined): string {
  const name = (sessionId ?? '').replace(/[^A-Za-z0-9_-]/g, '').slice(0, 64);
  return `${name === '' ? 'telegram-session' : name}.png`;
}

/** The QR code as a PNG file, to open and scan: where --qr-file says, else beside the command (defaultQrFile). */
async function saveQr(session: TelegramSessionView, file: string | undefined): Promise<string | undefined> {
  if (!session.qr_code) return undefined;
  const path = file ?? defaultQrFile(session.session_id);
  const png = Buffer.from(session.qr_code.split(',')[1] ?? '', 'base64');
  try {
    await writeFile(path, png, { flag: file === undefined ? 'wx' : 'w' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new CliError(`${path} exists already; choose the QR code's file with --qr-file`);
    throw error;
  }
  return path;
}

/** `telegram-sessions list|create|show|password|delete`: Telegram accounts linked by QR code, through the HTTP API. */
export function registerTelegramSessionCommands(program: Command): void {
  const group = program.command('telegram-sessions').description('Telegram accounts linked by QR code (ts_… sessions), through the HTTP API');
  const common = (command: Command): Command =>
    command
      .option('--key <key>', 'API key (sk_test_… or sk_live_…); default: the VOICENOTE_KEY environment variable')
      .option('--url <base>', 'API base address (default http://127.0.0.1:$PORT/api/v1)')
      .option('--json', 'print the API answer as JSON');

  common(group.command('list').description('the sessions of the key\'s account and environment')).action(async (options: Common) => {
    const body = await call<{ sessions: TelegramSessionView[] }>(clientOf(options, 'list'), 'GET', '/telegram/sessions');
    if (options.json) return json(body);
    if (body.sessions.length === 0) return out('no Telegram sessions');
    for (const session of body.sessions) out(line(session));
  });

  common(group.command('create').description('start linking: writes the QR code to scan (Settings → Devices → Link Desktop Device)'))
    .option('--qr-file <path>', 'where to write the QR code PNG (default: <session id>.png)')
    .action(async (options: Common & { qrFile?: string }) => {
      const body = await call<TelegramSessionView>(clientOf(options, 'create'), 'POST', '/telegram/sessions');
      if (options.json) return json(body);
      const file = await saveQr(body, options.qrFile);
      out(line(body));
      if (file) out(`QR code: ${file} (Telegram renews it every 30 s or so: "telegram-sessions show ${body.session_id} --qr-file ${file}" writes the current one)`);
    });

  common(group.command('show').argument('<session_id>').description('one session; while qr_pending, --qr-file writes its current QR code'))
    .option('--qr-file <path>', 'where to write the current QR code PNG')
    .action(async (id: string, options: Common & { qrFile?: string }) => {
      const body = await call<TelegramSessionView>(clientOf(options, 'show'), 'GET', `/telegram/sessions/${encodeURIComponent(id)}`);
      if (options.json) return json(body);
      out(line(body));
      if (options.qrFile) {
        const file = await saveQr(body, options.qrFile);
        out(file ? `QR code: ${file}` : 'no QR code: the session is not qr_pending');
      }
    });

  common(group.command('password').argument('<session_id>').description('the cloud password of a password_needed session, read from VOICENOTE_TELEGRAM_PASSWORD (never from the command line)')).action(
    async (id: string, options: Common) => {
      // Not an option: a password on the command line ends up in the shell's history and in `ps`.
      const password = process.env.VOICENOTE_TELEGRAM_PASSWORD;
      if (!password) throw new CliError('set VOICENOTE_TELEGRAM_PASSWORD to the account\'s cloud password');
      const body = await call<TelegramSessionView>(clientOf(options, 'password'), 'POST', `/telegram/sessions/${encodeURIComponent(id)}/password`, { password });
      if (options.json) return json(body);
      out(line(body));
    },
  );

  common(group.command('delete').argument('<session_id>').description('log the account out at Telegram and erase its keys')).action(async (id: string, options: Common) => {
    const body = await call<{ deleted: boolean }>(clientOf(options, 'delete'), 'DELETE', `/telegram/sessions/${encodeURIComponent(id)}`);
    if (options.json) return json(body);
    out(`deleted ${id}`);
  });
}
