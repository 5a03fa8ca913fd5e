import fs from 'node:fs';
import path from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { bootstrapOwner, createAccountWithKeys, type CreatedAccount } from './admin/accounts.js';
// app.js (HTTP server, worker, audio) is imported only by serve and worker: the admin commands start faster without it.
import { ConfigError, loadConfig, PACKAGE_ROOT, type Config } from './config.js';
import { isPlanName, limitsFor, PLAN_NAMES, type PlanName } from './core/plans.js';
import { createLogger } from './logger.js';
import { findAccount, listAccounts, updatePlan, type AccountRow } from './store/accounts.js';
import { backupSqlite, BackupFailure } from './cli/backup.js';
import { firstStartBanner } from './cli/first-start.js';
import { ApiClient, Unreachable } from './cli/http.js';
import { csvSummary, SendFailure, sendCsv, sendOne, type SendFields } from './cli/send.js';
import { registerRhythmCommands } from './cli/rhythm.js';
import { counted } from './cli/plural.js';
import { packageVersion } from './package-info.js';
import { noticeEmptyStorage, sqliteExists } from './cli/storage.js';
import { migrate, openDb, type Db } from './store/db.js';
import { checkSecretKey, SecretKeyMismatchError } from './store/key-check.js';
import { SecretBox } from './core/secret-box.js';
import { loadOrCreateSecretKey } from './secret-key.js';
import { findKey, issueKey, listKeys, revokeKey, rollKey, type KeyRow } from './store/keys.js';
import { iso } from './api/views.js';

/** A failure the user can act on: printed as one line on stderr, exit code 1. */
class CliError extends Error {}

const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const json = (value: unknown): void => out(JSON.stringify(value));

async function withDb<T>(config: Config, work: (db: Db) => Promise<T>): Promise<T> {
  const existed = sqliteExists(config);
  const db = await openDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir }).catch((error: unknown) => {
    throw storageFailure(config, error);
  });
  try {
    await migrate(db).catch((error: unknown) => {
      throw storageFailure(config, error);
    });
    // A command run with another DATA_DIR (or DATABASE_URL) than the service's says so, instead of quietly working on an empty database.
    await noticeEmptyStorage(config, db, existed);
    return await work(db);
  } finally {
    await db.close();
  }
}

function parsePlan(value: string): PlanName {
  if (!isPlanName(value)) throw new InvalidArgumentError(`plan must be one of ${PLAN_NAMES.join(', ')}`);
  return value;
}

function parsePositiveInt(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new InvalidArgumentError('must be a positive whole number');
  return Number(value);
}

function parseName(value: string): string {
  if (value.trim() === '') throw new InvalidArgumentError('must not be empty');
  return value.trim();
}

function parseEmail(value: string): string {
  if (!/^[^\s@]+@[^\s@]+$/.test(value)) throw new InvalidArgumentError('must be an email address');
  return value;
}

function parsePassword(value: string): string {
  if (value.length < 8) throw new InvalidArgumentError('must be at least 8 characters');
  return value;
}

const DURATION_UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const MAX_GRACE_MS = 365 * 86_400_000;
function parseDuration(value: string): number {
  const match = /^(\d+)([smhd])$/.exec(value.trim());
  if (!match) throw new InvalidArgumentError('expected a duration such as 30m, 24h or 7d');
  const ms = Number(match[1]) * DURATION_UNITS[match[2]!]!;
  // A grace period is for switching callers over, not for keeping an old key alive for ever.
  if (ms < 1_000 || ms > MAX_GRACE_MS) throw new InvalidArgumentError('must be between 1s and 365d');
  return ms;
}

function printCreatedAccount(created: CreatedAccount, asJson: boolean): void {
  if (asJson) {
    json({
      account_id: created.account.id,
      keys: {
        test: { id: created.testKey.row.id, secret: created.testKey.secret },
        live: { id: created.liveKey.row.id, secret: created.liveKey.secret },
      },
    });
    return;
  }
  out(`account  ${created.account.id}  (${created.account.name}, plan ${created.account.plan})`);
  out(`sandbox key  ${created.testKey.row.id}  ${created.testKey.secret}`);
  out(`live key     ${created.liveKey.row.id}  ${created.liveKey.secret}`);
  out('The secrets are shown once: store them now.');
}

