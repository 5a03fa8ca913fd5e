import { writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { Command } from 'commander';
import { CliError, json, out } from './common.js';
import { apiClientOf, callApi, withApiOptions, type ApiOptions } from './api-command.js';
import type { ApiClient } from './http.js';

interface TelegramSessionView {
  session_id?: string;
  id?: string;
  status: string;
  username: string | null;
  phone_number: string | null;
  qr_code?: string;
}

type Common = ApiOptions;
const clientOf = (options: Common, command: string) => apiClientOf(options, `telegram-sessions ${command}`);
const call = callApi;

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

/** GET the session every second while its QR code waits for a scan, writing each renewed code to `file`. */
async function waitForScan(client: ApiClient, id: string, file: string | undefined): Promise<TelegramSessionView> {
  let shown: string | undefined;
  for (;;) {
    const session = await call<TelegramSessionView>(client, 'GET', `/telegram/sessions/${encodeURIComponent(id)}`);
    if (session.status !== 'qr_pending') return session;
    if (file && session.qr_code && session.qr_code !== shown) {
      await saveQr(session, file);
      shown = session.qr_code;
    }
    await sleep(1_000);
  }
}

/** `telegram-sessions list|create|show|password|delete`: Telegram accounts linked by QR code, through the HTTP API. */
export function registerTelegramSessionCommands(program: Command): void {
  const group = program.command('telegram-sessions').description('Telegram accounts linked by QR code (ts_… sessions), through the HTTP API');
  const common = (command: Command): Command => withApiOptions(command);

  common(group.command('list').description('the sessions of the key\'s account and environment')).action(async (options: Common) => {
    const body = await call<{ sessions: TelegramSessionView[] }>(clientOf(options, 'list'), 'GET', '/telegram/sessions');
    if (options.json) return json(body);
    if (body.sessions.length === 0) return out('no Telegram sessions');
    for (const session of body.sessions) out(line(session));
  });

  common(group.command('create').description('start linking: writes the QR code to scan (Settings → Devices → Link Desktop Device)'))
    .option('--qr-file <path>', 'where to write the QR code PNG (default: <session id>.png)')
    .option('--wait', 'wait for the scan, keeping the QR file current, and print the session once it is linked (or asks for its password, or expires)')
    .option('--proxy <url>', "the account's own SOCKS5 proxy (socks5:// or socks5h://, with user:password@); checked first, and its linking already goes through it")
    .action(async (options: Common & { qrFile?: string; wait?: boolean; proxy?: string }) => {
      const client = clientOf(options, 'create');
      const body = await call<TelegramSessionView>(client, 'POST', '/telegram/sessions', options.proxy !== undefined ? { proxy: options.proxy } : undefined);
      if (options.json && !options.wait) return json(body);
      const file = await saveQr(body, options.qrFile);
      if (!options.json) {
        out(line(body));
        if (file) out(options.wait ? `QR code: ${file} (kept current while this waits)` : `QR code: ${file} (Telegram renews it every 30 s or so: "telegram-sessions show ${body.session_id} --qr-file ${file}" writes the current one)`);
      }
      if (!options.wait) return;
      const linked = await waitForScan(client, body.session_id!, file);
      if (options.json) return json(linked);
      out(line(linked));
      if (linked.status === 'password_needed') out(`the account has a cloud password: VOICENOTE_TELEGRAM_PASSWORD=… voicenote telegram-sessions password ${body.session_id}`);
      if (linked.status !== 'connected' && linked.status !== 'password_needed') throw new CliError(`the session is ${linked.status}: create a new one`);
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
