import { Command, Option } from 'commander';
import { createAccountWithKeys } from '../admin/accounts.js';
import { NoEmailError, setLogin } from '../admin/set-login.js';
import { type PlanName } from '../core/plans.js';
import { findAccount, listAccounts, updatePlan } from '../store/accounts.js';
import { listKeys } from '../store/keys.js';
import { scryptParameters } from '../store/password-hash.js';
import { CliError, out, json, withDb, parsePlan, parsePositiveInt, parseName, parseEmail, parsePassword, printCreatedAccount, keyView, accountView, config } from './common.js';

/** `accounts create|list|show|set-plan|set-login`. */
export function registerAccountCommands(program: Command): void {
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
      const cfg = config();
      const created = await withDb(cfg, (db) =>
        createAccountWithKeys(db.kysely, { name: options.name, email: options.email ?? null, plan: options.plan, password: options.password ?? null, passwordHash: scryptParameters(cfg.passwordHashCost) }),
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
  accounts
    .command('set-login <account_id>')
    .description("set an account's dashboard login: --email, and --password or a generated one printed once; its sign-ins end")
    .addOption(new Option('--email <email>', 'new dashboard email').argParser(parseEmail))
    .addOption(new Option('--password <password>', 'new dashboard password, at least 8 characters (default: generated)').argParser(parsePassword))
    .option('--json', 'print one JSON object')
    .action(async (accountId: string, options: { email?: string; password?: string; json?: boolean }) => {
      const cfg = config();
      const changed = await withDb(cfg, (db) => setLogin(db.kysely, accountId, options, scryptParameters(cfg.passwordHashCost))).catch((error: unknown) => {
        throw error instanceof NoEmailError ? new CliError(error.message) : error;
      });
      if (!changed) throw new CliError(`no account ${accountId}`);
      if (options.json) {
        json({ account_id: changed.accountId, email: changed.email, password: changed.generatedPassword ?? null });
        return;
      }
      out(`account ${changed.accountId} signs in to the dashboard as ${changed.email}`);
      if (changed.generatedPassword) out(`password ${changed.generatedPassword}  (shown once, keep it)`);
      out('every dashboard sign-in of this account has ended');
    });
}