const keyView = (key: KeyRow) => ({
  id: key.id,
  env: key.env,
  prefix: key.prefix,
  created_at: iso(key.created_at),
  expires_at: key.expires_at === null ? null : iso(key.expires_at),
  revoked_at: key.revoked_at === null ? null : iso(key.revoked_at),
  last_used_at: key.last_used_at === null ? null : iso(key.last_used_at),
});

/** An account as `accounts list` and `accounts show` print it: the limits in force, not the raw overrides. */
const accountView = (account: AccountRow) => {
  const limits = limitsFor(account.plan as PlanName, { rateLimit: account.rate_limit, quota: account.quota });
  return {
    id: account.id,
    name: account.name,
    email: account.email,
    plan: account.plan,
    rate_limit_per_minute: limits.sendPerMinute,
    monthly_quota: limits.monthlyQuota,
    owner: account.is_owner === 1,
    created_at: iso(account.created_at),
  };
};


function parseSeconds(value: string): number {
  if (!/^\d+(\.\d+)?$/.test(value) || Number(value) <= 0) throw new InvalidArgumentError('must be a number of seconds');
  return Number(value);
}

/** The API of the service on this machine unless --url says otherwise. */
const defaultApiUrl = (): string => `http://127.0.0.1:${loadConfig().port}/api/v1`;

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** Storage that cannot be opened at start-up, said in terms of the variable that chose it. */
function storageFailure(cfg: Config, error: unknown): CliError {
  if (error instanceof SecretKeyMismatchError) return new CliError(error.message);
  // PostgreSQL's "database does not exist": the first thing to do on a new server, so say how.
  if (cfg.databaseUrl && (error as { code?: string }).code === '3D000') {
    const name = (() => {
      try {
        return decodeURIComponent(new URL(cfg.databaseUrl!).pathname.slice(1)) || 'voicenote';
      } catch {
        return 'voicenote';
      }
    })();
    return new CliError(`DATABASE_URL: database "${name}" does not exist; create it first (createdb ${name}, or CREATE DATABASE ${name}; as a PostgreSQL superuser), then run voicenote migrate`);
  }
  return cfg.databaseUrl
    ? new CliError(`DATABASE_URL: cannot open the database: ${messageOf(error)}`)
    : new CliError(`DATA_DIR: cannot open the database in ${cfg.dataDir}: ${messageOf(error)}`);
}

/**
 * Stops on SIGTERM/SIGINT with `stop`, exit 0 once it has finished. After `graceMs` (deliveries in hand
 * finishing) plus `marginMs` (aborts, then closing connections) the process ends regardless, exit 1.
 */
