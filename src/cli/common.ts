/** What the command modules share: output, errors, storage, argument parsers. */
import { scopeOf, sendersOf } from '../core/key-scopes.js';
import { InvalidArgumentError } from 'commander';
import { type CreatedAccount } from '../admin/accounts.js';
import { loadConfig, type Config } from '../config.js';
import { isPlanName, limitsFor, PLAN_NAMES, type PlanName } from '../core/plans.js';
import { type AccountRow } from '../store/accounts.js';
import { noticeEmptyStorage, sqliteExists } from './storage.js';
import { migrate, openDb, type Db } from '../store/db.js';
import { SecretKeyMismatchError } from '../store/key-check.js';
import { type KeyRow } from '../store/keys.js';
import { iso } from '../api/views.js';


/** A failure the user can act on: printed as one line on stderr, exit code 1. */
export class CliError extends Error {}

export const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
export const json = (value: unknown): void => out(JSON.stringify(value));

export async function withDb<T>(config: Config, work: (db: Db) => Promise<T>): Promise<T> {
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

export function parsePlan(value: string): PlanName {
  if (!isPlanName(value)) throw new InvalidArgumentError(`plan must be one of ${PLAN_NAMES.join(', ')}`);
  return value;
}

export function parsePositiveInt(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new InvalidArgumentError('must be a positive whole number');
  return Number(value);
}

export function parseName(value: string): string {
  if (value.trim() === '') throw new InvalidArgumentError('must not be empty');
  return value.trim();
}

export function parseEmail(value: string): string {
  if (!/^[^\s@]+@[^\s@]+$/.test(value)) throw new InvalidArgumentError('must be an email address');
  return value;
}

export function parsePassword(value: string): string {
  if (value.length < 8) throw new InvalidArgumentError('must be at least 8 characters');
  return value;
}

export const DURATION_UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
export const MAX_GRACE_MS = 365 * 86_400_000;
export function parseDuration(value: string): number {
  const match = /^(\d+)([smhd])$/.exec(value.trim());
  if (!match) throw new InvalidArgumentError('expected a duration such as 30m, 24h or 7d');
  const ms = Number(match[1]) * DURATION_UNITS[match[2]!]!;
  // A grace period is for switching callers over, not for keeping an old key alive for ever.
  if (ms < 1_000 || ms > MAX_GRACE_MS) throw new InvalidArgumentError('must be between 1s and 365d');
  return ms;
}

export function printCreatedAccount(created: CreatedAccount, asJson: boolean): void {
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

export const keyView = (key: KeyRow) => ({
  id: key.id,
  env: key.env,
  prefix: key.prefix,
  created_at: iso(key.created_at),
  expires_at: key.expires_at === null ? null : iso(key.expires_at),
  revoked_at: key.revoked_at === null ? null : iso(key.revoked_at),
  last_used_at: key.last_used_at === null ? null : iso(key.last_used_at),
  scope: scopeOf(key.scope),
  senders: sendersOf(key.senders),
});

/** An account as `accounts list` and `accounts show` print it: the limits in force, not the raw overrides. */
export const accountView = (account: AccountRow) => {
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


export function parseSeconds(value: string): number {
  if (!/^\d+(\.\d+)?$/.test(value) || Number(value) <= 0) throw new InvalidArgumentError('must be a number of seconds');
  return Number(value);
}

/** `--url`, else VOICENOTE_URL, else the API of the service on this machine at `PORT` (3000). */
export const defaultApiUrl = (): string => {
  const fromEnv = process.env.VOICENOTE_URL?.trim();
  return fromEnv ? fromEnv : `http://127.0.0.1:${loadConfig().port}/api/v1`;
};

export const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** Storage that cannot be opened at start-up, said in terms of the variable that chose it. */
export function storageFailure(cfg: Config, error: unknown): CliError {
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

/** The configuration, read when a command runs (not when the program is built). */
export const config = (): Config => loadConfig();