function onSignals(stop: () => Promise<void>, { graceMs, marginMs }: { graceMs: number; marginMs: number }): void {
  let stopping = false;
  const handler = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`voicenote: ${signal} received, shutting down\n`);
    // A hard deadline: whatever hangs (a platform that never answers, a socket that never closes), the
    // process ends. Leases still held then run out and other workers take those messages.
    setTimeout(() => {
      process.stderr.write(`voicenote: shutdown did not finish in time (SHUTDOWN_GRACE_MS + SHUTDOWN_MARGIN_MS = ${graceMs + marginMs} ms); exiting with code 1\n`);
      process.exit(1);
    }, graceMs + marginMs).unref();
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`voicenote: shutdown failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => handler('SIGTERM'));
  process.once('SIGINT', () => handler('SIGINT'));
}

export function buildProgram(): Command {
  const program = new Command('voicenote')
    .description('Voice notes on LinkedIn, Telegram and WhatsApp through one HTTP API')
    .version(packageVersion(), '-V, --version', 'print the version')
    .exitOverride()
    .configureOutput({
      writeErr: (text) => process.stderr.write(text),
      // A failing command prints one line: commander puts "(Did you mean …?)" on a line of its own.
      // Same prefix as the CLI's own errors, so scripts can match one pattern.
      outputError: (text, write) => write(`voicenote: ${text.trimEnd().replace(/^error: /, '').replace(/\s*\n\s*/g, ' ')}\n`),
    });
  const config = (): Config => loadConfig();

  program
    .command('serve')
    .description('run the HTTP API (and the delivery worker, unless --no-worker)')
    .option('--no-worker', 'do not run the delivery worker in this process')
    .action(async (options: { worker: boolean }) => {
      const cfg = config();
      const logger = createLogger(cfg.logLevel);
      const { createApp } = await import('./app.js');
      const app = await createApp(cfg, { worker: options.worker, logger }).catch((error: unknown) => {
        throw storageFailure(cfg, error);
      });
      onSignals(() => app.close(), { graceMs: cfg.shutdownGraceMs, marginMs: cfg.shutdownMarginMs });
      let address: string;
      try {
        address = await app.server.app.listen({ port: cfg.port, host: cfg.host });
      } catch (error) {
        await app.close().catch(() => undefined);
        throw new CliError(`PORT/HOST: cannot listen on ${cfg.host}:${cfg.port}: ${messageOf(error)}`);
      }
      // Only once the service is up: a start that failed leaves no owner behind whose keys were never shown.
      const owner = await bootstrapOwner(app.services.db.kysely, cfg.ownerEmail);
      if (owner) process.stderr.write(firstStartBanner(owner, cfg));
      logger.info({ address, worker: options.worker, storage: app.services.db.dialect }, 'voicenote is listening');
    });

  program
    .command('worker')
    .description('run only the delivery worker')
    .action(async () => {
      const cfg = config();
      const { openServices, startWorker } = await import('./app.js');
      const opened = await openServices(cfg, { logger: createLogger(cfg.logLevel) }).catch((error: unknown) => {
        throw storageFailure(cfg, error);
      });
      const running = startWorker(opened.services);
      opened.attachWorker(running.worker);
      opened.services.logger.info({ storage: opened.services.db.dialect }, 'voicenote worker started');
      onSignals(async () => {
        await running.stop();
        await opened.close();
      }, { graceMs: cfg.shutdownGraceMs, marginMs: cfg.shutdownMarginMs });
    });

  program
    .command('migrate')
    .description('apply pending database migrations')
    .action(async () => {
      // Not withDb: it migrates first, and this command should report what it applied itself.
      const cfg = config();
      const db = await openDb({ databaseUrl: cfg.databaseUrl, dataDir: cfg.dataDir }).catch((error: unknown) => {
        throw storageFailure(cfg, error);
      });
      let applied: string[];
      try {
        applied = await migrate(db).catch((error: unknown) => {
          throw storageFailure(cfg, error);
        });
        // The key check is stored (or verified) here too, so a database is bound to its key from the start.
        await checkSecretKey(db.kysely, new SecretBox(loadOrCreateSecretKey(cfg.dataDir, cfg.secretKey)));
      } finally {
        await db.close();
      }
      out(applied.length === 0 ? 'database is up to date' : `applied ${applied.join(', ')}`);
    });

  const accounts = program.command('accounts').description('manage accounts');
  accounts
    .command('create')
    .description('create an account with one sandbox and one live key')
    .addOption(new Option('--name <name>', 'account name').argParser(parseName).makeOptionMandatory())
    .addOption(new Option('--email <email>', 'contact and dashboard login').argParser(parseEmail))
    .addOption(new Option('--plan <plan>', 'starter, growth, scale or enterprise').argParser(parsePlan).default('starter'))
    .addOption(new Option('--password <password>', 'dashboard password, at least 8 characters').argParser(parsePassword))
    .option('--json', 'print one JSON object')
    .action(async (options: { name: string; email?: string; plan: PlanName; password?: string; json?: boolean }) => {
      const created = await withDb(config(), (db) =>
        createAccountWithKeys(db.kysely, { name: options.name, email: options.email ?? null, plan: options.plan, password: options.password ?? null }),
      );
      printCreatedAccount(created, options.json === true);
    });
  accounts
    .command('list')
    .description('list every account')
    .option('--json', 'print one JSON object')
    .action(async (options: { json?: boolean }) => {
      const rows = await withDb(config(), (db) => listAccounts(db.kysely));
      const views = rows.map(accountView);
      if (options.json) {
        json({ accounts: views });
        return;
      }
      for (const a of views) {
        out(`${a.id}  ${a.name}${a.email ? ` <${a.email}>` : ''}  plan ${a.plan}  ${a.rate_limit_per_minute}/min  quota ${a.monthly_quota}${a.owner ? '  owner' : ''}  created ${a.created_at}`);
      }
    });
  accounts
    .command('show <account_id>')
    .description('one account with its keys')
    .option('--json', 'print one JSON object')
    .action(async (accountId: string, options: { json?: boolean }) => {
      const { account, keys } = await withDb(config(), async (db) => {
        const found = await findAccount(db.kysely, accountId);
        if (!found) throw new CliError(`no account ${accountId}`);
        return { account: found, keys: await listKeys(db.kysely, accountId) };
      });
      const view = { account: accountView(account), keys: keys.map(keyView) };
      if (options.json) {
        json(view);
        return;
      }
      const a = view.account;
      out(`account  ${a.id}  ${a.name}${a.email ? ` <${a.email}>` : ''}${a.owner ? '  (owner)' : ''}`);
      out(`plan     ${a.plan}: ${a.rate_limit_per_minute} sends per minute per key, ${a.monthly_quota} per billing period`);
      out(`created  ${a.created_at}`);
      for (const key of view.keys) {
        const state = key.revoked_at ? `revoked ${key.revoked_at}` : key.expires_at ? `expires ${key.expires_at}` : 'active';
        out(`key      ${key.id}  ${key.env.padEnd(4)}  ${key.prefix}…  ${state}`);
      }
    });
  accounts
    .command('set-plan <account_id>')
    .description('change the plan, optionally with per-account limits')
    .addOption(new Option('--plan <plan>', 'starter, growth, scale or enterprise').argParser(parsePlan).makeOptionMandatory())
    .addOption(new Option('--rate-limit <n>', 'sends per minute per key').argParser(parsePositiveInt))
    .addOption(new Option('--quota <n>', 'voice notes per billing period').argParser(parsePositiveInt))
    .option('--json', 'print one JSON object')
    .action(async (accountId: string, options: { plan: PlanName; rateLimit?: number; quota?: number; json?: boolean }) => {
      const account = await withDb(config(), async (db) => {
        if (!(await findAccount(db.kysely, accountId))) throw new CliError(`no account ${accountId}`);
        // The plan's own limits apply unless this command sets others: a plan change never keeps stale overrides.
        return updatePlan(db.kysely, accountId, { plan: options.plan, rateLimit: options.rateLimit ?? null, quota: options.quota ?? null });
      });
      if (!account) throw new CliError(`no account ${accountId}`);
      if (options.json) json({ account_id: account.id, plan: account.plan, rate_limit: account.rate_limit, quota: account.quota });
      else out(`account ${account.id} is on plan ${account.plan}`);
    });

  const keys = program.command('keys').description('manage API keys');
  keys
    .command('create')
    .description('issue a new key')
    .requiredOption('--account <id>', 'account id')
    .addOption(
      new Option('--env <env>', 'test (sandbox) or live').choices(['test', 'live']).makeOptionMandatory(),
    )
    .option('--json', 'print one JSON object')
    .action(async (options: { account: string; env: 'test' | 'live'; json?: boolean }) => {
      const issued = await withDb(config(), async (db) => {
        if (!(await findAccount(db.kysely, options.account))) throw new CliError(`no account ${options.account}`);
        return issueKey(db.kysely, options.account, options.env);
      });
      if (options.json) json({ id: issued.row.id, env: issued.row.env, secret: issued.secret });
      else out(`${issued.row.id}  ${issued.secret}  (shown once)`);
    });
  keys
    .command('list')
    .description("list an account's keys")
    .requiredOption('--account <id>', 'account id')
    .option('--json', 'print one JSON object')
    .action(async (options: { account: string; json?: boolean }) => {
      const rows = await withDb(config(), async (db) => {
        if (!(await findAccount(db.kysely, options.account))) throw new CliError(`no account ${options.account}`);
        return listKeys(db.kysely, options.account);
      });
      if (options.json) {
        json({ keys: rows.map(keyView) });
        return;
      }
      for (const key of rows.map(keyView)) {
        const state = key.revoked_at ? `revoked ${key.revoked_at}` : key.expires_at ? `expires ${key.expires_at}` : 'active';
        out(`${key.id}  ${key.env.padEnd(4)}  ${key.prefix}…  created ${key.created_at}  ${state}`);
      }
    });
  keys
    .command('roll <key_id>')
    .description('issue a successor; the old key stays valid until --expires-in has passed')
    .addOption(new Option('--expires-in <duration>', 'how long the old key keeps working').argParser(parseDuration).default(86_400_000, '24h'))
    .option('--json', 'print one JSON object')
    .action(async (keyId: string, options: { expiresIn: number; json?: boolean }) => {
      const rolled = await withDb(config(), async (db) => {
        const old = await findKey(db.kysely, keyId);
        if (!old) throw new CliError(`no key ${keyId}`);
        if (old.revoked_at !== null) throw new CliError(`key ${keyId} is revoked`);
        if (old.expires_at !== null && old.expires_at <= Date.now()) throw new CliError(`key ${keyId} has expired`);
        return { old, ...(await rollKey(db.kysely, old, options.expiresIn)) };
      });
      const view = {
        id: rolled.row.id,
        env: rolled.row.env,
        secret: rolled.secret,
        replaces: rolled.old.id,
        old_key_expires_at: iso(rolled.oldExpiresAt),
      };
      if (options.json) json(view);
      else out(`${view.id}  ${view.secret}  (shown once); ${view.replaces} keeps working until ${view.old_key_expires_at}`);
    });
  keys
    .command('revoke <key_id>')
    .description('revoke a key at once')
    .option('--json', 'print one JSON object')
    .action(async (keyId: string, options: { json?: boolean }) => {
      await withDb(config(), async (db) => {
        const key = await findKey(db.kysely, keyId);
        if (!key) throw new CliError(`no key ${keyId}`);
        if (key.revoked_at !== null) throw new CliError(`key ${keyId} is already revoked`);
        await revokeKey(db.kysely, keyId);
      });
      if (options.json) json({ id: keyId, revoked: true });
      else out(`revoked ${keyId}`);
    });

  program
    .command('send')
    .description('send one voice note (or one per row of --csv FILE) through the HTTP API')
    .option('--key <key>', 'API key (sk_test_… or sk_live_…); default: the VOICENOTE_KEY environment variable')
    .option('--url <base>', 'API base address (default http://127.0.0.1:$PORT/api/v1)')
    .option('--csv <file>', 'one send per row: platform, recipient, audio_url [, caption, duration, send_at, bot_token, li_at, csrf_token, user_agent, cookies, session_id]')
    .option('--platform <platform>', 'linkedin, telegram or whatsapp')
    .option('--recipient <recipient>', 'who receives it')
    .option('--audio <url>', 'http(s) URL of the audio')
    .option('--bot-token <token>', 'telegram: the bot token')
    .option('--li-at <cookie>', 'linkedin: the li_at cookie')
    .option('--csrf-token <token>', 'linkedin: the csrf token (ajax:…)')
    .option('--user-agent <ua>', "linkedin: the User-Agent of the browser the cookies come from")
    .option('--cookies <header>', "linkedin: that browser's whole Cookie header for linkedin.com")
    .option('--session-id <id>', 'whatsapp: the session (ws_…)')
    .option('--caption <text>', 'telegram: a caption')
    .addOption(new Option('--duration <seconds>', 'duration in seconds (detected when omitted)').argParser(parseSeconds))
    .option('--send-at <time>', 'schedule the send: ISO 8601 with Z or an offset, at most 30 days ahead (2026-12-01T09:00:00Z)')
    .option('--idempotency-key <key>', 'send once even if the command is run again (single sends; --csv derives its own)')
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
        caption?: string;
        duration?: number;
        sendAt?: string;
        idempotencyKey?: string;
        wait?: boolean;
        json?: boolean;
      }) => {
        // The README's quick start exports VOICENOTE_KEY: a key on the command line wins over it.
        const key = options.key ?? (process.env.VOICENOTE_KEY?.trim() || undefined);
        if (key === undefined) throw new CliError('send needs --key KEY (or VOICENOTE_KEY in the environment)');
        const client = new ApiClient(options.url ?? defaultApiUrl(), key);
        if (options.csv !== undefined) {
          const single = ['platform', 'recipient', 'audio', 'botToken', 'liAt', 'csrfToken', 'sessionId', 'caption', 'duration', 'sendAt', 'wait'] as const;
          const mixed = single.filter((name) => options[name] !== undefined);
          if (mixed.length > 0) throw new CliError(`--csv takes every field from the file; drop --${mixed[0]!.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
          let text: string;
          try {
            text = fs.readFileSync(options.csv, 'utf8');
          } catch (error) {
            throw new CliError(`cannot read ${options.csv}: ${messageOf(error)}`);
          }
          const result = await sendCsv(client, text);
          if (options.json) json(result);
          else {
            for (const row of result.rows) if ('error' in row) out(`row ${row.row}: ${row.error.code}: ${row.error.message}`);
            out(csvSummary(result));
          }
          if (result.rejected > 0) throw new CliError(`${result.rejected} of ${result.rows.length} rows rejected`);
          return;
        }
        const missing = (['platform', 'recipient', 'audio'] as const).filter((name) => options[name] === undefined);
        if (missing.length > 0) throw new CliError(`send needs --${missing.join(', --')} (or --csv FILE)`);
        const fields: SendFields = {
          platform: options.platform!,
          recipient: options.recipient!,
          audio_url: options.audio!,
          ...(options.caption !== undefined ? { caption: options.caption } : {}),
          ...(options.duration !== undefined ? { duration: String(options.duration) } : {}),
          ...(options.sendAt !== undefined ? { send_at: options.sendAt } : {}),
          ...(options.botToken !== undefined ? { bot_token: options.botToken } : {}),
          ...(options.liAt !== undefined ? { li_at: options.liAt } : {}),
          ...(options.csrfToken !== undefined ? { csrf_token: options.csrfToken } : {}),
          ...(options.userAgent !== undefined ? { user_agent: options.userAgent } : {}),
          ...(options.cookies !== undefined ? { cookies: options.cookies } : {}),
          ...(options.sessionId !== undefined ? { session_id: options.sessionId } : {}),
        };
        await sendOne(client, { fields, wait: options.wait === true, json: options.json === true, ...(options.idempotencyKey ? { idempotencyKey: options.idempotencyKey } : {}) }, out);
      },
    );

  registerRhythmCommands(program, { withDb: (work) => withDb(config(), work), out, json, fail: (message) => new CliError(message) });

  program
    .command('backup <file>')
    .description('a consistent copy of the embedded SQLite database, safe while the service runs')
    .option('--json', 'print one JSON object')
    .action(async (file: string, options: { json?: boolean }) => {
      const report = await backupSqlite(config(), file);
      if (options.json) {
        json(report);
        return;
      }
      out(`backed up ${report.database} to ${report.file} (${counted(report.accounts, 'account')}, ${counted(report.messages, 'message')}, ${counted(report.bytes, 'byte')})`);
      out(
        report.secret_key === 'SECRET_KEY'
          ? 'To read it you also need this environment\'s SECRET_KEY: keep it, apart from the backup.'
          : fs.existsSync(report.secret_key)
            ? `To read it you also need ${report.secret_key} (not copied): keep it, apart from the backup.`
            : `To read its sealed credentials you need the key that was at ${report.secret_key}, which is not there now: find it, or queued messages and WhatsApp sessions cannot be used.`,
      );
    });

  return program;
}

/**
 * Last resort for true bugs: faults (storage away, a platform down) are handled where they happen, so
 * an error that reaches here is one nobody planned for. Log it and exit non-zero, so a supervisor
 * restarts a clean process; leases of messages in hand run out and other workers take them.
 */
function exitOnBugs(): void {
  const die = (kind: string) => (error: unknown) => {
    const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
    process.stderr.write(`voicenote: ${kind} (a bug): ${detail}\n`);
    process.exit(70);
  };
  process.on('uncaughtException', die('uncaught exception'));
  process.on('unhandledRejection', die('unhandled promise rejection'));
}

export async function main(argv: string[]): Promise<void> {
  exitOnBugs();
  // `voicenote accounts list | head -1`: the reader has gone, which is not a failure of the command.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(0);
    throw error;
  });
  try {
    await buildProgram().parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander has printed its own one-line message (or the help text) already.
      process.exit(error.exitCode === 0 ? 0 : 1);
    }
    const known = error instanceof ConfigError || error instanceof CliError || error instanceof SendFailure || error instanceof BackupFailure || error instanceof Unreachable;
    const message = known ? error.message : error instanceof Error ? error.message : String(error);
    process.stderr.write(`voicenote: ${message.split('\n')[0]}\n`);
    process.exit(1);
  }
}
